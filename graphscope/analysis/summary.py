"""Aggregate a bundle into the module tree, top kernels and per-op rows.

Times are per replay: a module's time in replay r is the sum of its nodes' durations in r
(inclusive of sub-modules); the table shows the median over replays. Summed over the top-level
rows, per-replay times add up exactly to the replay's graph work time.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ..model.bundle import Bundle
from ..model.graph import DDP_SCOPE, UNATTRIBUTED, Node, NodeKind
from .stats import median, tree_key

ACCUMULATION_KEY = "grad_accumulation"  # the autograd engine's gradient-accumulation adds


def _prefixes(module: str) -> list[str]:
    if module == UNATTRIBUTED or "." not in module:
        return [module]
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _factorize(keys: list[str]) -> tuple[np.ndarray, list[str]]:
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64,
                        count=len(keys))
    return codes, list(index)


def _group_sum(codes: np.ndarray, n_groups: int, values: np.ndarray) -> np.ndarray:
    out = np.zeros((n_groups,) + values.shape[1:], dtype=values.dtype)
    np.add.at(out, codes, values)
    return out


def _median_rows(m: np.ndarray) -> np.ndarray:
    if m.shape[1] == 0:
        return np.zeros(m.shape[0])
    return np.median(m, axis=1)


def module_rows(bundle: Bundle, depth: Optional[int] = None) -> list[dict[str, Any]]:
    """Rows of the module tree, depth-first; ``depth`` limits rows to that many levels."""
    work = bundle.work
    codes, modules = _factorize([n.module for n in work])
    prefixes: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    for m, name in enumerate(modules):
        pairs.extend((m, prefixes.setdefault(p, len(prefixes))) for p in _prefixes(name))
    src = np.array([m for m, _ in pairs], dtype=np.int64)
    dst = np.array([p for _, p in pairs], dtype=np.int64)
    dur = bundle.durations
    if dur.ndim == 2 and dur.shape[1]:  # replays none of these nodes ran in (a graph of a
        dur = dur[:, dur.sum(axis=0) > 0]  # program traced fewer times than others): not 0 ns
    t, k = _rolled_up(codes, len(modules), dur, _phase_masks(work), src, dst, len(prefixes))
    # optimizer work is neither forward nor backward (fwd = all - bwd - opt)
    med = {key: _median_rows(v) for key, v in t.items()}
    med_f = _median_rows(t["all"] - t["bwd"] - t["opt"])
    total = median([float(x) for x in bundle.replay_kernel_ns])
    rows = []
    for name in sorted(prefixes, key=tree_key):
        lvl = 0 if name == UNATTRIBUTED else name.count(".")
        if depth is not None and lvl > depth:
            continue
        i = prefixes[name]
        rows.append({
            "module": name,
            "level": lvl,
            "kernels": int(k["all"][i]),
            "fwd_kernels": int(k["all"][i] - k["bwd"][i] - k["opt"][i]),
            "bwd_kernels": int(k["bwd"][i]),
            "opt_kernels": int(k["opt"][i]),
            "median_ns": float(med["all"][i]),
            "fwd_ns": float(med_f[i]),
            "bwd_ns": float(med["bwd"][i]),
            "opt_ns": float(med["opt"][i]),
            "acc_kernels": int(k["acc"][i]),
            "acc_ns": float(med["acc"][i]),
            "pct": (100.0 * float(med["all"][i]) / total) if total else 0.0,
            "per_replay_ns": t["all"][i].tolist(),
        })
    return rows


def _phase_masks(work: Sequence[Node]) -> dict[str, Optional[np.ndarray]]:
    """Which work nodes each column counts: all, backward, optimizer, gradient accumulation."""
    n = len(work)
    return {
        "all": None,
        "bwd": np.fromiter((x.phase == "backward" for x in work), dtype=bool, count=n),
        "opt": np.fromiter((x.phase == "optimizer" for x in work), dtype=bool, count=n),
        "acc": np.fromiter((bool(x.annotation.get(ACCUMULATION_KEY)) for x in work),
                           dtype=bool, count=n),
    }


def _rolled_up(codes: np.ndarray, n_mod: int, dur: np.ndarray,
               masks: dict[str, Optional[np.ndarray]], src: np.ndarray, dst: np.ndarray,
               n_pre: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per mask: each module prefix's time per replay and kernel count, its own nodes and
    those of every module below it (``src`` module -> ``dst`` prefix pairs)."""
    times, kernels = {}, {}
    for key, m in masks.items():
        c, d = (codes, dur) if m is None else (codes[m], dur[m])
        t_mod = _group_sum(c, n_mod, d)
        k_mod = np.bincount(c, minlength=n_mod)
        times[key] = _group_sum(dst, n_pre, t_mod[src])
        kernels[key] = np.bincount(dst, weights=k_mod[src], minlength=n_pre).astype(np.int64)
    return times, kernels


