/**
 * Wire types of the Rollout API (/api/v1), mirroring the server's schemas. The websocket
 * messages are one discriminated union on `type`, exactly as the server's live hub sends them.
 */

export type Status =
  | "pending"
  | "queued"
  | "running"
  | "stopping"
  | "succeeded"
  | "failed"
  | "stopped";

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
export interface ResolvedConfig {
  config: PPOConfig;
  preset: string;
  env_settings: string | null;
  sources: string[];
  preset_fields: string[];
}

export interface ExperimentEvent {
  from_status: Status | null;
  to_status: Status;
  reason: string;
  at: string;
}

export interface Experiment {
  id: number;
  name: string;
  tags: string[];
  config: PPOConfig;
  status: Status;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  progress: number;
  env_steps: number | null;
  episode_return_mean: number | null;
  best_return: number | null;
  error: string | null;
  log_tail: string | null;
  ray_job_id?: string | null;
  parent_id?: number | null;
  resume_from_checkpoint_id?: number | null;
  /** The user's notes (markdown). */
  notes?: string | null;
  /** The sweep it is a member of, and its seed group there. */
  sweep_id?: number | null;
  sweep_group?: number | null;
  /** Only in the detail response. */
  events?: ExperimentEvent[];
}

export interface ExperimentPage {
  items: Experiment[];
  next_cursor: string | null;
}

export interface Checkpoint {
  id: number;
  experiment_id: number;
  iteration: number;
  env_steps: number;
  episode_return_mean: number | null;
  size_bytes: number;
  created_at: string;
  is_best: boolean;
  is_latest: boolean;
  sha256?: string;
}

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

// ---- websocket messages (app/live/topics.py) ----------------------------------------------

/** Columnar metrics: `step[i]` goes with `series[name][i]` (null where a name was absent). */
export interface MetricsMessage {
  type: "metrics";
  experiment_id: number;
  step: number[];
  series: Record<string, (number | null)[]>;
}

/** A lifecycle transition of the streamed experiment. */
export interface StatusMessage {
  type: "status";
  experiment_id: number;
  status: Status;
  from_status: Status | null;
  reason: string;
  at: string;
  error: string | null;
  /** Present on the status that ends a (re)connect backlog: the full current state. */
  experiment?: Experiment;
}

export interface CheckpointMessage {
  type: "checkpoint";
  experiment_id: number;
  checkpoint: Checkpoint;
}

export interface LogMessage {
  type: "log";
  experiment_id: number;
  lines: string[];
}

/** List page: an experiment's status / progress changed (or it was created). */
export interface ExperimentMessage {
  type: "experiment";
  experiment: Experiment;
}

/** An evaluation's first episode as a video (service: WebM/VP9). */
export interface EvaluationVideo {
  url: string;
  codec: string;
  media_type: string;
  size_bytes: number;
  frames: number;
  fps: number;
  width: number;
  height: number;
  duration_s: number;
  source_frames: number;
  frame_step: number;
  subsampled: boolean;
  cut: boolean;
}

export type EvaluationStatus = "pending" | "queued" | "running" | "succeeded" | "failed";

/** An evaluation of one checkpoint (lists and live messages carry no per-episode values). */
export interface Evaluation {
  id: number;
  experiment_id: number;
  checkpoint: string;
  checkpoint_id: number;
  checkpoint_iteration: number;
  checkpoint_env_steps: number;
  episodes: number;
  seed: number;
  deterministic: boolean;
  record_video: boolean;
  /** Created by the experiment's evaluation_every as it trained (a filmstrip frame). */
  scheduled: boolean;
  status: EvaluationStatus;
  reason: string;
  error: string | null;
  created_at: string;
  started_at: string | null;
  job_started_at: string | null;
  finished_at: string | null;
  ray_job_id: string | null;
  episodes_done: number;
  return_mean: number | null;
  return_std: number | null;
  return_min: number | null;
  return_max: number | null;
  video: EvaluationVideo | null;
  video_message: string | null;
}

export interface EvaluationDetail extends Evaluation {
  returns: number[];
  lengths: number[];
  log_tail: string | null;
}

export interface EvaluationRequest {
  checkpoint: number | "best" | "latest";
  episodes: number;
  seed: number;
  deterministic: boolean;
  record_video: boolean;
}

/** An evaluation of the streamed experiment changed; `evaluation` is null once deleted. */
export interface EvaluationMessage {
  type: "evaluation";
  experiment_id: number;
  evaluation_id: number;
  evaluation: Evaluation | null;
}

export interface DeletedMessage {
  type: "deleted";
  experiment_id: number;
}

export type StreamMessage =
  | MetricsMessage
  | StatusMessage
  | CheckpointMessage
  | LogMessage
  | ExperimentMessage
  | DeletedMessage
  | EvaluationMessage;

/** GET /references (app/references/schemas.py): a peer's learning curve over seeds. */
export interface ReferenceBand {
  x: number[];
  mean: number[];
  min: number[];
  max: number[];
}

export interface ReferenceRun {
  seed: number;
  episodes: number;
  env_steps: number;
  wall_s: number;
  final_return: number;
}

export interface Reference {
  env_id: string;
  label: string;
  source: string;
  settings: Record<string, unknown>;
  budget_env_steps: number;
  metric: string;
  window: number;
  seeds: number[];
  command: string;
  generated_at: string;
  machine: string;
  notes: string;
  env_steps: ReferenceBand;
  wall_time_s: ReferenceBand;
  runs: ReferenceRun[];
}

export interface ReferenceList {
  items: Reference[];
}

/** PPOConfig.stop: the run ends when any criterion set is met. */
export interface StopCriteria {
  env_steps?: number | null;
  episode_return_mean?: number | null;
  wall_seconds?: number | null;
}

/** One metric of one run as the runs table shows it (GET /metric-summaries). */
export interface MetricSummary {
  last: number | null;
  min: number;
  max: number;
}
