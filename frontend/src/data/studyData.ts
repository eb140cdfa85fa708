/**
 * Pure helpers of the studies pages: the best-so-far series, a trial's shown value, the form's
 * search-space rows read into ranges, and where the API's 422 field errors go on the form.
 */

import type { FieldError } from "../api/types";
import type { ParamSpec, StudyDetail, Trial, TrialState } from "../api/studyTypes";
import type { FieldSpec } from "../form/fields";
import type { PlacedErrors } from "../form/errors";
import { parseValues } from "../form/values";

/** Metrics every trial reports whatever its env (trainer/wire.py STUDY_METRICS). */
export const STUDY_METRICS = [
  "episode_return_mean",
  "episode_return_min",
  "episode_return_max",
  "episode_len_mean",
  "policy_loss",
  "vf_loss",
  "entropy",
  "kl",
  "clip_fraction",
  "explained_variance",
  "env_steps_per_s",
] as const;

export const ENDED_STATES: ReadonlySet<TrialState> = new Set(["complete", "pruned", "failed", "stopped"]);

/** A study still changes while it runs or its last trials are being stopped. */
export function studyLive(status: StudyDetail["status"]): boolean {
  return status === "running" || status === "stopping";
}

/** Ended trials of `nTrials`, and the counts per state ("2 complete, 1 running"). */
export function trialProgress(counts: Record<string, number>, nTrials: number): { done: number; text: string } {
  const done = Object.entries(counts)
    .filter(([state]) => ENDED_STATES.has(state as TrialState))
    .reduce((n, [, c]) => n + c, 0);
  const order = ["complete", "running", "pruning", "pruned", "stopped", "failed"];
  const parts = Object.entries(counts)
    .filter(([, n]) => n > 0)
    .sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]))
    .map(([state, n]) => `${n} ${state}`);
  return { done, text: `${done} / ${nTrials} done${parts.length ? ` (${parts.join(", ")})` : ""}` };
}

/** The "best value over trials" columns: complete trials by number, each one's value and the
 * best so far (max or min by the study's direction). */
export function bestSoFar(trials: readonly Trial[], direction: "maximize" | "minimize"): { x: number[]; value: number[]; best: number[] } {
  const done = trials.filter((t) => t.state === "complete" && t.value !== null && Number.isFinite(t.value)).sort((a, b) => a.number - b.number);
  const out = { x: [] as number[], value: [] as number[], best: [] as number[] };
  let best: number | null = null;
  for (const t of done) {
    const v = t.value as number;
    best = best === null ? v : direction === "maximize" ? Math.max(best, v) : Math.min(best, v);
    out.x.push(t.number);
    out.value.push(v);
    out.best.push(best);
  }
  return out;
}

/** What the trials table shows as a trial's value: its objective once complete, else its latest
 * intermediate value (with the env steps it was taken at), else nothing. */
export function shownValue(t: Trial): { kind: "final" | "latest" | "none"; value: number | null; step: number | null } {
  if (t.value !== null) return { kind: "final", value: t.value, step: null };
  const steps = Object.keys(t.intermediate).map(Number).filter(Number.isFinite);
  if (t.latest !== null && steps.length) return { kind: "latest", value: t.latest, step: Math.max(...steps) };
  return { kind: "none", value: null, step: null };
}

// --- the new-study form's search space -----------------------------------------------------------

export type RangeType = ParamSpec["type"];

/** The range types a config field takes: numbers a float or an int range (an integer field an int
 * range only, as the API insists), every field a categorical list. */
export function rangeTypes(spec: Pick<FieldSpec, "kind"> | undefined): RangeType[] {
  if (spec?.kind === "number") return ["float", "int", "categorical"];
  if (spec?.kind === "integer") return ["int", "categorical"];
  return ["categorical"];
}

/** One search-space row as typed. */
export interface SpaceRowText {
  key: string;
  type: RangeType;
  low: string;
  high: string;
  log: boolean;
  step: string;
  choices: string;
}

export type ReadSpec = { ok: true; spec: ParamSpec } | { ok: false; part: "key" | "low" | "high" | "step" | "choices"; message: string };

