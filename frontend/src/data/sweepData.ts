/**
 * Pure shaping of sweep metrics for the sweep page: the band chart's columns (one band and one
 * mean line per group), the ranking by final mean return, and one scatter per grid key.
 */

import type { GroupSeries, MetricGroups } from "../api/sweepTypes";
import type { Aligned } from "./align";

export type BandMode = "ci" | "minmax";

/** Columns for uPlot: x, then per group [upper edge, lower edge, mean]. */
export function bandColumns(m: MetricGroups, mode: BandMode): Aligned {
  const out: Aligned = [m.step.slice()];
  for (const g of m.groups) {
    out.push(mode === "ci" ? g.ci_high : g.max, mode === "ci" ? g.ci_low : g.min, g.mean);
  }
  return out;
}

export interface Ranked {
  rank: number;
  group: GroupSeries;
}

/** Groups by final mean return, best first; groups without a value yet come last. */
export function ranking(groups: readonly GroupSeries[]): Ranked[] {
  const sorted = [...groups].sort((a, b) => {
    const x = a.final.mean;
    const y = b.final.mean;
    if (x === null && y === null) return a.index - b.index;
    if (x === null) return 1;
    if (y === null) return -1;
    return y - x || a.index - b.index;
  });
  return sorted.map((group, i) => ({ rank: i + 1, group }));
}

export interface Scatter {
  key: string;
  /** x per point: the value itself when every value is a number, else its category index. */
  x: number[];
  /** A member's final value (one point per member), null on the group-mean rows. */
  member: (number | null)[];
  /** A group's final mean, null on member rows. */
  mean: (number | null)[];
  /** Category labels when x is an index (strings, lists, booleans). */
  categories: string[] | null;
  /** Numbers over more than a decade, all positive (e.g. learning rates): a log x axis. */
  log: boolean;
  /** The group (its `index`, which picks its colour) of each point. */
  group: number[];
  /** Where the x axis puts its ticks: at the grid's own values (3e-4 and 3e-3, not 1.87e-4). */
  ticks: number[];
}

function show(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** Hyperparameter `key` -> final values: every member's, and each group's mean, sorted by x. */
export function scatter(groups: readonly GroupSeries[], key: string): Scatter {
  const values = groups.map((g) => g.point[key]);
  const numeric = values.every((v) => typeof v === "number" && Number.isFinite(v));
  const categories = numeric ? null : [...new Set(values.map(show))];
  const xOf = (v: unknown) => (numeric ? (v as number) : (categories as string[]).indexOf(show(v)));
  const rows: [number, number | null, number | null, number][] = [];
  for (const g of groups) {
    const x = xOf(g.point[key]);
    for (const f of g.final.members) rows.push([x, f.value, null, g.index]);
    if (g.final.mean !== null) rows.push([x, null, g.final.mean, g.index]);
  }
  rows.sort((a, b) => a[0] - b[0]);
  const xs = numeric ? (values as number[]) : [];
  const log = numeric && xs.every((v) => v > 0) && Math.max(...xs) / Math.min(...xs) >= 10;
  const ticks = [...new Set(groups.map((g) => xOf(g.point[key])))].sort((a, b) => a - b);
  return {
    key,
    x: rows.map((r) => r[0]),
    member: rows.map((r) => r[1]),
    mean: rows.map((r) => r[2]),
    categories,
    log,
    group: rows.map((r) => r[3]),
    ticks,
  };
}
