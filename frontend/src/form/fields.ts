/**
 * The new-experiment form's fields, derived from PPOConfig's JSON schema (ppoSchema.json,
 * exported from trainer/config.py), so every field shows its default, its description and its
 * bounds. Pure functions: parse what the user typed, build the config object.
 */

import doc from "./ppoSchema.json";

export type Kind = "string" | "integer" | "number" | "boolean" | "enum" | "intlist" | "json";

export interface FieldSpec {
  path: string;
  label: string;
  kind: Kind;
  nullable: boolean;
  options: string[];
  description: string;
  defaultValue: unknown;
  bounds: string;
  group: string;
  advanced: boolean;
}

type Json = Record<string, unknown>;

const GROUPS: [string, string[]][] = [
  ["Environment", ["env_id", "preset", "env_config", "vector_env", "seed"]],
  ["Stop criteria", ["stop.env_steps", "stop.episode_return_mean", "stop.wall_seconds"]],
  ["Optimisation", ["lr", "lr_schedule", "gamma", "gae_lambda", "num_epochs", "minibatch_size", "train_batch_size_per_learner"]],
  ["Resources", ["num_env_runners", "num_envs_per_env_runner", "num_learners", "overlap_sampling", "num_gpus_per_learner", "learner_precision", "inference_device"]],
  ["Checkpoints", ["checkpoint_every", "keep_checkpoints"]],
];

/** Order of the form's sections. */
export const GROUP_ORDER = [...GROUPS.map(([g]) => g), "PPO loss", "Model"];

/** Fields shown without opening "Advanced". */
const BASIC = new Set([
  "env_id",
  "preset",
  "seed",
  "stop.env_steps",
  "stop.episode_return_mean",
  "stop.wall_seconds",
  "lr",
  "gamma",
  "num_epochs",
  "minibatch_size",
  "train_batch_size_per_learner",
  "num_env_runners",
  "num_envs_per_env_runner",
  "num_learners",
  "checkpoint_every",
]);

export const ENV_IDS = [
  "CartPole-v1",
  "Acrobot-v1",
  "MountainCar-v0",
  "MountainCarContinuous-v0",
  "Pendulum-v1",
  "ALE/Pong-v5",
  "ALE/Breakout-v5",
];

/** Paths whose inputs decide the preset: a change re-resolves the rest of the form. */
export const PRESET_INPUTS = new Set(["env_id", "preset"]);

/**
 * The part of a config the user chose: the touched paths (typed or loaded), plus env_id and
 * preset, which decide the rest. Untouched fields are left to the server's preset resolution.
 */
export function chosenConfig(values: Map<string, unknown>, touched: ReadonlySet<string>, extras: Json): Json {
  const out: Json = structuredClone(extras);
  for (const [path, value] of values) if (touched.has(path) || PRESET_INPUTS.has(path)) setPath(out, path, value);
  return out;
}

/** Whether the input at `path` holds a value the preset set (a JSON input: any key under it). */
export function presetSets(path: string, presetFields: readonly string[]): boolean {
  return presetFields.some((f) => f === path || f.startsWith(`${path}.`));
}

export const DEFAULTS: Json = (doc as { defaults: Json }).defaults;
const SCHEMA = (doc as { schema: Json }).schema;

function groupOf(path: string): string {
  for (const [g, paths] of GROUPS) if (paths.includes(path)) return g;
  if (path.startsWith("model.")) return "Model";
  return "PPO loss";
}

