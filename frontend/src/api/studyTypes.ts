/** Wire types of the studies API (app/studies/schemas.py), from the generated src/api/wire.gen.ts;
 * the base config and the best trial's config are PPOConfig (loose in the schema). */

import type { PPOConfig } from "./types";
import type { components } from "./wire.gen";

type Schemas = components["schemas"];

export type FloatRange = Schemas["FloatRange"];
export type IntRange = Schemas["IntRange"];
export type Categorical = Schemas["Categorical"];
export type ParamSpec = FloatRange | IntRange | Categorical;
export type Objective = Schemas["Objective"];
export type SamplerSpec = Schemas["SamplerSpec"];
export type PrunerSpec = Schemas["PrunerSpec"];

export type Trial = Schemas["TrialPublic"];
/** GET /experiments/{id}/trial: the study trial an experiment runs (null for most). */
export type TrialOf = Schemas["TrialOf"];
export type TrialState = Trial["state"];

export type Study = Omit<Schemas["StudyPublic"], "config"> & { config: PPOConfig };
export type StudyStatus = Study["status"];

export type StudyDetail = Omit<Schemas["StudyDetail"], "config"> & { config: PPOConfig };

/** POST /studies (StudyCreate): the spec models' defaulted fields may be left out. */
export interface StudyCreate {
  name: string;
  config: PPOConfig;
  space: Record<string, ParamSpec>;
  n_trials: number;
  max_parallel: number;
  objective: Objective;
  sampler: Partial<SamplerSpec> & Pick<SamplerSpec, "kind">;
  pruner: Partial<PrunerSpec> & Pick<PrunerSpec, "kind">;
  seed: number;
}

export type StudyBest = Omit<Schemas["StudyBest"], "config"> & { config: PPOConfig };
