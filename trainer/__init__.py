"""Rollout's PPO trainer: EnvRunners sample episode chunks, Learners do all learning math."""
