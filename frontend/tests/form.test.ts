import { describe, expect, it } from "vitest";
import { deepMerge, parseConfigText } from "../src/form/configFile";
import { DEFAULTS, fieldSpecs, formatValue, getPath, parseValue, setPath } from "../src/form/fields";
import { flatten } from "../src/data/configDiff";

describe("fieldSpecs", () => {
  const specs = fieldSpecs();
  const byPath = new Map(specs.map((s) => [s.path, s]));

  it("has one input for every leaf of the default config, each explained", () => {
    const leaves = [...flatten(DEFAULTS).keys()];
    for (const path of leaves) expect(byPath.has(path), path).toBe(true);
    for (const s of specs) expect(s.description.length, s.path).toBeGreaterThan(5);
  });

  it("derives kinds, nullability, bounds and defaults from the schema", () => {
    expect(byPath.get("lr")).toMatchObject({ kind: "number", nullable: false, defaultValue: DEFAULTS.lr, bounds: "> 0, ≤ 1" });
    expect(typeof DEFAULTS.lr).toBe("number");
    expect(byPath.get("stop.episode_return_mean")).toMatchObject({ kind: "number", nullable: true, defaultValue: null });
    expect(byPath.get("model.activation")).toMatchObject({ kind: "enum", options: ["tanh", "relu"] });
    expect(byPath.get("model.hidden_sizes")).toMatchObject({ kind: "intlist", defaultValue: getPath(DEFAULTS, "model.hidden_sizes") });
    expect(byPath.get("env_config")?.kind).toBe("json");
    expect(byPath.get("normalize_advantages")?.kind).toBe("boolean");
    expect(byPath.get("lr")?.advanced).toBe(false);
    expect(byPath.get("vf_clip_param")?.advanced).toBe(true);
  });

  it("round-trips every default through its input text", () => {
    const config: Record<string, unknown> = {};
    for (const s of specs) {
      const raw = s.kind === "boolean" ? Boolean(s.defaultValue) : formatValue(s, s.defaultValue);
      const parsed = parseValue(s, raw);
      expect(parsed.ok, s.path).toBe(true);
      if (parsed.ok) setPath(config, s.path, parsed.value);
    }
    expect(config).toEqual(DEFAULTS);
  });
});

describe("parseValue", () => {
  const specs = new Map(fieldSpecs().map((s) => [s.path, s]));
  const spec = (p: string) => specs.get(p)!;
  it("reads numbers, lists and JSON, and leaves bounds to the server", () => {
    expect(parseValue(spec("lr"), "-1")).toEqual({ ok: true, value: -1 });
    expect(parseValue(spec("num_epochs"), "2.5")).toMatchObject({ ok: false });
    expect(parseValue(spec("lr"), "abc")).toMatchObject({ ok: false });
    expect(parseValue(spec("model.hidden_sizes"), "128, 64 32")).toEqual({ ok: true, value: [128, 64, 32] });
    expect(parseValue(spec("env_config"), '{"g": 9.8}')).toEqual({ ok: true, value: { g: 9.8 } });
    expect(parseValue(spec("env_config"), "[1]")).toMatchObject({ ok: false });
    expect(parseValue(spec("stop.wall_seconds"), " ")).toEqual({ ok: true, value: null });
    expect(parseValue(spec("seed"), "")).toMatchObject({ ok: false });
  });
});

describe("config files", () => {
  it("reads YAML and JSON, bare configs and submission documents", async () => {
    expect(await parseConfigText("lr: 0.001\nstop:\n  env_steps: 5000\n")).toEqual({ config: { lr: 0.001, stop: { env_steps: 5000 } } });
    expect(await parseConfigText('{"name": "x", "tags": ["a"], "config": {"gamma": 0.9}}')).toEqual({ name: "x", tags: ["a"], config: { gamma: 0.9 } });
    // evaluation_every is the run's setting: a submission document holds it beside `config`.
    expect(await parseConfigText("name: x\nevaluation_every: 4\nconfig: {lr: 0.001}\n")).toEqual({ name: "x", evaluationEvery: 4, config: { lr: 0.001 } });
    expect(getPath(DEFAULTS, "evaluation_every")).toBeUndefined();
    await expect(parseConfigText("- 1\n- 2")).rejects.toThrow(/mapping/);
    await expect(parseConfigText("{bad json")).rejects.toThrow(/not valid/);
    await expect(parseConfigText("a: [1")).rejects.toThrow(/not valid/);
    await expect(parseConfigText("  ")).rejects.toThrow(/empty/);
  });

  it("merges a partial config onto the defaults", () => {
    const merged = deepMerge(DEFAULTS, { stop: { episode_return_mean: 475 }, model: { hidden_sizes: [32] } });
    expect(getPath(merged, "stop.env_steps")).toBe(getPath(DEFAULTS, "stop.env_steps"));
    expect(getPath(merged, "stop.episode_return_mean")).toBe(475);
    expect(getPath(merged, "model.hidden_sizes")).toEqual([32]);
    expect(getPath(DEFAULTS, "model.hidden_sizes")).not.toEqual([32]);
  });
});

describe("presets in the form", () => {
  it("sends only what the user chose: touched fields, env id and preset", async () => {
    const { chosenConfig } = await import("../src/form/fields");
    const values = new Map<string, unknown>([
      ["env_id", "ALE/Pong-v5"],
      ["preset", "auto"],
      ["lr", 0.001],
      ["gamma", 0.99],
      ["stop.wall_seconds", 300],
      ["stop.env_steps", 1_000_000],
    ]);
    const chosen = chosenConfig(values, new Set(["lr", "stop.wall_seconds"]), { custom: 1 });
    expect(chosen).toEqual({ custom: 1, env_id: "ALE/Pong-v5", preset: "auto", lr: 0.001, stop: { wall_seconds: 300 } });
  });

  it("marks an input when the preset set it or a key under it", async () => {
    const { presetSets } = await import("../src/form/fields");
    const fields = ["gamma", "env_config.repeat_action_probability", "stop.env_steps"];
    expect(presetSets("gamma", fields)).toBe(true);
    expect(presetSets("env_config", fields)).toBe(true);
    expect(presetSets("stop.env_steps", fields)).toBe(true);
    expect(presetSets("stop.wall_seconds", fields)).toBe(false);
    expect(presetSets("gam", fields)).toBe(false);
  });

  it("offers the preset as a select and Atari ids in the env list", async () => {
    const { ENV_IDS } = await import("../src/form/fields");
    const preset = fieldSpecs().find((s) => s.path === "preset");
    expect(preset).toMatchObject({ kind: "enum", advanced: false, group: "Environment", defaultValue: "auto" });
    expect(preset?.options).toEqual(["auto", "none", "classic_control", "classic_control_continuous", "box2d", "mujoco", "atari"]);
    expect(ENV_IDS).toContain("ALE/Pong-v5");
  });
});
