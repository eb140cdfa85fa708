import { describe, expect, it } from "vitest";
import { diffConfigs, flatten } from "../src/data/configDiff";

describe("flatten", () => {
  it("uses dotted paths and treats arrays as leaves", () => {
    const f = flatten({ lr: 0.1, model: { hidden_sizes: [64, 64] }, stop: { env_steps: null } });
    expect([...f.entries()]).toEqual([
      ["lr", 0.1],
      ["model.hidden_sizes", [64, 64]],
      ["stop.env_steps", null],
    ]);
  });
});

describe("diffConfigs", () => {
  it("lists only the fields that differ, including nested and missing ones", () => {
    const a = { lr: 3e-4, gamma: 0.99, model: { hidden_sizes: [64, 64], activation: "tanh" }, env_config: {} };
    const b = { lr: 1e-3, gamma: 0.99, model: { hidden_sizes: [64, 64], activation: "relu" }, env_config: { g: 9.8 } };
    const c = { lr: 3e-4, gamma: 0.99, model: { hidden_sizes: [32], activation: "tanh" } };
    const rows = diffConfigs([a, b, c]);
    expect(rows.map((r) => r.path)).toEqual([
      "env_config",
      "env_config.g",
      "lr",
      "model.activation",
      "model.hidden_sizes",
    ]);
    expect(rows.find((r) => r.path === "lr")?.values).toEqual([3e-4, 1e-3, 3e-4]);
    expect(rows.find((r) => r.path === "env_config.g")?.values).toEqual([undefined, 9.8, undefined]);
  });

  it("identical configs have no differences", () => {
    expect(diffConfigs([{ a: 1, b: { c: [1] } }, { a: 1, b: { c: [1] } }])).toEqual([]);
  });
});
