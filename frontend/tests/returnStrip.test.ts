import { describe, expect, it } from "vitest";
import { mean, std, stripLayout } from "../src/ui/returnStrip";

describe("return strip", () => {
  it("computes the mean and population std like the service", () => {
    expect(mean([10, 30.5, 20, 7.25])).toBeCloseTo(16.9375);
    // numpy.std([10, 30.5, 20, 7.25]) (ddof=0)
    expect(std([10, 30.5, 20, 7.25])).toBeCloseTo(9.155557, 5);
  });

  it("maps returns onto the axis with the band around the mean", () => {
    const l = stripLayout([0, 10], 120, 60, 10)!;
    expect(l.lo).toBe(0);
    expect(l.hi).toBe(10);
    expect(l.xs).toEqual([10, 110]);
    expect(l.meanX).toBe(60);
    expect(l.bandX0).toBe(10);
    expect(l.bandX1).toBe(110);
    for (const y of l.ys) {
      expect(y).toBeGreaterThanOrEqual(10);
      expect(y).toBeLessThanOrEqual(50);
    }
  });

  it("handles equal returns and no returns", () => {
    const l = stripLayout([500, 500, 500], 100, 40)!;
    expect(l.hi - l.lo).toBe(2);
    expect(new Set(l.ys).size).toBe(3); // jittered apart
    expect(stripLayout([], 100, 40)).toBeNull();
  });
});
