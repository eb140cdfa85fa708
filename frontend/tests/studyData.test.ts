import { describe, expect, it } from "vitest";
import type { Trial } from "../src/api/studyTypes";
import { bestSoFar, describeSpec, placeStudyErrors, rangeTypes, readSpec, shownValue, trialProgress, type SpaceRowText } from "../src/data/studyData";

function trial(number: number, state: Trial["state"], value: number | null, intermediate: Record<string, number> = {}): Trial {
  const steps = Object.keys(intermediate).map(Number);
  return {
    number,
    state,
    value,
    intermediate,
    latest: steps.length ? intermediate[String(Math.max(...steps))] : null,
    params: {},
    experiment_id: number + 1,
    experiment_status: null,
    env_steps: null,
    note: null,
    created_at: "2026-01-01T00:00:00Z",
    finished_at: null,
  };
}

const row = (over: Partial<SpaceRowText>): SpaceRowText => ({ key: "lr", type: "float", low: "", high: "", log: false, step: "", choices: "", ...over });

describe("study data", () => {
  it("tracks the best value over complete trials in either direction", () => {
    const trials = [trial(3, "complete", 5), trial(0, "complete", 2), trial(1, "pruned", null), trial(2, "complete", 9), trial(4, "running", null, { "1000": 50 })];
    expect(bestSoFar(trials, "maximize")).toEqual({ x: [0, 2, 3], value: [2, 9, 5], best: [2, 9, 9] });
    expect(bestSoFar(trials, "minimize").best).toEqual([2, 2, 2]);
    expect(bestSoFar([], "maximize").x).toEqual([]);
  });

  it("shows a running trial's latest intermediate value, marked as such", () => {
    expect(shownValue(trial(0, "complete", 3))).toEqual({ kind: "final", value: 3, step: null });
    expect(shownValue(trial(0, "running", null, { "2000": 7, "10000": 8 }))).toEqual({ kind: "latest", value: 8, step: 10000 });
    expect(shownValue(trial(0, "running", null)).kind).toBe("none");
  });

  it("counts ended trials of the budget", () => {
    expect(trialProgress({ running: 2, complete: 3, pruned: 1 }, 10)).toEqual({ done: 4, text: "4 / 10 done (3 complete, 2 running, 1 pruned)" });
    expect(trialProgress({}, 5).text).toBe("0 / 5 done");
  });

  it("offers ranges by the field's kind", () => {
    expect(rangeTypes({ kind: "number" })).toEqual(["float", "int", "categorical"]);
    expect(rangeTypes({ kind: "integer" })).toEqual(["int", "categorical"]);
    expect(rangeTypes({ kind: "intlist" })).toEqual(["categorical"]);
    expect(rangeTypes(undefined)).toEqual(["categorical"]);
  });

  it("reads a row into a range, leaving bounds to the API", () => {
    expect(readSpec(row({ low: "1e-4", high: "1e-2", log: true }))).toEqual({ ok: true, spec: { type: "float", low: 1e-4, high: 1e-2, log: true, step: null } });
    expect(readSpec(row({ low: "0.1", high: "0.001" }))).toMatchObject({ ok: true, spec: { low: 0.1, high: 0.001 } });
    expect(readSpec(row({ type: "int", low: "2", high: "8", step: "2" }))).toEqual({ ok: true, spec: { type: "int", low: 2, high: 8, log: false, step: 2 } });
    expect(readSpec(row({ type: "int", low: "2.5", high: "8" }))).toEqual({ ok: false, part: "low", message: "must be a whole number" });
    expect(readSpec(row({ low: "1", high: "" }))).toEqual({ ok: false, part: "high", message: "a number is required" });
    expect(readSpec(row({ type: "categorical", choices: "[[32], [64, 64]]" }))).toEqual({ ok: true, spec: { type: "categorical", choices: [[32], [64, 64]] } });
    expect(readSpec(row({ type: "categorical", choices: "tanh, relu" }))).toMatchObject({ spec: { choices: ["tanh", "relu"] } });
    expect(readSpec(row({ type: "categorical", choices: "[1, 2" }))).toMatchObject({ ok: false, part: "choices" });
    expect(readSpec(row({ type: "categorical", choices: " " }))).toMatchObject({ ok: false, part: "choices" });
  });

  it("describes a range on one line", () => {
    const fmt = (v: number) => String(v);
    expect(describeSpec({ type: "float", low: 0.0001, high: 0.01, log: true, step: null }, fmt)).toBe("float 0.0001 – 0.01 (log)");
    expect(describeSpec({ type: "int", low: 1, high: 9, log: false, step: 2 }, fmt)).toBe("int 1 – 9 (step 2)");
    expect(describeSpec({ type: "categorical", choices: [[32], "a"] }, fmt)).toBe("[32] | a");
  });

  it("puts each 422 error at the field it names", () => {
    const places = new Set(["name", "config", "n_trials", "objective.metric", "space.lr", "space.lr.low", "space.lr.high", "space.model.hidden_sizes", "space.model.hidden_sizes.choices"]);
    const placed = placeStudyErrors(
      [
        { field: "space.lr.low", message: "low 0.1 > high 0.001" },
        { field: "space.lr.float.high", message: "Input should be a valid number" },
        { field: "space.model.hidden_sizes.choices.1", message: "bad size" },
        { field: "space.model.hidden_sizes.categorical.bogus", message: "Extra inputs are not permitted" },
        { field: "config.stop.env_steps", message: "needs a budget" },
        { field: "body.n_trials", message: "too small" },
        { field: "objective.metric", message: "not a metric" },
        { field: "space.gamma.low", message: "not in the form" },
        { field: "pruner.reduction_factor", message: "too big" },
      ],
      ["lr", "model.hidden_sizes"],
      (p) => places.has(p),
    );
    expect(Object.fromEntries(placed.byField)).toEqual({
      "space.lr.low": ["low 0.1 > high 0.001"],
      "space.lr.high": ["Input should be a valid number"],
      "space.model.hidden_sizes.choices": ["choice 2: bad size"],
      "space.model.hidden_sizes": ["Extra inputs are not permitted"],
      config: ["stop.env_steps: needs a budget"],
      n_trials: ["too small"],
      "objective.metric": ["not a metric"],
    });
    expect(placed.general).toEqual(["space.gamma.low: not in the form", "pruner.reduction_factor: too big"]);
  });
});
