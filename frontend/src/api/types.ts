/**
 * Wire types of the Rollout API (/api/v1) and its websocket messages, named for the dashboard.
 * They are the service's own schemas: src/api/wire.gen.ts is generated from its OpenAPI schema
 * and app/live/messages.py (frontend/scripts/export_wire_types.py; a test keeps it current).
 * Only what the schemas leave open is written here: the config (PPOConfig, whose form schema is
 * ppoSchema.json), the error envelope and the stop criteria.
 */

import type { components } from "./wire.gen";

type Schemas = components["schemas"];

export type Status = Schemas["ExperimentStatus"];
export const STATUSES: readonly Status[] = [
  "pending",
  "queued",
  "running",
  "stopping",
  "succeeded",
  "failed",
  "stopped",
];

export const FINISHED: ReadonlySet<Status> = new Set(["succeeded", "failed", "stopped"]);

/** PPOConfig as JSON (trainer/config.py). Kept loose: the form mirrors its schema. */
export type PPOConfig = Record<string, unknown> & {
  env_id?: string;
  stop?: StopCriteria;
};

/** POST /presets/resolve (app/presets/schemas.py): what a partial config resolves to. */
export type ResolvedConfig = Omit<Schemas["ResolvedConfig"], "config"> & { config: PPOConfig };

export type ExperimentEvent = Schemas["EventPublic"];
export type ExperimentChild = Schemas["ExperimentChild"];

/** An experiment (the detail response adds its events and the runs made from it). */
export type Experiment = Omit<Schemas["ExperimentPublic"], "config"> & {
  config: PPOConfig;
  events?: ExperimentEvent[];
  children?: ExperimentChild[];
};

export type ExperimentPage = Omit<Schemas["ExperimentPage"], "items"> & { items: Experiment[] };

export type Checkpoint = Schemas["CheckpointPublic"];

/** One metric as columns: parallel arrays, step ascending. */
export interface Columns {
  step: number[];
  value: number[];
}

export interface MetricsResponse {
  series: Record<string, Columns>;
  /** Per name: whether the service thinned it (min/max per bucket) for this response. */
  downsampled?: Record<string, boolean>;
}

export interface FieldError {
  field: string;
  message: string;
}

export interface ErrorBody {
  error: { code: string; message: string; fields?: FieldError[] };
}

// ---- websocket messages (app/live/messages.py) -------------------------------------------

/** Columnar metrics: `step[i]` goes with `series[name][i]` (null where a name was absent). */
export type MetricsMessage = Schemas["MetricsMessage"];

/** A lifecycle transition of the streamed experiment; the status that ends a (re)connect
 * backlog carries the full current state. */
export type StatusMessage = Omit<Schemas["StatusMessage"], "experiment"> & { experiment?: Experiment | null };

export type CheckpointMessage = Schemas["CheckpointMessage"];

export type LogMessage = Schemas["LogMessage"];

/** List page: an experiment's status / progress changed (or it was created). */
export type ExperimentMessage = Omit<Schemas["ExperimentMessage"], "experiment"> & { experiment: Experiment };

/** An evaluation's first episode as a video (service: WebM/VP9). */
export type EvaluationVideo = Schemas["VideoPublic"];

export type EvaluationStatus = Schemas["EvaluationStatus"];

/** An evaluation of one checkpoint (lists and live messages carry no per-episode values). */
export type Evaluation = Schemas["EvaluationPublic"];

export type EvaluationDetail = Schemas["EvaluationDetail"];

export type EvaluationRequest = Required<Omit<Schemas["EvaluationCreate"], "checkpoint">> & {
  checkpoint: number | "best" | "latest";
};

/** An evaluation of the streamed experiment changed; `evaluation` is null once deleted. */
export type EvaluationMessage = Schemas["EvaluationMessage"];

export type DeletedMessage = Schemas["DeletedMessage"];

export type StreamMessage =
  | MetricsMessage
  | StatusMessage
  | CheckpointMessage
  | LogMessage
  | ExperimentMessage
  | DeletedMessage
  | EvaluationMessage;

/** GET /references (app/references/schemas.py): a peer's learning curve over seeds. */
export type ReferenceBand = Schemas["Band"];

export type ReferenceRun = Schemas["ReferenceRun"];

export type Reference = Schemas["ReferenceCurves"];

export type ReferenceList = Schemas["ReferenceList"];

/** PPOConfig.stop: the run ends when any criterion set is met. */
export interface StopCriteria {
  env_steps?: number | null;
  episode_return_mean?: number | null;
  wall_seconds?: number | null;
}

/** One metric of one run as the runs table shows it (GET /metric-summaries). */
export type MetricSummary = Schemas["MetricSummary"];
