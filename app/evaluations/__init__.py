"""evaluations domain: run a checkpoint for N episodes as a small Ray job, with a video."""
