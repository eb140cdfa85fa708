/**
 * The experiments table's sort and filters, kept in the page's URL (#/?status=running&sort=best
 * &dir=desc) so a view can be bookmarked, shared and reloaded.
 */

import type { Experiment, MetricSummary } from "../api/types";
import { elapsedSeconds } from "./format";
import type { Filter } from "./filter";

type BuiltinKey = "id" | "name" | "env" | "status" | "progress" | "return" | "best" | "steps" | "started" | "duration";
/** A built-in column, `config.<dotted path>` (a config field as a column), or
 * `metric.<agg>:<name>` (the last, min or max of a logged metric as a column). */
export type SortKey = BuiltinKey | `config.${string}` | `metric.${string}`;
export type SortDir = "asc" | "desc";

export interface ListView extends Filter {
  sort: SortKey;
  dir: SortDir;
  /** Extra columns: config fields (dotted paths: "lr", "model.hidden_sizes") and metric
   * columns ("max:episode_return_mean", "last:system/rss_mb"). */
  cols: string[];
}

/** What a metric column shows of its series. */
export const METRIC_AGGS = ["last", "min", "max"] as const;
export type MetricAgg = (typeof METRIC_AGGS)[number];
/** Experiment id -> metric name -> summary (GET /metric-summaries). */
export type Summaries = Map<number, Record<string, MetricSummary>>;

const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/;
// The trainer's names and anything a job logs: no commas (the URL's list separator).
const METRIC_NAME = /^[^,\s]{1,128}$/;

export function isConfigPath(path: string): boolean {
  return PATH.test(path);
}

/** `{agg, name}` of a metric column ("max:vf_loss"), or null for anything else. */
export function metricColumn(col: string): { agg: MetricAgg; name: string } | null {
  const at = col.indexOf(":");
  if (at < 0) return null;
  const agg = col.slice(0, at) as MetricAgg;
  const name = col.slice(at + 1);
  return METRIC_AGGS.includes(agg) && METRIC_NAME.test(name) ? { agg, name } : null;
}

export function isColumn(col: string): boolean {
  return isConfigPath(col) || metricColumn(col) !== null;
}

/** The sort key of an extra column. */
export function columnSortKey(col: string): SortKey {
  return metricColumn(col) ? `metric.${col}` : `config.${col}`;
}

/** The header text of an extra column: "lr", "vf_loss (max)". */
export function columnLabel(col: string): string {
  const metric = metricColumn(col);
  return metric ? `${metric.name} (${metric.agg})` : col;
}

/** The metric names the extra columns need summaries of. */
export function summaryNames(cols: readonly string[]): string[] {
  return [...new Set(cols.map(metricColumn).filter((m) => m !== null).map((m) => m.name))];
}

export function metricValue(summaries: Summaries, id: number, col: string): number | null {
  const metric = metricColumn(col);
  const found = metric ? summaries.get(id)?.[metric.name] : undefined;
  return found && metric ? found[metric.agg] : null;
}

/** The value at a dotted path of a config (undefined when absent). */
export function configValue(config: unknown, path: string): unknown {
  let cur: unknown = config;
  for (const k of path.split(".")) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string, unknown>)[k];
  }
  return cur;
}

/** Every leaf path of a config, for the column picker ("stop.env_steps", "lr", ...). */
export function configPaths(config: unknown, prefix = ""): string[] {
  if (config === null || typeof config !== "object" || Array.isArray(config)) return prefix ? [prefix] : [];
  return Object.entries(config as Record<string, unknown>).flatMap(([k, v]) => configPaths(v, prefix ? `${prefix}.${k}` : k));
}

function sortable(v: unknown): number | string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === "number" || typeof v === "string") return v;
  return JSON.stringify(v);
}

const VALUE: Record<BuiltinKey, (e: Experiment, now: number) => number | string | null> = {
  id: (e) => e.id,
  name: (e) => e.name.toLowerCase(),
  env: (e) => String(e.config?.env_id ?? ""),
  status: (e) => e.status,
  progress: (e) => e.progress,
  return: (e) => e.episode_return_mean,
  best: (e) => e.best_return,
  steps: (e) => e.env_steps,
  started: (e) => e.started_at,
  duration: (e, now) => elapsedSeconds(e.started_at, e.finished_at, now),
};

export const SORT_KEYS = Object.keys(VALUE) as BuiltinKey[];

function isSortKey(key: string | null): key is SortKey {
  if (!key) return false;
  if (key.startsWith("metric.")) return metricColumn(key.slice(7)) !== null;
  return (SORT_KEYS as string[]).includes(key) || (key.startsWith("config.") && isConfigPath(key.slice(7)));
}

function valueOf(sort: SortKey, summaries: Summaries): (e: Experiment, now: number) => number | string | null {
  if (sort.startsWith("config.")) {
    const path = sort.slice("config.".length);
    return (e) => sortable(configValue(e.config, path));
  }
  if (sort.startsWith("metric.")) {
    const col = sort.slice("metric.".length);
    return (e) => metricValue(summaries, e.id, col);
  }
  return VALUE[sort as BuiltinKey];
}

/** Order by `sort`; rows without a value go last either way; ties newest first. */
export function compareRuns(sort: SortKey, dir: SortDir, now = Date.now(), summaries: Summaries = new Map()): (a: Experiment, b: Experiment) => number {
  const value = valueOf(sort, summaries);
  const sign = dir === "asc" ? 1 : -1;
  return (a, b) => {
    const [x, y] = [value(a, now), value(b, now)];
    if (x === null && y !== null) return 1;
    if (y === null && x !== null) return -1;
    if (x !== null && y !== null && x !== y) return (x < y ? -1 : 1) * sign;
    return b.id - a.id;
  };
}

export function viewFromQuery(q: URLSearchParams): ListView {
  const sort = q.get("sort");
  const cols = [...new Set((q.get("cols") ?? "").split(",").filter(isColumn))];
  return {
    status: q.get("status") ?? "",
    tag: q.get("tag") ?? "",
    name: q.get("name") ?? "",
    sort: isSortKey(sort) ? sort : "id",
    dir: q.get("dir") === "asc" ? "asc" : "desc",
    cols,
  };
}

/** The list page's hash for `view` (defaults left out: "#/" is newest first, unfiltered). */
export function viewToHash(view: ListView): string {
  const q = new URLSearchParams();
  for (const k of ["status", "tag", "name"] as const) if (view[k]) q.set(k, view[k]);
  if (view.cols.length) q.set("cols", view.cols.join(","));
  if (view.sort !== "id") q.set("sort", view.sort);
  if (view.sort !== "id" || view.dir !== "desc") q.set("dir", view.dir);
  const s = q.toString();
  return s ? `#/?${s}` : "#/";
}
