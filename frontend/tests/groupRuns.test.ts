import { describe, expect, it } from "vitest";
import { groupColumns, groupRuns } from "../src/data/groupRuns";

describe("group runs by config except seed", () => {
  const configs = [
    { env_id: "CartPole-v1", lr: 0.001, seed: 0, model: { hidden_sizes: [64] } },
    { env_id: "CartPole-v1", lr: 0.0003, seed: 0, model: { hidden_sizes: [64] } },
    { seed: 1, model: { hidden_sizes: [64] }, lr: 0.001, env_id: "CartPole-v1" }, // key order differs
    { env_id: "CartPole-v1", lr: 0.0003, seed: 7, model: { hidden_sizes: [64] } },
  ];

  it("puts runs equal but for the seed together, labelled by what differs", () => {
    expect(groupRuns(configs)).toEqual([
      { members: [0, 2], label: "lr=0.001" },
      { members: [1, 3], label: "lr=0.0003" },
    ]);
    expect(groupRuns([configs[0], configs[2]])).toEqual([{ members: [0, 1], label: "all runs" }]);
  });

  it("averages members at each step, interpolating a run between its own points", () => {
    const tables = [
      { x: [0, 10, 20], y: [0, 10, 20] },
      { x: [0, 20], y: [10, 30] }, // 20 at step 10 by interpolation
      { x: [10], y: [100] }, // its own group
    ];
    const cols = groupColumns(tables, [
      { members: [0, 1], label: "a" },
      { members: [2], label: "b" },
    ]);
    expect(cols[0]).toEqual([0, 10, 20]);
    expect(cols[1]).toEqual([5, 15, 25]); // mean
    expect(cols[2]).toEqual([10, 20, 30]); // max
    expect(cols[3]).toEqual([0, 10, 20]); // min
    expect(cols[4]).toEqual([null, 100, null]);
  });
});
