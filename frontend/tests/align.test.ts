import { describe, expect, it } from "vitest";
import { alignSeries } from "../src/data/align";

describe("alignSeries", () => {
  it("joins on the union of x with nulls for missing points", () => {
    const out = alignSeries([
      { x: [1, 3, 5], y: [10, 30, 50] },
      { x: [2, 3, 6], y: [2, 3, 6] },
    ]);
    expect(out).toEqual([
      [1, 2, 3, 5, 6],
      [10, null, 30, 50, null],
      [null, 2, 3, null, 6],
    ]);
  });
  it("handles empty inputs", () => {
    expect(alignSeries([{ x: [], y: [] }])).toEqual([[], []]);
    expect(alignSeries([])).toEqual([[]]);
  });
});

describe("fillInnerGaps", () => {
  it("interpolates inner gaps in x and keeps the ends open", async () => {
    const { fillInnerGaps } = await import("../src/data/align");
    expect(fillInnerGaps([0, 1, 3, 4, 5], [null, 10, null, 40, null])).toEqual([null, 10, 30, 40, null]);
    expect(fillInnerGaps([0, 1], [null, null])).toEqual([null, null]);
  });
});
