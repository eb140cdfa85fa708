"""Presets domain: the preset tables and resolving a partial config (no database)."""
