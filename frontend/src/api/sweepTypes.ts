/** Wire types of the sweeps API (app/sweeps/schemas.py), from the generated src/api/wire.gen.ts;
 * the config and the members' configs are PPOConfig (loose in the schema). */

import type { Experiment, PPOConfig } from "./types";
import type { components } from "./wire.gen";

type Schemas = components["schemas"];

export type SweepGroup = Schemas["SweepGroup"];

export type Sweep = Omit<Schemas["SweepPublic"], "config"> & { config: PPOConfig };

/** POST /sweeps (SweepCreate). */
export type SweepCreate = Omit<Required<Schemas["SweepCreate"]>, "config" | "tags"> & {
  config: PPOConfig;
  tags?: string[];
};

export type SweepDetail = Omit<Schemas["SweepDetail"], "config" | "members"> & {
  config: PPOConfig;
  members: Experiment[];
};

export type MemberFinal = Schemas["MemberFinal"];

export type FinalReturn = Schemas["FinalReturn"];

export type GroupSeries = Schemas["GroupSeries"];

export type MetricGroups = Schemas["MetricGroups"];

export type SweepMetrics = Schemas["SweepMetrics"];
