import { describe, expect, it } from "vitest";
import type { Experiment } from "../src/api/types";
import { columnLabel, columnSortKey, compareRuns, configPaths, metricColumn, metricValue, summaryNames, viewFromQuery, viewToHash, type SortKey } from "../src/data/sortRuns";

const run = (id: number, best: number | null, name = `run ${id}`) => ({ id, name, best_return: best, config: {}, tags: [] }) as unknown as Experiment;

describe("runs table view", () => {
  const runs = [run(1, 50), run(2, null), run(3, 200), run(4, 50)];

  it("sorts either way, rows without a value last, ties newest first", () => {
    expect([...runs].sort(compareRuns("best", "desc")).map((e) => e.id)).toEqual([3, 4, 1, 2]);
    expect([...runs].sort(compareRuns("best", "asc")).map((e) => e.id)).toEqual([4, 1, 3, 2]);
    expect([...runs].sort(compareRuns("id", "desc")).map((e) => e.id)).toEqual([4, 3, 2, 1]);
  });

  it("round-trips through the URL, defaults left out", () => {
    const view = viewFromQuery(new URLSearchParams("status=running&tag=a&sort=best&dir=asc"));
    expect(view).toEqual({ status: "running", tag: "a", name: "", sort: "best", dir: "asc", cols: [] });
    expect(viewToHash(view)).toBe("#/?status=running&tag=a&sort=best&dir=asc");
    expect(viewToHash(viewFromQuery(new URLSearchParams("sort=bogus")))).toBe("#/");
  });
});

describe("notes in a table cell", () => {
  it("is the first line of text, its markdown marks left out", async () => {
    const { notesLine } = await import("../src/ui/experimentRow");
    expect(notesLine("## Why\n\nmore")).toBe("Why");
    expect(notesLine("\n- **lr** too high, see [SB3](https://x)")).toBe("lr too high, see SB3");
    expect(notesLine(null)).toBe("");
    expect(notesLine("x".repeat(100))).toHaveLength(80);
  });
});

describe("config columns", () => {
  const withLr = (id: number, lr: unknown) => ({ id, name: "r", config: { lr, model: { hidden_sizes: [64] } }, tags: [] }) as unknown as Experiment;

  it("sort by a config field, missing values last", () => {
    const runs = [withLr(1, 0.001), withLr(2, undefined), withLr(3, 0.01)];
    expect([...runs].sort(compareRuns("config.lr", "desc")).map((e) => e.id)).toEqual([3, 1, 2]);
  });

  it("keeps valid column paths in the URL and lists a config's leaves", () => {
    const view = viewFromQuery(new URLSearchParams("cols=lr,model.hidden_sizes,bad%20path&sort=config.lr"));
    expect(view.cols).toEqual(["lr", "model.hidden_sizes"]);
    expect(view.sort).toBe("config.lr");
    expect(viewToHash(view)).toBe("#/?cols=lr%2Cmodel.hidden_sizes&sort=config.lr&dir=desc");
    expect(configPaths({ lr: 1, model: { hidden_sizes: [64] }, stop: { env_steps: 5 } })).toEqual(["lr", "model.hidden_sizes", "stop.env_steps"]);
  });
});

describe("metric columns", () => {
  it("parse, label and key the last, min or max of a metric", () => {
    expect(metricColumn("max:episode_return_mean")).toEqual({ agg: "max", name: "episode_return_mean" });
    expect(metricColumn("last:system/rss_mb")).toEqual({ agg: "last", name: "system/rss_mb" });
    expect(metricColumn("mean:vf_loss")).toBeNull();
    expect(metricColumn("max:a,b")).toBeNull();
    expect(metricColumn("lr")).toBeNull();
    expect(columnLabel("min:vf_loss")).toBe("vf_loss (min)");
    expect(columnLabel("model.hidden_sizes")).toBe("model.hidden_sizes");
    expect(columnSortKey("min:vf_loss")).toBe("metric.min:vf_loss");
    expect(columnSortKey("lr")).toBe("config.lr");
    expect(summaryNames(["lr", "min:vf_loss", "max:vf_loss", "last:kl"])).toEqual(["vf_loss", "kl"]);
  });

  it("live in the URL with the config columns", () => {
    const view = viewFromQuery(new URLSearchParams("cols=lr,max:vf_loss,bogus:x&sort=metric.max:vf_loss&dir=asc"));
    expect(view.cols).toEqual(["lr", "max:vf_loss"]);
    expect(view.sort).toBe("metric.max:vf_loss");
    expect(viewFromQuery(new URLSearchParams(viewToHash(view).slice(3)))).toEqual(view);
    expect(viewFromQuery(new URLSearchParams("sort=metric.avg:vf_loss")).sort).toBe("id");
  });

  it("sort by the summaries, runs without one last", () => {
    const runs = [1, 2, 3].map((id) => ({ id, name: `r${id}`, config: {} }) as unknown as Experiment);
    const summaries = new Map([
      [1, { vf_loss: { last: 0.5, min: 0.1, max: 3.0 } }],
      [3, { vf_loss: { last: null, min: 0.2, max: 9.0 } }],
    ]);
    const order = (sort: SortKey, dir: "asc" | "desc") => [...runs].sort(compareRuns(sort, dir, 0, summaries)).map((e) => e.id);
    expect(order("metric.max:vf_loss", "desc")).toEqual([3, 1, 2]);
    expect(order("metric.min:vf_loss", "asc")).toEqual([1, 3, 2]);
    expect(order("metric.last:vf_loss", "asc")).toEqual([1, 3, 2]); // no last value: last, ties newest first
    expect(metricValue(summaries, 1, "max:vf_loss")).toBe(3.0);
    expect(metricValue(summaries, 2, "max:vf_loss")).toBeNull();
  });
});