function bounds(s: Json): string {
  const parts: string[] = [];
  if (s.minimum !== undefined) parts.push(`≥ ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) parts.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined) parts.push(`≤ ${s.maximum}`);
  if (s.exclusiveMaximum !== undefined) parts.push(`< ${s.exclusiveMaximum}`);
  if (s.minItems !== undefined) parts.push(`${s.minItems}–${s.maxItems ?? "∞"} items`);
  if (s.minLength !== undefined) parts.push("required");
  return parts.join(", ");
}

function resolve(s: Json): Json {
  const ref = s.$ref as string | undefined;
  if (!ref) return s;
  const name = ref.split("/").pop() as string;
  return (SCHEMA.$defs as Record<string, Json>)[name];
}

export function getPath(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  for (const k of path.split(".")) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Json)[k];
  }
  return cur;
}

export function setPath(obj: Json, path: string, value: unknown): void {
  const keys = path.split(".");
  let cur = obj;
  for (const k of keys.slice(0, -1)) {
    if (cur[k] === null || typeof cur[k] !== "object" || Array.isArray(cur[k])) cur[k] = {};
    cur = cur[k] as Json;
  }
  cur[keys[keys.length - 1]] = value;
}

function specOf(path: string, raw: Json): FieldSpec {
  let s = raw;
  let nullable = false;
  const any = raw.anyOf as Json[] | undefined;
  if (any) {
    nullable = any.some((a) => a.type === "null");
    s = { ...raw, ...(any.find((a) => a.type !== "null") ?? {}) };
  }
  let kind: Kind;
  if (s.enum) kind = "enum";
  else if (s.type === "boolean") kind = "boolean";
  else if (s.type === "integer") kind = "integer";
  else if (s.type === "number") kind = "number";
  else if (s.type === "array") kind = "intlist";
  else if (s.type === "object") kind = "json";
  else kind = "string";
  return {
    path,
    label: path,
    kind,
    nullable,
    options: ((s.enum as string[] | undefined) ?? []).map(String),
    description: String(raw.description ?? s.description ?? ""),
    defaultValue: getPath(DEFAULTS, path),
    bounds: bounds(s),
    group: groupOf(path),
    advanced: !BASIC.has(path),
  };
}

/** Every leaf field of PPOConfig, nested models flattened to dotted paths, in schema order. */
export function fieldSpecs(): FieldSpec[] {
  const out: FieldSpec[] = [];
  const walk = (schema: Json, prefix: string) => {
    for (const [name, raw] of Object.entries(schema.properties as Record<string, Json>)) {
      const path = prefix ? `${prefix}.${name}` : name;
      const target = resolve(raw);
      if (target !== raw && target.type === "object" && target.properties) walk(target, path);
      else out.push(specOf(path, raw));
    }
  };
  walk(SCHEMA, "");
  return out;
}

/** How a value is written into its input box. */
export function formatValue(spec: FieldSpec, v: unknown): string {
  if (v === null || v === undefined) return "";
  if (spec.kind === "intlist") return (v as unknown[]).join(", ");
  if (spec.kind === "json") return JSON.stringify(v);
  return String(v);
}

export type Parsed = { ok: true; value: unknown } | { ok: false; error: string };

/**
 * Turn what was typed into a JSON value. Only the type is checked here; bounds are the
 * server's job (its 422 is shown next to the field), so the form never disagrees with it.
 */
export function parseValue(spec: FieldSpec, raw: string | boolean): Parsed {
  if (spec.kind === "boolean") return { ok: true, value: Boolean(raw) };
  const text = String(raw).trim();
  if (text === "") {
    if (spec.nullable) return { ok: true, value: null };
    if (spec.kind === "string" || spec.kind === "enum") return { ok: true, value: "" };
    if (spec.kind === "json") return { ok: true, value: {} };
    return { ok: false, error: "a value is required" };
  }
  switch (spec.kind) {
    case "integer": {
      const n = Number(text);
      return Number.isInteger(n) ? { ok: true, value: n } : { ok: false, error: "must be a whole number" };
    }
    case "number": {
      const n = Number(text);
      return Number.isFinite(n) ? { ok: true, value: n } : { ok: false, error: "must be a number" };
    }
    case "intlist": {
      const parts = text.split(/[\s,]+/).filter(Boolean).map(Number);
      return parts.every(Number.isInteger)
        ? { ok: true, value: parts }
        : { ok: false, error: "comma-separated whole numbers, e.g. 64, 64" };
    }
    case "json":
      try {
        const v = JSON.parse(text);
        return v !== null && typeof v === "object" && !Array.isArray(v)
          ? { ok: true, value: v }
          : { ok: false, error: "must be a JSON object" };
      } catch {
        return { ok: false, error: "invalid JSON" };
      }
    default:
      return { ok: true, value: text };
  }
}
