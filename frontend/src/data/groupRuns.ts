/**
 * The compare page's "group by config except seed": runs whose configs are equal once the seed
 * is left out form a group, drawn as its mean over members with a min-max band (what the sweep
 * page does for a sweep, here for any set of runs).
 */

import { alignSeries, fillInnerGaps, type Aligned, type XY } from "./align";
import { diffConfigs } from "./configDiff";

export interface RunGroup {
  /** Indices into the runs given to `groupRuns`, in their order. */
  members: number[];
  /** The fields that tell this group from the others ("lr=0.001"), or "all runs". */
  label: string;
}

function withoutSeed(config: Record<string, unknown>): string {
  const { seed: _seed, ...rest } = config;
  return JSON.stringify(rest, Object.keys(flatKeys(rest)).sort());
}

function flatKeys(obj: unknown, out: Record<string, true> = {}): Record<string, true> {
  if (obj !== null && typeof obj === "object" && !Array.isArray(obj)) {
    for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
      out[k] = true;
      flatKeys(v, out);
    }
  }
  return out;
}

function show(v: unknown): string {
  return v === undefined ? "(absent)" : typeof v === "string" ? v : JSON.stringify(v);
}

/** Groups in the order of their first member; labels name what differs between groups. */
export function groupRuns(configs: readonly Record<string, unknown>[]): RunGroup[] {
  const byKey = new Map<string, number[]>();
  configs.forEach((c, i) => {
    const key = withoutSeed(c ?? {});
    byKey.set(key, [...(byKey.get(key) ?? []), i]);
  });
  const groups = [...byKey.values()];
  const rows = diffConfigs(groups.map((m) => configs[m[0]] ?? {})).filter((r) => r.path !== "seed");
  return groups.map((members, g) => ({
    members,
    label: rows.map((r) => `${r.path}=${show(r.values[g])}`).join(", ") || "all runs",
  }));
}

/**
 * Per group: [mean, max, min] over the members that have a value at each x. Each run's own
 * points are interpolated between its neighbours first, so runs logged at different steps
 * still meet; outside a run's range it does not count.
 */
export function groupColumns(tables: readonly XY[], groups: readonly RunGroup[]): Aligned {
  const [xs, ...cols] = alignSeries(tables);
  const filled = cols.map((y) => fillInnerGaps(xs, y));
  const out: Aligned = [xs];
  for (const g of groups) {
    const mean: (number | null)[] = [];
    const max: (number | null)[] = [];
    const min: (number | null)[] = [];
    for (let i = 0; i < xs.length; i++) {
      const vals = g.members.map((m) => filled[m][i]).filter((v): v is number => v !== null && Number.isFinite(v));
      mean.push(vals.length ? vals.reduce((a, b) => a + b, 0) / vals.length : null);
      max.push(vals.length ? Math.max(...vals) : null);
      min.push(vals.length ? Math.min(...vals) : null);
    }
    out.push(mean, max, min);
  }
  return out;
}