def kernel_rows(bundle: Bundle, top: int = 10, key: str = "kernel") -> list[dict[str, Any]]:
    """Top kernels (by short name) or ops (``key="op"``) by median time per replay."""
    work = bundle.work
    names = [n.short_name if key == "kernel" else (n.op or "(no op recorded)") for n in work]
    codes, groups = _factorize(names)
    t = _group_sum(codes, len(groups), bundle.durations)
    counts = np.bincount(codes, minlength=len(groups))
    med = _median_rows(t)
    total = median([float(x) for x in bundle.replay_kernel_ns])
    # the rows of copy and memset nodes (their short name is their type) say so
    copies = {NodeKind.MEMCPY.value, NodeKind.MEMSET.value} if key == "kernel" else set()
    rows: list[dict[str, Any]] = [
        {
            key: g,
            "count": int(counts[i]),
            "median_ns": float(med[i]),
            "pct": (100.0 * float(med[i]) / total) if total else 0.0,
            **({"type": g} if g in copies else {}),
        }
        for i, g in enumerate(groups)
    ]
    rows.sort(key=lambda x: (-x["median_ns"], -x["count"], x[key]))
    return rows[:top] if top else rows


def coverage(bundle: Bundle) -> dict[str, Any]:
    """Share of work nodes that carry a module annotation, by phase (``optimizer`` only where
    a captured step has one)."""
    out: dict[str, Any] = {}
    phases = ["forward", "backward"]
    if any(_phase_of(n) == "optimizer" for n in bundle.work):
        phases.append("optimizer")
    for phase in phases:
        nodes = [n for n in bundle.work_nodes() if _phase_of(n) == phase]
        tagged = [n for n in nodes if n.module != UNATTRIBUTED]
        out[phase] = {
            "nodes": len(nodes),
            "attributed": len(tagged),
            "pct": 100.0 * len(tagged) / len(nodes) if nodes else 100.0,
        }
    return out


def _phase_of(n: Node) -> str:
    if n.annotation:
        return n.phase
    return "backward" if n.graph == "backward" else "unknown"


def graph_rows(bundle: Bundle) -> list[dict[str, Any]]:
    """One row per graph: size, its info (site, replays, pool memory) and its median time per
    replay (sum of its work nodes' durations in each counted replay: every traced one but a
    cold first one, as the diagnosis counts them)."""
    from .diagnosis.graph import set_aside

    dur = bundle.durations
    rows = []
    start = 0
    several = len(bundle.graphs) > 1
    for g in bundle.graphs:
        n_work = sum(1 for n in g.nodes if n.is_work)
        block = dur[start:start + n_work]
        start += n_work
        per_replay = block.sum(axis=0) if block.size else np.zeros(0)
        # a program's graph leaves out its own cold first replay (one graph's bundle comes
        # without it already: counted_view)
        aside = set(set_aside(bundle, g)) if several and len(per_replay) > 1 else set()
        traced = [float(x) for r, x in enumerate(per_replay) if x > 0 and r not in aside]
        row: dict[str, Any] = {
            "name": g.name, "exec_id": g.exec_id, "nodes": len(g.nodes), "work_nodes": n_work,
            # None: never replayed while traced (a ladder's unused bucket), not "0 ns"
            "edges": len(g.edges), "median_ns": median(traced) if traced else None,
            "attributed": sum(1 for n in g.nodes if n.is_work and n.module != UNATTRIBUTED),
        }
        for k in ("site", "ordinal", "kind", "shapes", "replays", "traced_replays",
                  "pool_bytes", "pool_id"):
            if k in g.info:
                row[k] = g.info[k]
        rows.append(row)
    # graphs that share one memory pool: the pool once (its largest reading), not per graph
    pools: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("pool_id") is not None:
            pools.setdefault(str(row["pool_id"]), []).append(row)
    for i, members in enumerate(m for m in pools.values() if len(m) > 1):
        size = max(r.get("pool_bytes") or 0 for r in members)
        for j, r in enumerate(members):
            r["pool_shared"] = {"pool": i + 1, "graphs": len(members), "bytes": size,
                                "first": j == 0}
    return rows


