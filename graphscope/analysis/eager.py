"""Was graphing worth it: the graph's nodes against the eager baseline (eager.json, written by
``capture --eager-baseline``: graphscope/capture/eager.py), and how much of a program's traced
GPU time ran inside graphs. Pure functions of a Bundle and the documents read beside it.

Per module and phase the graph's time is the sum of its work nodes' median durations (as the
module table's own numbers) and the eager time is the attributed eager kernels' time per run.
Kernels are compared by short name (:func:`~graphscope.model.graph.short_kernel_name` of the
demangled name on both sides; memcpy/memset by kind), per run: a name the graph runs more often
than eager is *added*, one it runs less often *missing*; within one module and phase an added
and a missing name are paired as *replaced*, largest time first.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Optional

from ..model.bundle import Bundle
from ..model.graph import NodeKind, short_kernel_name
from .stats import module_at

Key = tuple[str, str]  # (module, phase)


def _median(xs: Any) -> float:
    xs = list(xs)
    return float(statistics.median(xs)) if xs else 0.0


def graph_kernels(bundle: Bundle, graphs: Optional[set[str]] = None
                  ) -> dict[Key, dict[str, list[float]]]:
    """{(module, phase): {kernel short name: [count, median ns summed]}} of the work nodes
    (of ``graphs`` only, when given)."""
    out: dict[Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for n in bundle.work_nodes():
        if graphs is not None and n.graph not in graphs:
            continue
        kernel = n.type == NodeKind.KERNEL
        name = short_kernel_name(n.demangled or n.kernel or "?") if kernel else n.type
        row = out[(n.module, n.phase)][name]
        row[0] += 1
        row[1] += n.median_ns or 0.0
    return out


def eager_kernels(eager: Mapping[str, Any], graphs: Optional[set[str]] = None
                  ) -> dict[Key, dict[str, list[float]]]:
    """The same shape from eager.json, per run (of the eager parts of ``graphs`` only)."""
    runs = eager["runs"]
    out: dict[Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for r in eager["kernels"]:
        if graphs is not None and r["graph"] not in graphs:
            continue
        row = out[(r["module"], r["phase"])][r["kernel"]]
        row[0] += r["count"] / runs
        row[1] += r["ns"] / runs
    return out


def kernel_changes(graph: Mapping[str, list[float]], eager: Mapping[str, list[float]]
                   ) -> dict[str, list[Any]]:
    """Added, missing and replaced kernel names of one module and phase (counts per run)."""
    added: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for name in sorted(set(graph) | set(eager)):
        g = graph.get(name, [0, 0.0])
        e = eager.get(name, [0, 0.0])
        d = int(round(g[0])) - int(round(e[0]))
        if d > 0:
            added.append({"kernel": name, "count": d, "ns": g[1]})
        elif d < 0:
            missing.append({"kernel": name, "count": -d, "ns": e[1]})
    replaced = []
    a_only = sorted((a for a in added if a["kernel"] not in eager), key=lambda x: -x["ns"])
    m_only = sorted((m for m in missing if m["kernel"] not in graph), key=lambda x: -x["ns"])
    for a, m in zip(a_only, m_only):
        replaced.append({"eager": m["kernel"], "graph": a["kernel"]})
        added.remove(a)
        missing.remove(m)
    return {"added": added, "missing": missing, "replaced": replaced}


# "slower in the graph" only past run-to-run noise: at least 1 µs and 10% of the eager time
SLOWER_MIN_NS = 1_000
SLOWER_MIN_FRAC = 0.10


def _rolled(rows: Mapping[Key, Mapping[str, list[float]]], depth: Optional[int]
            ) -> dict[Key, dict[str, list[float]]]:
    """Per (module, phase) kernel rows with every module rolled up to ``depth`` (summed)."""
    if depth is None:
        return {k: dict(v) for k, v in rows.items()}
    out: dict[Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for (module, phase), kernels in rows.items():
        dst = out[(module_at(module, depth), phase)]
        for name, (count, ns) in kernels.items():
            dst[name][0] += count
            dst[name][1] += ns
    return out


def compare(bundle: Bundle, eager: Mapping[str, Any], depth: Optional[int] = None
            ) -> dict[str, Any]:
    """Per module and phase: eager vs graph GPU time and kernels (modules rolled up to
    ``depth`` levels below the root when given); for the step: eager wall time vs replay
    wall time (the speed-up graphing bought; below 1 it cost)."""
    shown = set(eager["graphs"]) & {g.name for g in bundle.graphs}  # report --graph: one
    gk = _rolled(graph_kernels(bundle, shown), depth)
    ek = _rolled(eager_kernels(eager, shown), depth)
    rows: list[dict[str, Any]] = []
    for key in sorted(set(gk) | set(ek)):
        g, e = gk.get(key, {}), ek.get(key, {})
        g_ns = sum(v[1] for v in g.values())
        e_ns = sum(v[1] for v in e.values())
        rows.append({
            "module": key[0], "phase": key[1],
            "graph_kernels": int(sum(v[0] for v in g.values())),
            "eager_kernels": round(sum(v[0] for v in e.values()), 2),
            "graph_ns": g_ns, "eager_ns": e_ns, "delta_ns": g_ns - e_ns,
            "slower_in_graph": g_ns - e_ns > max(SLOWER_MIN_NS, SLOWER_MIN_FRAC * e_ns),
            **kernel_changes(g, e),
        })
    e_wall, g_wall = _median(eager["eager_wall_ns"]), _median(eager["graph_wall_ns"])
    e_gpu = _median(eager["eager_gpu_ns"])
    g_gpu = _median(bundle.replay_kernel_ns)
    step = {
        "runs": eager["runs"],
        "eager_wall_ns": e_wall, "graph_wall_ns": g_wall,
        "saved_ns": e_wall - g_wall,
        "speedup": e_wall / g_wall if g_wall else None,
        "eager_gpu_ns": e_gpu, "graph_gpu_ns": g_gpu,
        "gpu_speedup": e_gpu / g_gpu if g_gpu else None,
        "eager_kernels": round(sum(r["eager_kernels"] for r in rows), 2),
        "graph_kernels": sum(r["graph_kernels"] for r in rows),
    }
    changed = [r for r in rows if r["added"] or r["missing"] or r["replaced"]]
    return {
        "step": step, "modules": rows,
        "kernel_set_changed": bool(changed),
        "slower_in_graph": [f"{r['module']} {r['phase']}" for r in rows
                            if r["slower_in_graph"]],
        "backward_attribution": eager["backward_attribution"],
    }


def graph_coverage(bundle: Bundle, timeline: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """GPU time inside graphs vs outside them (eager work, graphNodeId 0) over the traced
    windows (a model file's: its traced replays; a program's: each traced replay and its
    synchronize: eager work launched between traced replays is not in them); None for a
    bundle whose timeline has no outside-graph time recorded (bundles from before it)."""
    outside = timeline.get("outside_graph_ns")
    if not isinstance(outside, int) or isinstance(outside, bool) or outside < 0:
        return None
    inside = int(sum(n_ns for n in bundle.work_nodes() for n_ns in n.durations_ns))
    total = inside + outside
    return {"graph_ns": inside, "outside_ns": outside, "total_ns": total,
            "outside_records": int(timeline.get("outside_graph_records") or 0),
            "pct": 100.0 * inside / total if total else 100.0}


def tree_summary(trees: Mapping[str, Any]) -> dict[str, Any]:
    """torch.compile's cudagraph trees in a run (cudagraph_trees.json): recordings,
    re-recordings with their reasons, skipped regions with torch's reasons, warm-up runs."""
    ev = trees["events"]
    return {
        "recordings": sum(1 for e in ev if e["event"] == "record"),
        "re_recordings": [{k: e.get(k) for k in ("function", "shapes", "reason")}
                          for e in ev if e["event"] == "re-record"],
        "skips": [e.get("reason", "") for e in ev if e["event"] == "skip"],
        "warmup_runs": sum(trees["warmups"].values()),
        "eager_runs": sum(trees["eager_runs"].values()),
        "counters": dict(trees["counters"]),
        "events_dropped": trees["dropped"],
        "signals_missing": list(trees["missing"]),
    }
