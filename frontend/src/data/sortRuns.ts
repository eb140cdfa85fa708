/**
 * The experiments table's sort and filters, kept in the page's URL (#/?status=running&sort=best
 * &dir=desc) so a view can be bookmarked, shared and reloaded.
 */

import type { Experiment } from "../api/types";
import { elapsedSeconds } from "./format";
import type { Filter } from "./filter";

export type SortKey = "id" | "name" | "env" | "status" | "progress" | "return" | "best" | "steps" | "started" | "duration";
export type SortDir = "asc" | "desc";

export interface ListView extends Filter {
  sort: SortKey;
  dir: SortDir;
}

const VALUE: Record<SortKey, (e: Experiment, now: number) => number | string | null> = {
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

export const SORT_KEYS = Object.keys(VALUE) as SortKey[];

/** Order by `sort`; rows without a value go last either way; ties newest first. */
export function compareRuns(sort: SortKey, dir: SortDir, now = Date.now()): (a: Experiment, b: Experiment) => number {
  const value = VALUE[sort];
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
  const sort = q.get("sort") as SortKey | null;
  return {
    status: q.get("status") ?? "",
    tag: q.get("tag") ?? "",
    name: q.get("name") ?? "",
    sort: sort && SORT_KEYS.includes(sort) ? sort : "id",
    dir: q.get("dir") === "asc" ? "asc" : "desc",
  };
}

/** The list page's hash for `view` (defaults left out: "#/" is newest first, unfiltered). */
export function viewToHash(view: ListView): string {
  const q = new URLSearchParams();
  for (const k of ["status", "tag", "name"] as const) if (view[k]) q.set(k, view[k]);
  if (view.sort !== "id") q.set("sort", view.sort);
  if (view.sort !== "id" || view.dir !== "desc") q.set("dir", view.dir);
  const s = q.toString();
  return s ? `#/?${s}` : "#/";
}
