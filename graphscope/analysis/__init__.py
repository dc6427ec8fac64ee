"""Analyses of a loaded bundle: pure functions of the model (no torch, no rendering)."""
