"""references domain: peer learning curves shipped with Rollout, to overlay on an experiment's."""