function readNumber(text: string, integer: boolean): number | string {
  const t = text.trim();
  if (!t) return "a number is required";
  const n = Number(t);
  if (!Number.isFinite(n)) return "must be a number";
  if (integer && !Number.isInteger(n)) return "must be a whole number";
  return n;
}

/** A row's range. Only the text is checked here (numbers, a choice list); bounds, log scales and
 * whether the config resolves are the API's to judge, so its 422 names them at their field. */
export function readSpec(row: SpaceRowText): ReadSpec {
  if (row.type === "categorical") {
    try {
      const choices = parseValues(row.choices);
      if (!choices.length) return { ok: false, part: "choices", message: "at least one choice" };
      return { ok: true, spec: { type: "categorical", choices } };
    } catch (e) {
      return { ok: false, part: "choices", message: `not a list: ${(e as Error).message}` };
    }
  }
  const integer = row.type === "int";
  const low = readNumber(row.low, integer);
  if (typeof low === "string") return { ok: false, part: "low", message: low };
  const high = readNumber(row.high, integer);
  if (typeof high === "string") return { ok: false, part: "high", message: high };
  let step: number | null = null;
  if (row.step.trim()) {
    const s = readNumber(row.step, integer);
    if (typeof s === "string") return { ok: false, part: "step", message: s };
    step = s;
  }
  if (integer) return { ok: true, spec: { type: "int", low, high, log: row.log, step: step ?? 1 } };
  return { ok: true, spec: { type: "float", low, high, log: row.log, step } };
}

/** A range as one line: "1e-4 – 1e-2 (log)", "[32] | [64, 64]". */
export function describeSpec(spec: ParamSpec, fmt: (v: number) => string): string {
  if (spec.type === "categorical") return spec.choices.map((c) => (typeof c === "string" ? c : JSON.stringify(c))).join(" | ");
  const extra = [spec.log ? "log" : "", spec.step !== null && spec.step !== undefined && !(spec.type === "int" && spec.step === 1) ? `step ${fmt(spec.step)}` : ""].filter(Boolean);
  return `${spec.type} ${fmt(spec.low)} – ${fmt(spec.high)}${extra.length ? ` (${extra.join(", ")})` : ""}`;
}

const UNION_TAGS = new Set(["float", "int", "categorical"]);

/**
 * Where each 422 field error goes on the study form. Places are the form's own names: "name",
 * "config" (every `config.*` error, its path kept in the message), "n_trials", "objective.metric",
 * ..., and per search-space row `space.<key>` (the field) or `space.<key>.<low|high|step|type|
 * choices>` (pydantic's union tag, `space.lr.float.low`, is skipped). `has(place)` says whether
 * the form shows that place; anything else is listed above the form.
 */
export function placeStudyErrors(fields: readonly FieldError[], spaceKeys: readonly string[], has: (place: string) => boolean): PlacedErrors {
  const byField = new Map<string, string[]>();
  const general: string[] = [];
  const put = (place: string, message: string) => byField.set(place, [...(byField.get(place) ?? []), message]);
  // Longest key first: "model.hidden_sizes" before a (hypothetical) "model".
  const keys = [...spaceKeys].sort((a, b) => b.length - a.length);
  for (const f of fields) {
    const path = f.field.replace(/^body\./, "");
    if (path.startsWith("space.")) {
      const rest = path.slice("space.".length);
      const key = keys.find((k) => rest === k || rest.startsWith(`${k}.`));
      if (key !== undefined) {
        const parts = rest.slice(key.length + 1).split(".").filter((p) => p && !UNION_TAGS.has(p));
        const part = parts[0];
        const place = part && has(`space.${key}.${part}`) ? `space.${key}.${part}` : `space.${key}`;
        const message = part === "choices" && parts.length > 1 && /^\d+$/.test(parts[1]) ? `choice ${Number(parts[1]) + 1}: ${f.message}` : f.message;
        if (has(place)) {
          put(place, message);
          continue;
        }
      }
    } else if (path === "config" || path.startsWith("config.")) {
      if (has("config")) {
        put("config", path === "config" ? f.message : `${path.slice("config.".length)}: ${f.message}`);
        continue;
      }
    } else if (has(path)) {
      put(path, f.message);
      continue;
    }
    general.push(`${path || "body"}: ${f.message}`);
  }
  return { byField, general };
}
