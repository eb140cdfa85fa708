/**
 * From held series to what one chart draws: optional causal smoothing, x as env steps or wall
 * time (each step mapped through the `time_s` series), all lines aligned on one x axis.
 */

import { alignSeries, fillInnerGaps, type Aligned, type XY } from "./align";
import { interpolate, type Series } from "./series";
import { causalEma } from "./smoothing";

export type XMode = "steps" | "time";

export const WALL_TIME = "time_s";

export function plotData(
  get: (name: string) => Series,
  names: readonly string[],
  xMode: XMode,
  smoothing: number,
  fillGaps = false,
): Aligned {
  const wall = xMode === "time" ? get(WALL_TIME) : null;
  const tables: XY[] = names.map((name) => {
    const s = get(name);
    const y = smoothing > 0 ? causalEma(s.value, smoothing) : s.value;
    if (!wall) return { x: s.step, y };
    const x: number[] = [];
    const yy: (number | null)[] = [];
    let last = -Infinity;
    for (let i = 0; i < s.step.length; i++) {
      const t = interpolate(wall, s.step[i]);
      // Wall time can stall between two steps; keep x strictly increasing for alignment.
      if (t === null || !(t > last)) continue;
      x.push(t);
      yy.push(y[i]);
      last = t;
    }
    return { x, y: yy };
  });
  const aligned = alignSeries(tables);
  if (!fillGaps) return aligned;
  const [xs, ...ys] = aligned;
  return [xs, ...ys.map((y) => fillInnerGaps(xs, y))];
}
