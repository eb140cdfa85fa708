/**
 * Put several series with their own x values on one shared x axis (what uPlot draws): the union
 * of all x, with null where a series has no point. Inputs must have strictly increasing x.
 */

export interface XY {
  x: readonly number[];
  y: readonly (number | null)[];
}

export type Aligned = [number[], ...(number | null)[][]];

export function alignSeries(tables: readonly XY[]): Aligned {
  const all: number[] = [];
  for (const t of tables) for (const v of t.x) all.push(v);
  all.sort((a, b) => a - b);
  const xs: number[] = [];
  for (const v of all) if (xs.length === 0 || xs[xs.length - 1] !== v) xs.push(v);
  const ys = tables.map((t) => {
    const out: (number | null)[] = new Array(xs.length).fill(null);
    let j = 0;
    for (let i = 0; i < t.x.length; i++) {
      while (xs[j] < t.x[i]) j++;
      out[j] = t.y[i];
    }
    return out;
  });
  return [xs, ...ys];
}

/**
 * Fill the nulls between two known points of an aligned column by linear interpolation in x
 * (leading and trailing nulls stay). Band charts need it: a band's edges are downsampled
 * independently, so on the shared x axis each edge has gaps where the other has points.
 */
export function fillInnerGaps(xs: readonly number[], ys: (number | null)[]): (number | null)[] {
  const out = ys.slice();
  let prev = -1;
  for (let i = 0; i < out.length; i++) {
    if (out[i] === null) continue;
    if (prev >= 0 && i - prev > 1) {
      const x0 = xs[prev];
      const y0 = out[prev] as number;
      const slope = ((out[i] as number) - y0) / (xs[i] - x0);
      for (let j = prev + 1; j < i; j++) out[j] = y0 + slope * (xs[j] - x0);
    }
    prev = i;
  }
  return out;
}
