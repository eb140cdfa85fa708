/** Wire types of the sweeps API (app/sweeps/schemas.py). */

import type { Experiment, PPOConfig, Status } from "./types";

export interface SweepGroup {
  index: number;
  point: Record<string, unknown>;
  label: string;
  member_ids: number[];
}

export interface Sweep {
  id: number;
  name: string;
  config: PPOConfig;
  grid: Record<string, unknown[]>;
  seeds: number[];
  max_parallel: number;
  created_at: string;
  status: Status;
  counts: Partial<Record<Status, number>>;
  size: number;
}

/** POST /sweeps (SweepCreate). */
export interface SweepCreate {
  name: string;
  config: PPOConfig;
  grid: Record<string, unknown[]>;
  seeds: number[];
  max_parallel: number;
}

export interface SweepDetail extends Sweep {
  groups: SweepGroup[];
  members: Experiment[];
}

export interface MemberFinal {
  experiment_id: number;
  seed: number;
  step: number;
  value: number;
}

export interface FinalReturn {
  n: number;
  mean: number | null;
  min: number | null;
  max: number | null;
  members: MemberFinal[];
}

export interface GroupSeries {
  index: number;
  label: string;
  point: Record<string, unknown>;
  member_ids: number[];
  n: number[];
  mean: (number | null)[];
  min: (number | null)[];
  max: (number | null)[];
  ci_low: (number | null)[];
  ci_high: (number | null)[];
  final: FinalReturn;
}

export interface MetricGroups {
  step: number[];
  groups: GroupSeries[];
}

export interface SweepMetrics {
  sweep_id: number;
  grid_keys: string[];
  confidence: number;
  bootstrap_resamples: number;
  bootstrap_seed: number;
  metrics: Record<string, MetricGroups>;
}
