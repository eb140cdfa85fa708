import { describe, expect, it } from "vitest";
import type { Aligned } from "../src/data/align";
import { referenceTables, withOverlay } from "../src/data/overlay";
import type { Reference } from "../src/api/types";

const ref = {
  env_id: "CartPole-v1",
  label: "SB3 PPO (rl-zoo)",
  env_steps: { x: [0, 100], mean: [10, 20], min: [5, 15], max: [15, 25] },
  wall_time_s: { x: [1, 2], mean: [11, 21], min: [6, 16], max: [16, 26] },
} as unknown as Reference;

describe("referenceTables", () => {
  it("gives mean, max, min against the chosen x", () => {
    const [mean, max, min] = referenceTables(ref, "steps");
    expect(mean).toEqual({ x: [0, 100], y: [10, 20] });
    expect(max.y).toEqual([15, 25]);
    expect(min.y).toEqual([5, 15]);
    expect(referenceTables(ref, "time")[0]).toEqual({ x: [1, 2], y: [11, 21] });
  });
});

describe("withOverlay", () => {
  const base: Aligned = [[50], [7]];

  it("adds columns of nulls for hidden (empty) overlays without touching x", () => {
    expect(withOverlay(base, [{ x: [], y: [] }], [])).toEqual([[50], [7], [null]]);
  });

  it("merges the grids and fills band edges between their points", () => {
    const out = withOverlay(base, referenceTables(ref, "steps"), [3, 4]);
    expect(out[0]).toEqual([0, 50, 100]);
    expect(out[1]).toEqual([null, 7, null]); // the experiment's own line is left alone
    expect(out[2]).toEqual([10, null, 20]); // the reference mean: not an edge, gaps stay
    expect(out[3]).toEqual([15, 20, 25]); // max edge, filled at x=50
    expect(out[4]).toEqual([5, 10, 15]); // min edge, filled at x=50
  });
});
