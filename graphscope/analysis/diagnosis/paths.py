"""The critical path's modules: time (or nodes) per module, and rolled up to the level that
says most."""

from __future__ import annotations

from itertools import compress

import numpy as np

from ..dag import Dag
from ..stats import module_at


def module_sums(dag: Dag, path: list[int], d: list[float]) -> dict[str, float]:
    """Module -> the summed durations of ``path``'s nodes of that module (each module's
    durations added in path order, as a loop over the path would)."""
    if not path:
        return {}
    names, codes = dag.module_codes
    idx = codes[path]
    sums = np.bincount(idx, weights=np.asarray(d)[path], minlength=len(names))
    on = np.bincount(idx, minlength=len(names)) > 0
    return dict(zip(compress(names, on.tolist()), sums[on].tolist()))


def rolled_up(mods: dict[str, float], length: float, top: int = 4,
              cover: float = 60.0) -> list[tuple[str, float]]:
    """The critical path's module shares at the deepest module level whose ``top`` largest
    cover ``cover`` % of the path: two branches of 32 layers read ``L.left 50%, L.right 50%``,
    not 1% per layer. Pseudo modules (``(loss)``) stay whole. Shares under half a percent
    are left out."""
    if not length or not mods:
        return []

    def at(depth: int) -> list[tuple[str, float]]:
        out: dict[str, float] = {}
        for m, t in mods.items():
            key = module_at(m, depth)
            out[key] = out.get(key, 0.0) + t
        return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))

    deepest = max((m.count(".") for m in mods if not m.startswith("(")), default=0)
    chosen = at(0)
    for depth in range(deepest, -1, -1):
        rows = at(depth)
        if sum(t for _, t in rows[:top]) >= cover / 100.0 * length:
            chosen = rows
            break
    return [(m, t) for m, t in chosen if t >= 0.005 * length]
