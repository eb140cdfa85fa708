import { describe, expect, it } from "vitest";
import type { GroupSeries } from "../src/api/sweepTypes";
import { bandColumns, ranking, scatter } from "../src/data/sweepData";
import { fmtValue } from "../src/ui/sweepChart";

function group(index: number, point: Record<string, unknown>, finals: number[]): GroupSeries {
  const mean = finals.length ? finals.reduce((a, b) => a + b, 0) / finals.length : null;
  return {
    index,
    label: JSON.stringify(point),
    point,
    member_ids: finals.map((_, i) => index * 10 + i),
    n: [finals.length, finals.length],
    mean: [1, 2],
    min: [0, 1],
    max: [2, 3],
    ci_low: [0.5, 1.5],
    ci_high: [1.5, 2.5],
    final: {
      n: finals.length,
      mean,
      min: finals.length ? Math.min(...finals) : null,
      max: finals.length ? Math.max(...finals) : null,
      members: finals.map((value, i) => ({ experiment_id: index * 10 + i, seed: i, step: 100, value })),
    },
  };
}

describe("sweep data", () => {
  const groups = [group(0, { lr: 0.01 }, [10, 20]), group(1, { lr: 0.001 }, [50, 70]), group(2, { lr: 0.1 }, [])];

  it("puts upper, lower and mean of each group after x", () => {
    const cols = bandColumns({ step: [0, 10], groups }, "ci");
    expect(cols.length).toBe(1 + 3 * groups.length);
    expect(cols[1]).toEqual([1.5, 2.5]);
    expect(cols[2]).toEqual([0.5, 1.5]);
    expect(cols[3]).toEqual([1, 2]);
    expect(bandColumns({ step: [0, 10], groups }, "minmax")[1]).toEqual([2, 3]);
  });

  it("ranks by final mean, groups without values last", () => {
    expect(ranking(groups).map((r) => [r.rank, r.group.index])).toEqual([
      [1, 1],
      [2, 0],
      [3, 2],
    ]);
  });

  it("scatters numbers on a log axis when they span a decade, categories by index", () => {
    const s = scatter(groups, "lr");
    expect(s.log).toBe(true);
    expect(s.categories).toBeNull();
    expect(s.x).toEqual([0.001, 0.001, 0.001, 0.01, 0.01, 0.01]);
    expect(s.member.filter((v) => v !== null)).toEqual([50, 70, 10, 20]);
    expect(s.mean.filter((v) => v !== null)).toEqual([60, 15]);
    const cat = scatter([group(0, { act: "tanh" }, [1]), group(1, { act: "relu" }, [2])], "act");
    expect(cat.categories).toEqual(["tanh", "relu"]);
    expect(cat.x).toEqual([0, 0, 1, 1]);
    expect(cat.log).toBe(false);
  });

  it("ticks at the grid's values and tells each point's group (its colour)", () => {
    const s = scatter(groups, "lr");
    expect(s.ticks).toEqual([0.001, 0.01, 0.1]);
    expect(s.group).toEqual([1, 1, 1, 0, 0, 0]);
    expect([3e-4, 0.001, 64, 0.25, 0.0625].map(fmtValue)).toEqual(["3e-4", "1e-3", "64", "0.25", "0.0625"]);
  });
});