def modules_by_graph(bundle: Bundle, depth: Optional[int] = 2,
                     rows: Optional[list[dict[str, Any]]] = None) -> Optional[dict[str, Any]]:
    """Module time per graph, one column per graph (a forward-mode bundle's buckets); None
    for a bundle of one graph. ``rows``: the bundle's :func:`graph_rows`, if made already."""
    if len(bundle.graphs) < 2 or len(bundle.graphs) > 16:
        return None
    from ..model.bundle import only_graph

    cols = [g.name for g in bundle.graphs]
    # a graph never replayed while traced has no time in its column (None), not 0 ns
    timed = [r["median_ns"] is not None for r in (rows or graph_rows(bundle))]
    table: dict[str, list[Optional[float]]] = {}
    levels: dict[str, int] = {}
    for i, name in enumerate(cols):
        # each graph's counted replays (its own cold first one left out), as its row's
        for row in module_rows(counted_view(only_graph(bundle, name)), depth):
            table.setdefault(row["module"], [0.0 if t else None for t in timed])[i] = (
                row["median_ns"] if timed[i] else None)
            levels[row["module"]] = row["level"]
    rows = [{"module": m, "level": levels[m], "per_graph_ns": table[m]}
            for m in sorted(table, key=tree_key)]
    return {"graphs": cols, "rows": rows}


def untraced_graphs(bundle: Bundle) -> int:
    """A program's graphs that none of the traced replays ran (graphs of a model file are all
    replayed by graphscope: 0)."""
    return sum(1 for g in bundle.graphs if g.info.get("traced_replays") == 0)


def _ddp(bundle: Bundle, work: list[Node]) -> list[dict[str, Any]]:
    """DDP's buckets (analysis/ddp.py, loaded only for a bundle with DDP's reducer work)."""
    if not any(n.module == DDP_SCOPE for n in work):
        return []
    from .ddp import ddp_rows

    return ddp_rows(bundle)


def counted_view(bundle: Bundle) -> Bundle:
    """``bundle`` with the replays its figures leave out taken out: a cold first replay of a
    bundle of one graph, which its diagnosis sets aside (``diagnosis.graph.set_aside``), so
    that a module's time, the header's GPU work and the diagnosis's count the same replays.
    A bundle of several graphs is returned as it is (each graph's row leaves out its own)."""
    if len(bundle.graphs) != 1 or not bundle.replays:
        return bundle
    from ..model.graph import CapturedGraph
    from .diagnosis.graph import set_aside

    (g,) = bundle.graphs
    aside = set(set_aside(bundle, g))
    if not aside:
        return bundle
    keep = [r for r in range(bundle.replays) if r not in aside]

    def kept(xs: Sequence[int]) -> tuple[int, ...]:
        return tuple(xs[r] for r in keep if r < len(xs))

    nodes = tuple(dataclasses.replace(n, durations_ns=kept(n.durations_ns)) if n.durations_ns
                  else n for n in g.nodes)
    graph = CapturedGraph(g.name, g.template_graph_id, g.exec_id, nodes, g.edges, g.info)
    return dataclasses.replace(bundle, graphs=(graph,), replays=len(keep),
                               replay_kernel_ns=kept(bundle.replay_kernel_ns),
                               replay_span_ns=kept(bundle.replay_span_ns))


