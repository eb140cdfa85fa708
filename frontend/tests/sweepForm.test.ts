import { describe, expect, it } from "vitest";
import { parseSeeds, parseValues } from "../src/pages/sweepForm";

describe("sweep form values", () => {
  it("reads grid values as JSON where they are, text otherwise", () => {
    expect(parseValues("0.001, 3e-4")).toEqual([0.001, 0.0003]);
    expect(parseValues("tanh, relu")).toEqual(["tanh", "relu"]);
    expect(parseValues("true, null, 64")).toEqual([true, null, 64]);
    expect(parseValues("[[32], [64, 64]]")).toEqual([[32], [64, 64]]);
    expect(parseValues("  ")).toEqual([]);
    expect(() => parseValues("[1, 2")).toThrow();
  });

  it("reads seeds as a list or an inclusive range", () => {
    expect(parseSeeds("0, 1, 2")).toEqual([0, 1, 2]);
    expect(parseSeeds("3-5")).toEqual([3, 4, 5]);
    expect(() => parseSeeds("0, one")).toThrow(/seed "one"/);
  });
});
