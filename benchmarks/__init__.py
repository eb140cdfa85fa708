"""Speed benchmarks of Rollout's trainer against other PPO implementations (see Makefile)."""
