"""Exporters: DOT (dot.py), Chrome/Perfetto trace (trace.py). Read bundles only; no torch."""
