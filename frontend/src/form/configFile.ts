/**
 * Reading a pasted or uploaded experiment file (JSON or YAML). Either a bare PPOConfig or a
 * submission document `{name, tags, evaluation_every, config}` (what `rollout submit` reads)
 * is accepted.
 */

export interface Submission {
  name?: string;
  tags?: string[];
  /** The run's videos as it trains (beside the config, not in it). */
  evaluationEvery?: number;
  config: Record<string, unknown>;
}

export async function parseConfigText(text: string): Promise<Submission> {
  const trimmed = text.trim();
  if (!trimmed) throw new Error("the file is empty");
  let doc: unknown;
  try {
    // JSON is valid YAML, but JSON.parse gives better messages for JSON input. The YAML parser
    // is loaded on first use only: most visits never need it.
    doc = trimmed.startsWith("{") ? JSON.parse(trimmed) : (await import("yaml")).parse(trimmed);
  } catch (e) {
    throw new Error(`not valid JSON or YAML: ${(e as Error).message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new Error("expected a mapping of config fields");
  }
  const obj = doc as Record<string, unknown>;
  const config = obj.config;
  if (config !== null && typeof config === "object" && !Array.isArray(config)) {
    const tags = Array.isArray(obj.tags) ? obj.tags.map(String) : undefined;
    const every = obj.evaluation_every;
    return {
      name: typeof obj.name === "string" ? obj.name : undefined,
      tags,
      evaluationEvery: typeof every === "number" ? every : undefined,
      config: config as Record<string, unknown>,
    };
  }
  return { config: obj };
}

/** Deep-merge `over` onto `base` (objects merged key by key; arrays and scalars replaced). */
export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = structuredClone(base);
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] =
      v !== null && typeof v === "object" && !Array.isArray(v) && b !== null && typeof b === "object" && !Array.isArray(b)
        ? deepMerge(b as Record<string, unknown>, v as Record<string, unknown>)
        : structuredClone(v);
  }
  return out;
}