def summarize(bundle: Bundle, top: int = 10,
              rows: Optional[list[dict[str, Any]]] = None) -> dict[str, Any]:
    """Everything `graphscope report` shows, as plain data (also written to summary.json).
    ``rows``: the bundle's :func:`graph_rows`, if made already (a walk of every graph).
    Times are over the replays the figures count (:func:`counted_view`); ``replays`` is the
    number traced."""
    traced = bundle.replays
    bundle = counted_view(bundle)
    work = list(bundle.work_nodes())
    rows = graph_rows(bundle) if rows is None else rows
    return {
        "graphs": rows,
        "replays": traced,
        "untraced_graphs": untraced_graphs(bundle),
        "replay_kernel_median_ns": median([float(x) for x in bundle.replay_kernel_ns]),
        "replay_span_median_ns": median([float(x) for x in bundle.replay_span_ns]),
        "work_nodes": len(work),
        "annotated_nodes": sum(1 for n in work if n.annotation),
        "coverage": coverage(bundle),
        "modules": [{k: v for k, v in row.items() if k != "per_replay_ns"}
                    for row in module_rows(bundle)],
        "top_kernels": kernel_rows(bundle, top),
        "top_ops": kernel_rows(bundle, top, key="op"),
        "unjoined_records": bundle.unjoined_records,
        **({"by_graph": by} if (by := modules_by_graph(bundle, rows=rows)) else {}),
        **({"ddp": ddp} if (ddp := _ddp(bundle, work)) else {}),
        **_memory(bundle, rows),
    }


_ROW_TIMES = ("median_ns", "fwd_ns", "bwd_ns", "opt_ns", "acc_ns", "pct")


def untimed_as_null(s: dict[str, Any]) -> dict[str, Any]:
    """``s`` (a :func:`summarize` result) as ``report --json`` prints it: where no replay of
    the view was timed (a program's graph never traced, alone under ``--graph``), its times are
    null, not 0 ns (which reads as measured at zero), as the graph rows already are and the
    tables show them ("-"). A program's several graphs (``graphscope run``) have no span per
    replay: the program replays each when it likes, so the first start of the i-th replay of
    one to the last end of another's measures the program's pauses, not the graphs (null, as
    the header leaves it out)."""
    graphs = s.get("graphs") or []
    if len(graphs) > 1 and any("site" in g for g in graphs):
        s = {**s, "replay_span_median_ns": None}
    if s.get("replays"):
        return s

    def rows(key: str) -> list[dict[str, Any]]:
        return [{k: (None if k in _ROW_TIMES else v) for k, v in r.items()}
                for r in s.get(key) or []]

    return {**s, "replay_kernel_median_ns": None, "replay_span_median_ns": None,
            "modules": rows("modules"), "top_kernels": rows("top_kernels"),
            "top_ops": rows("top_ops")}


def _memory(bundle: Bundle, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Pools, capture cost and memory by module, and the bucket ladder: for bundles that
    recorded them (analysis/memory.py, analysis/ladder.py)."""
    from .ladder import ladder
    from .memory import memory_summary

    mem = memory_summary(bundle)
    if mem is None:
        return {}
    sites = ladder(bundle, rows)
    return {"memory": mem, **({"ladder": sites} if sites else {})}


def module_top_kernels(bundle: Bundle, top: int = 3) -> dict[str, list[list[Any]]]:
    """module prefix -> its top kernels [[short name, median ns per replay, count], ...]."""
    work = bundle.work
    if not work:
        return {}
    dur = bundle.durations
    med = np.median(dur, axis=1) if dur.shape[1] else np.zeros(len(work))
    pair_t: dict[tuple[str, str], float] = defaultdict(float)
    pair_n: dict[tuple[str, str], int] = defaultdict(int)
    for n, t in zip(work, med.tolist()):
        pair_t[(n.module, n.short_name)] += t
        pair_n[(n.module, n.short_name)] += 1
    per_prefix: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for (mod, k), t in pair_t.items():
        parts = mod.split(".") if mod != UNATTRIBUTED else [mod]
        for i in range(1, len(parts) + 1):
            slot = per_prefix[".".join(parts[:i])].setdefault(k, [0.0, 0])
            slot[0] += t
            slot[1] += pair_n[(mod, k)]
    return {p: [[k, round(v[0]), int(v[1])] for k, v in
                sorted(ks.items(), key=lambda kv: -kv[1][0])[:top]]
            for p, ks in per_prefix.items()}
