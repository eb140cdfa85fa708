/**
 * Columnar metric series in the browser: merging the server's downsampled history with live
 * points and zoomed full-resolution ranges, and keeping every buffer bounded.
 *
 * A series is two parallel arrays with strictly increasing steps. Every function here returns a
 * new series or mutates only the one it was given, never both.
 */

import type { Columns } from "../api/types";

export type Series = Columns;

export function emptySeries(): Series {
  return { step: [], value: [] };
}

export function lastStep(s: Series): number {
  return s.step.length ? s.step[s.step.length - 1] : -Infinity;
}

/**
 * Append the points newer than the series' last step (older or repeated steps are dropped, so a
 * websocket backlog that overlaps what we already have is harmless). Non-finite values are
 * skipped. Returns how many points were appended.
 */
export function appendPoints(s: Series, steps: readonly number[], values: readonly (number | null)[]): number {
  let last = lastStep(s);
  let added = 0;
  for (let i = 0; i < steps.length; i++) {
    const x = steps[i];
    const y = values[i];
    if (y === null || y === undefined || !Number.isFinite(y) || !(x > last)) continue;
    s.step.push(x);
    s.value.push(y);
    last = x;
    added++;
  }
  return added;
}

/** Index of the first element of the sorted array `a` that is >= x. */
export function lowerBound(a: readonly number[], x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the first element of the sorted array `a` that is > x. */
export function upperBound(a: readonly number[], x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Replace the points of `base` whose step lies in [lo, hi] by the full-resolution points of
 * `full` in that range. Points outside the range (and live points newer than `full`) stay.
 */
export function mergeRange(base: Series, full: Series, lo: number, hi: number): Series {
  const a = lowerBound(base.step, lo);
  const end = upperBound(base.step, hi);
  const fa = lowerBound(full.step, lo);
  const fb = upperBound(full.step, hi);
  return {
    step: [...base.step.slice(0, a), ...full.step.slice(fa, fb), ...base.step.slice(end)],
    value: [...base.value.slice(0, a), ...full.value.slice(fa, fb), ...base.value.slice(end)],
  };
}

/**
 * Min/max downsampling that keeps spikes: the points are cut into `buckets` equal index ranges
 * and each bucket keeps its minimum and its maximum point, in step order. At most 2*buckets
 * points come out; a series already short enough is returned as a copy.
 */
export function minMaxDownsample(s: Series, buckets: number): Series {
  const n = s.step.length;
  if (n <= 2 * buckets) return { step: s.step.slice(), value: s.value.slice() };
  const out = emptySeries();
  for (let b = 0; b < buckets; b++) {
    const from = Math.floor((b * n) / buckets);
    const to = Math.floor(((b + 1) * n) / buckets);
    if (to <= from) continue;
    let iMin = from;
    let iMax = from;
    for (let i = from + 1; i < to; i++) {
      if (s.value[i] < s.value[iMin]) iMin = i;
      if (s.value[i] > s.value[iMax]) iMax = i;
    }
    const first = Math.min(iMin, iMax);
    const second = Math.max(iMin, iMax);
    out.step.push(s.step[first]);
    out.value.push(s.value[first]);
    if (second !== first) {
      out.step.push(s.step[second]);
      out.value.push(s.value[second]);
    }
  }
  return out;
}

/**
 * A series with a hard size limit for long live streams. When it outgrows `capacity`, its older
 * three quarters are compacted with min/max downsampling (spikes survive, recent points stay at
 * full resolution), so memory stays bounded however long the stream runs.
 */
export class BoundedSeries {
  data: Series = emptySeries();

  constructor(readonly capacity: number) {
    if (capacity < 16) throw new Error(`capacity must be >= 16, got ${capacity}`);
  }

  get length(): number {
    return this.data.step.length;
  }

  /** Replace the contents (e.g. with a fresh server history), compacting if too long. */
  reset(s: Series): void {
    this.data = { step: s.step.slice(), value: s.value.slice() };
    this.compact();
  }

  append(steps: readonly number[], values: readonly (number | null)[]): number {
    const added = appendPoints(this.data, steps, values);
    if (added) this.compact();
    return added;
  }

  /** Swap in full-resolution points for [lo, hi] (a zoom), then re-apply the bound. */
  mergeRange(full: Series, lo: number, hi: number): void {
    this.data = mergeRange(this.data, full, lo, hi);
    this.compact();
  }

  private compact(): void {
    const n = this.data.step.length;
    if (n <= this.capacity) return;
    const keep = Math.floor(this.capacity / 4);
    const cut = n - keep;
    const old = minMaxDownsample(
      { step: this.data.step.slice(0, cut), value: this.data.value.slice(0, cut) },
      Math.floor(this.capacity / 8),
    );
    this.data = {
      step: old.step.concat(this.data.step.slice(cut)),
      value: old.value.concat(this.data.value.slice(cut)),
    };
  }
}

/**
 * Piecewise-linear lookup of `x` in a monotonic reference series (e.g. wall time by env step),
 * used to draw a metric against wall time. Outside the reference range the ends are held.
 */
export function interpolate(ref: Series, x: number): number | null {
  const n = ref.step.length;
  if (n === 0) return null;
  if (x <= ref.step[0]) return ref.value[0];
  if (x >= ref.step[n - 1]) return ref.value[n - 1];
  const i = lowerBound(ref.step, x);
  if (ref.step[i] === x) return ref.value[i];
  const x0 = ref.step[i - 1];
  const x1 = ref.step[i];
  const t = (x - x0) / (x1 - x0);
  return ref.value[i - 1] + t * (ref.value[i] - ref.value[i - 1]);
}

/** The inverse of `interpolate` for a non-decreasing reference: the step at value y. */
export function inverseInterpolate(ref: Series, y: number): number | null {
  return interpolate({ step: ref.value, value: ref.step }, y);
}
