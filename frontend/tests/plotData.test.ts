import { describe, expect, it } from "vitest";
import { plotData } from "../src/data/plotData";
import type { Series } from "../src/data/series";

const held: Record<string, Series> = {
  a: { step: [100, 200, 300], value: [1, 2, 3] },
  b: { step: [200, 400], value: [20, 40] },
  time_s: { step: [100, 200, 300, 400], value: [1, 2, 4, 8] },
};
const get = (n: string): Series => held[n] ?? { step: [], value: [] };

describe("plotData", () => {
  it("aligns lines on env steps", () => {
    expect(plotData(get, ["a", "b"], "steps", 0)).toEqual([
      [100, 200, 300, 400],
      [1, 2, 3, null],
      [null, 20, null, 40],
    ]);
  });

  it("maps steps to wall time through time_s", () => {
    expect(plotData(get, ["a", "b"], "time", 0)).toEqual([
      [1, 2, 4, 8],
      [1, 2, 3, null],
      [null, 20, null, 40],
    ]);
  });

  it("smooths causally per line before aligning", () => {
    const [, a] = plotData(get, ["a"], "steps", 0.5);
    expect(a[0]).toBeCloseTo(1, 12);
    expect(a[1]).toBeCloseTo((0.5 * 0.5 * 1 + 0.5 * 2) / 0.75, 12);
  });
});
