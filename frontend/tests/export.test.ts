import { describe, expect, it } from "vitest";
import type { Columns } from "../src/api/types";
import { allSeries, toCsv, toJson, type FetchMetrics } from "../src/data/export";

/** A fake service holding `stored`, thinning any series longer than `limit` per response. */
function service(stored: Record<string, Columns>, limit: number): { fetch: FetchMetrics; calls: number } {
  const state = { calls: 0, fetch: null as unknown as FetchMetrics };
  state.fetch = async (names, lo, hi) => {
    state.calls++;
    const series: Record<string, Columns> = {};
    const downsampled: Record<string, boolean> = {};
    for (const n of names) {
      const keep = stored[n].step.map((s, i) => [s, stored[n].value[i]]).filter(([s]) => (lo === undefined || s >= lo) && (hi === undefined || s <= hi));
      const thin = keep.length > limit;
      const rows = thin ? [keep[0], keep[keep.length - 1]] : keep;
      series[n] = { step: rows.map((r) => r[0]), value: rows.map((r) => r[1]) };
      downsampled[n] = thin;
    }
    return { series, downsampled };
  };
  return state;
}

describe("metrics export", () => {
  const stored = {
    ret: { step: [10, 20, 30, 40, 50, 60, 70], value: [1, 2, 3, 4, 5, 6, 7] },
    kl: { step: [30], value: [0.25] },
  };

  it("fetches every point of a series the service thins", async () => {
    const fake = service(stored, 3);
    const all = await allSeries(fake.fetch, ["ret", "kl"]);
    expect(all.ret).toEqual(stored.ret);
    expect(all.kl).toEqual(stored.kl);
    expect(fake.calls).toBeGreaterThan(1);
  });

  it("writes one row per step and columnar JSON", () => {
    expect(toCsv(stored).split("\n").slice(0, 4)).toEqual(["step,kl,ret", "10,,1", "20,,2", "30,0.25,3"]);
    expect(JSON.parse(toJson(7, stored))).toEqual({ experiment_id: 7, series: { kl: stored.kl, ret: stored.ret } });
  });
});
