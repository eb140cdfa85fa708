/**
 * Reference curves (GET /references) as chart tables, and merging such overlay tables into a
 * chart's aligned data: the union of both x grids, band edges gap-filled again afterwards.
 */

import type { Reference } from "../api/types";
import { alignSeries, fillInnerGaps, type Aligned, type XY } from "./align";
import type { XMode } from "./plotData";

/** A reference's mean, max and min (in that order) against env steps or wall time. */
export function referenceTables(ref: Reference, xMode: XMode): [XY, XY, XY] {
  const band = xMode === "time" ? ref.wall_time_s : ref.env_steps;
  return [
    { x: band.x, y: band.mean },
    { x: band.x, y: band.max },
    { x: band.x, y: band.min },
  ];
}

/**
 * `base` (x then its columns) with `extra` tables appended as more columns on the union x.
 * `edges` are the 1-based column indices of band edges in the result: gaps between their
 * points (where only the other grid has an x) are filled linearly so bands stay closed.
 */
export function withOverlay(base: Aligned, extra: readonly XY[], edges: readonly number[]): Aligned {
  if (extra.every((t) => t.x.length === 0)) {
    const width = base[0].length;
    return [...base, ...extra.map(() => new Array<number | null>(width).fill(null))] as Aligned;
  }
  const [xs, ...cols] = base;
  const merged = alignSeries([...cols.map((y) => ({ x: xs, y })), ...extra]);
  const [mx, ...mys] = merged;
  const fill = new Set(edges);
  return [mx, ...mys.map((y, i) => (fill.has(i + 1) ? fillInnerGaps(mx, y) : y))];
}
