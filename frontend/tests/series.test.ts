import { describe, expect, it } from "vitest";
import {
  BoundedSeries,
  appendPoints,
  interpolate,
  inverseInterpolate,
  mergeRange,
  minMaxDownsample,
  type Series,
} from "../src/data/series";

function ramp(n: number, f: (i: number) => number = (i) => i): Series {
  return { step: Array.from({ length: n }, (_, i) => i * 10), value: Array.from({ length: n }, (_, i) => f(i)) };
}

describe("appendPoints", () => {
  it("appends only points newer than the last step and skips non-finite values", () => {
    const s: Series = { step: [10, 20], value: [1, 2] };
    const added = appendPoints(s, [10, 20, 30, 40, 50], [9, 9, 3, null, Number.NaN]);
    expect(added).toBe(1);
    expect(s).toEqual({ step: [10, 20, 30], value: [1, 2, 3] });
  });

  it("drops out-of-order points inside one batch", () => {
    const s: Series = { step: [], value: [] };
    appendPoints(s, [5, 3, 7, 7], [1, 2, 3, 4]);
    expect(s).toEqual({ step: [5, 7], value: [1, 3] });
  });
});

describe("mergeRange", () => {
  it("replaces the downsampled points of a zoomed range by full resolution, keeping the rest", () => {
    const base: Series = { step: [0, 100, 200, 300, 400], value: [0, 1, 2, 3, 4] };
    const full: Series = { step: [90, 100, 110, 120, 200, 210], value: [9, 10, 11, 12, 20, 21] };
    const merged = mergeRange(base, full, 100, 200);
    expect(merged.step).toEqual([0, 100, 110, 120, 200, 300, 400]);
    expect(merged.value).toEqual([0, 10, 11, 12, 20, 3, 4]);
  });

  it("keeps live points newer than the zoom response", () => {
    const base: Series = { step: [0, 50, 100, 150], value: [0, 5, 10, 15] };
    const merged = mergeRange(base, { step: [0, 25, 50], value: [0, 2, 5] }, 0, 60);
    expect(merged.step).toEqual([0, 25, 50, 100, 150]);
  });

  it("an empty zoom response removes the points of that range (none exist at full resolution)", () => {
    const merged = mergeRange({ step: [1, 2, 3], value: [1, 2, 3] }, { step: [], value: [] }, 2, 2);
    expect(merged.step).toEqual([1, 3]);
  });
});

describe("minMaxDownsample", () => {
  it("keeps a single spike through a 1000x reduction, in step order", () => {
    const s = ramp(100_000, () => 0);
    s.value[54_321] = 1e6;
    s.value[12_345] = -1e6;
    const d = minMaxDownsample(s, 50);
    expect(d.step.length).toBeLessThanOrEqual(100);
    expect(d.value).toContain(1e6);
    expect(d.value).toContain(-1e6);
    for (let i = 1; i < d.step.length; i++) expect(d.step[i]).toBeGreaterThan(d.step[i - 1]);
  });

  it("returns short series unchanged", () => {
    expect(minMaxDownsample(ramp(10), 5)).toEqual(ramp(10));
  });
});

describe("BoundedSeries", () => {
  it("stays within capacity over a long stream and keeps the newest points exact", () => {
    const b = new BoundedSeries(1000);
    for (let k = 0; k < 500; k++) {
      const steps = Array.from({ length: 100 }, (_, i) => (k * 100 + i) * 4);
      b.append(steps, steps.map((x) => Math.sin(x)));
      expect(b.length).toBeLessThanOrEqual(1000);
    }
    const last = 49_999 * 4;
    expect(b.data.step[b.length - 1]).toBe(last);
    expect(b.data.step.slice(-100)).toEqual(Array.from({ length: 100 }, (_, i) => (49_900 + i) * 4));
    for (let i = 1; i < b.length; i++) expect(b.data.step[i]).toBeGreaterThan(b.data.step[i - 1]);
  });

  it("keeps an old spike after compaction", () => {
    const b = new BoundedSeries(64);
    b.append([0, 1, 2], [0, 99, 0]);
    for (let k = 1; k < 100; k++) b.append([k * 10], [0]);
    expect(b.length).toBeLessThanOrEqual(64);
    expect(b.data.value).toContain(99);
  });

  it("rejects a tiny capacity", () => {
    expect(() => new BoundedSeries(4)).toThrow();
  });
});

describe("interpolate", () => {
  const wall: Series = { step: [0, 100, 200], value: [0, 10, 30] };
  it("maps steps to wall time linearly and holds the ends", () => {
    expect(interpolate(wall, 50)).toBe(5);
    expect(interpolate(wall, 150)).toBe(20);
    expect(interpolate(wall, 200)).toBe(30);
    expect(interpolate(wall, 500)).toBe(30);
    expect(interpolate(wall, -1)).toBe(0);
    expect(interpolate({ step: [], value: [] }, 1)).toBeNull();
  });
  it("inverts to steps", () => {
    expect(inverseInterpolate(wall, 20)).toBe(150);
  });
});
