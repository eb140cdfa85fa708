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
  stop?: { env_steps?: number | null; episode_return_mean?: number | null; wall_seconds?: number | null };
};

export interface ExperimentEvent {
  from: Status | null;
  to: Status;
  reason: string;
  at: string;
}

export interface Experiment {
  id: string;
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
  events?: ExperimentEvent[];
}

export interface ExperimentPage {
  items: Experiment[];
  next_cursor: string | null;
}

export interface Checkpoint {
  id: string;
  iteration: number;
  env_steps: number;
  episode_return_mean: number | null;
  size_bytes: number;
  created_at: string;
  is_best: boolean;
  is_latest: boolean;
}

/** One metric as columns: parallel arrays, step ascending. */
export interface Columns {
  step: number[];
  value: number[];
}

export interface MetricsResponse {
  series: Record<string, Columns>;
}

export interface FieldError {
  field: string;
  message: string;
}

export interface ErrorBody {
  error: { code: string; message: string; fields?: FieldError[] };
}

// ---- websocket messages ---------------------------------------------------------------------

/** Columnar metrics: `step[i]` goes with `series[name][i]` (null where a name was absent). */
export interface MetricsMessage {
  type: "metrics";
  experiment_id: string;
  step: number[];
  series: Record<string, (number | null)[]>;
}

export interface StatusMessage {
  type: "status";
  experiment_id: string;
  experiment: Experiment;
}

export interface CheckpointMessage {
  type: "checkpoint";
  experiment_id: string;
  checkpoint: Checkpoint;
}

export interface LogMessage {
  type: "log";
  experiment_id: string;
  lines: string[];
}

export type StreamMessage = MetricsMessage | StatusMessage | CheckpointMessage | LogMessage;
