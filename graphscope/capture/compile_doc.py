"""``--try-compile``'s numbers, from the two captured graphs (nodes of the Graph model, each
work node annotated with the compiled module it ran in) and their traced replays: which
modules a glob compiles, and per module and for the whole graph the kernels and time before
(eager) and after (compiled). Pure functions: no torch, no GPU (CPU tests reach them).

Per version of a module: ``kernels`` (kernel nodes) and ``nodes`` (work nodes: kernels,
memcpy, memset), ``busy_ns`` (the sum of its nodes' durations in a replay) and ``span_ns``
(its first node's start to its last node's end in a replay: the busy time plus the gaps
between its kernels, which is what fusing a chain of small kernels saves), each the median
over the traced replays, and its ``top_kernels`` by time. The graph's ``span_ns`` lists
every traced replay's span.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, Optional

from ..model.graph import NodeKind

OUTSIDE = "(outside compiled modules)"
TOP_KERNELS = 5


def module_paths(model: Any) -> list[tuple[str, Any]]:
    """``("L.<path>", module)`` for every module of ``model`` (the root is ``L``), parents
    before their children, as graphscope names modules."""
    return [(f"L.{n}" if n else "L", m) for n, m in model.named_modules()]


def select(paths: Iterable[str], glob: str) -> tuple[list[str], list[str]]:
    """(the modules to compile, those matched inside one of them): ``glob`` matched against
    whole paths (``fnmatch``: ``*`` crosses dots); a match inside another match is compiled
    as part of it. ``paths`` lists parents before children."""
    chosen: list[str] = []
    nested: list[str] = []
    for p in paths:
        if not fnmatchcase(p, glob):
            continue
        (nested if any(p.startswith(c + ".") for c in chosen) else chosen).append(p)
    return chosen, nested


def _median(xs: Sequence[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


def version_stats(nodes: Sequence[Any], replays: Any, modules: Sequence[str]
                  ) -> dict[str, Any]:
    """One version of the graph: its kernels and spans, and per module (``modules``, then
    :data:`OUTSIDE` for the rest) its kernels and times. ``nodes``: the graph's nodes
    (``local_id``, ``is_work``, ``type``, ``short_name``, ``annotation``); ``replays``: its
    traced replays (:class:`~graphscope.capture.alternate.Replays`)."""
    work = [n for n in nodes if n.is_work]
    known = set(modules)
    module_of: dict[int, str] = {}
    for n in work:
        m = n.annotation.get("module_name")
        module_of[n.local_id] = m if m in known else OUTSIDE
    name_of = {n.local_id: n.short_name for n in work}
    rows: dict[str, dict[str, Any]] = {
        m: {"kernels": 0, "nodes": 0, "busy": [], "span": [], "by_kernel": {}, "count": {}}
        for m in (*modules, OUTSIDE)}
    for n in work:
        r = rows[module_of[n.local_id]]
        r["nodes"] += 1
        r["kernels"] += n.type == NodeKind.KERNEL
        r["count"][name_of[n.local_id]] = r["count"].get(name_of[n.local_id], 0) + 1
    for ids, st, en in zip(replays.local_id, replays.start_ns, replays.end_ns):
        _add_replay(rows, module_of, name_of, ids.tolist(), st.tolist(), en.tolist())
    spans = replays.spans()
    return {
        "kernels": sum(n.type == NodeKind.KERNEL for n in work), "nodes": len(work),
        "span_ns": spans, "median_span_ns": _median(spans),
        "modules": {m: _row(r) for m, r in rows.items()},
    }


def _add_replay(rows: dict[str, dict[str, Any]], module_of: Mapping[int, str],
                name_of: Mapping[int, str], ids: list[int], st: list[int], en: list[int]
                ) -> None:
    """One replay's records into each module's busy time, span and time by kernel name."""
    busy: dict[str, int] = {}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    by_kernel: dict[tuple[str, str], int] = {}
    for lid, s, e in zip(ids, st, en):
        m = module_of.get(lid)
        if m is None:  # not a work node of this graph (never the case for a joined record)
            continue
        busy[m] = busy.get(m, 0) + (e - s)
        first[m] = min(first.get(m, s), s)
        last[m] = max(last.get(m, e), e)
        key = (m, name_of[lid])
        by_kernel[key] = by_kernel.get(key, 0) + (e - s)
    for m, b in busy.items():
        rows[m]["busy"].append(b)
        rows[m]["span"].append(last[m] - first[m])
    for (m, k), ns in by_kernel.items():
        rows[m]["by_kernel"].setdefault(k, []).append(ns)


def _row(r: Mapping[str, Any]) -> dict[str, Any]:
    """A module's version as compile.json keeps it (medians over the replays)."""
    tops = sorted(((k, _median(v) or 0.0) for k, v in r["by_kernel"].items()),
                  key=lambda kv: (-kv[1], kv[0]))[:TOP_KERNELS]
    return {"kernels": r["kernels"], "nodes": r["nodes"], "busy_ns": _median(r["busy"]),
            "span_ns": _median(r["span"]),
            "top_kernels": [{"kernel": k, "count": r["count"].get(k, 0), "ns": ns}
                            for k, ns in tops]}


def graph_entry(name: str, eager: Mapping[str, Any], compiled: Mapping[str, Any],
                modules: Sequence[str], replays: int, compared: Mapping[str, Any]
                ) -> dict[str, Any]:
    """compile.json's entry for one graph: both versions' totals, per module both versions,
    and what the outputs compared to."""
    def total(v: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v[k] for k in ("kernels", "nodes", "span_ns", "median_span_ns")}

    one, two = eager["median_span_ns"], compiled["median_span_ns"]
    return {
        "graph": name, "replays": replays, "eager": total(eager), "compiled": total(compiled),
        "gain_pct": 100.0 * (1.0 - two / one) if one and two else None,
        "modules": [{"module": m, "eager": eager["modules"][m],
                     "compiled": compiled["modules"][m]} for m in (*modules, OUTSIDE)],
        **compared,
    }
