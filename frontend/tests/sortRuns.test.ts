import { describe, expect, it } from "vitest";
import type { Experiment } from "../src/api/types";
import { compareRuns, configPaths, viewFromQuery, viewToHash } from "../src/data/sortRuns";

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
