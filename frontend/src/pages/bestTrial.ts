/** A study's best trial as the start of a new run: its resolved config (GET /studies/{id}/best),
 * its experiment (the fork's parent) and that experiment's name and tags when it still exists. */

import { api } from "../api/client";
import type { PPOConfig } from "../api/types";

export interface BestTrialSource {
  config: PPOConfig;
  name: string;
  tags: string[];
  trial: number;
  /** The best trial's experiment (null once it was deleted). */
  experimentId: number | null;
}

export async function loadBestTrial(studyId: number): Promise<BestTrialSource> {
  const best = await api.studyBest(studyId);
  const experimentId = best.trial.experiment_id;
  let name = `study-${studyId}-trial-${best.trial.number}`;
  let tags: string[] = [];
  if (experimentId !== null) {
    try {
      const run = await api.get(experimentId);
      name = run.name;
      tags = run.tags;
    } catch {
      // The config is the study's answer; the run only lends its name.
    }
  }
  return { config: best.config, name, tags, trial: best.trial.number, experimentId };
}
