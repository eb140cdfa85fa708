"""Sweeps: grid points x seeds of one base config, run as member experiments."""
