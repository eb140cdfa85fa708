import { describe, expect, it } from "vitest";
import { causalEma } from "../src/data/smoothing";

describe("causalEma", () => {
  it("never changes past points when new ones arrive", () => {
    const xs = Array.from({ length: 200 }, (_, i) => Math.sin(i / 7) * 10 + (i % 13));
    const head = causalEma(xs.slice(0, 120), 0.9);
    const all = causalEma(xs, 0.9);
    expect(all.slice(0, 120)).toEqual(head);
  });

  it("is debiased: a constant series stays constant from the first point", () => {
    const out = causalEma([5, 5, 5, 5], 0.95);
    for (const v of out) expect(v).toBeCloseTo(5, 12);
  });

  it("matches a hand computation", () => {
    const w = 0.5;
    const out = causalEma([2, 4], w);
    expect(out[0]).toBeCloseTo(2, 12);
    // acc1 = 1, acc2 = 0.5*1 + 0.5*4 = 2.5; debias 1 - 0.25 = 0.75
    expect(out[1]).toBeCloseTo(2.5 / 0.75, 12);
  });

  it("weight 0 is the identity and gaps stay gaps", () => {
    expect(causalEma([1, null, 3], 0)).toEqual([1, null, 3]);
    const out = causalEma([1, null, Number.NaN, 1], 0.8);
    expect(out[1]).toBeNull();
    expect(out[2]).toBeNull();
    expect(out[3]).toBeCloseTo(1, 12);
  });

  it("rejects weights outside [0, 1)", () => {
    expect(() => causalEma([1], 1)).toThrow();
    expect(() => causalEma([1], -0.1)).toThrow();
  });
});
