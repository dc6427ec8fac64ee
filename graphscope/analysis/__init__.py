"""Numbers computed from a loaded bundle: pure functions of the Graph model (no torch, no
extension, no output formatting). summary.py (module tree, top kernels, coverage, graphs),
ddp.py (collectives, DDP buckets), ranks.py (the cross-rank merge), diff.py, budgets.py,
diagnosis.py (critical path, gaps, stream-order serialization, concurrency)."""
