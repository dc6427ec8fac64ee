"""A self-contained HTML report: a JSON payload plus one template, no CDN, no network.

Views (``templates/report.html``): an icicle chart of GPU time by module (all / forward /
backward; click to zoom, hover for time, share, kernels and the top kernels), a timeline of one
replay on canvas (wheel to zoom, drag to pan, one lane per stream, kernels coloured by module at
a chosen depth, a module track above them, hover for op, shapes, source line and duration), the
graph as SVG with modules collapsed or as clusters (Graphviz at report time), a module tree table
(collapsible, sortable by any column, filter box), and for bundles of several graphs or ranks a
selector and an overview table. The payload is columnar with interned strings, so a 100,000-node
bundle stays a few MB and the canvas draws only what is on screen.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Sequence
from importlib import resources
from typing import Any, Optional

import numpy as np

from ..graphs.model import UNATTRIBUTED, Bundle, only_graph
from .summary import graph_rows, summarize

MAX_EVENTS = 200_000  # timeline boxes of one replay per view
MAX_GRAPH_SVG_NODES = 1500  # the expanded (clustered) graph view is embedded up to this size
_PHASES = {"forward": 0, "backward": 1, "optimizer": 2}


class _Strings:
    """Interned strings: each event column holds indexes into one table."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self.index: dict[Optional[str], int] = {}

    def __call__(self, s: Optional[str]) -> int:
        if s is None:
            return -1
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


def _top_kernels(bundle: Bundle, top: int = 3) -> dict[str, list[list[Any]]]:
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


def _events(bundle: Bundle, strings: _Strings, replay: int,
            crit: frozenset[int] = frozenset()) -> dict[str, list[int]]:
    """One replay's kernel boxes as columns, sorted by start (first replay kept if ``replay``
    was not); ``cp`` is 1 for the nodes (exec ids) in ``crit``, the critical paths."""
    nodes = {n.exec_node_id: n for n in bundle.nodes()}
    kept = sorted({int(e["replay"]) for e in bundle.events})
    if kept and replay not in kept:
        replay = kept[0]
    evs = [e for e in bundle.events if int(e["replay"]) == replay][:MAX_EVENTS]
    evs.sort(key=lambda e: (int(e["start_ns"]), int(e.get("stream") or 0)))
    cols: dict[str, list[int]] = {k: [] for k in ("t", "d", "s", "name", "module", "phase",
                                                  "op", "shapes", "source", "acc", "cp")}
    t0 = int(evs[0]["start_ns"]) if evs else 0
    for e in evs:
        n = nodes.get(int(e["exec_node_id"]))
        cols["t"].append(int(e["start_ns"]) - t0)
        cols["d"].append(int(e["dur_ns"]))
        cols["s"].append(int(e.get("stream") or 0))
        cols["name"].append(strings(n.short_name if n else str(e.get("kind", "?"))))
        cols["module"].append(strings(n.module if n else UNATTRIBUTED))
        cols["phase"].append(_PHASES.get(n.phase, 3) if n and n.annotation else 3)
        cols["op"].append(strings(n.op if n else None))
        cols["shapes"].append(strings(n.shapes if n else None))
        cols["source"].append(strings(n.source if n else None))
        cols["acc"].append(1 if n and n.annotation.get("grad_accumulation") else 0)
        cols["cp"].append(1 if int(e["exec_node_id"]) in crit else 0)
    return cols


def _view(bundle: Bundle, strings: _Strings, replay: int, label: str) -> dict[str, Any]:
    s = summarize(bundle, top=10)
    diag, crit = _diagnosis(bundle)
    return {
        "diagnosis": diag,
        "label": label,
        "total_ns": s["replay_kernel_median_ns"],
        "replays": bundle.replays,
        "coverage": s["coverage"],
        "modules": s["modules"],
        "top_kernels": s["top_kernels"],
        "module_kernels": _top_kernels(bundle),
        "events": _events(bundle, strings, replay, crit),
        "ddp": s.get("ddp", []),
    }


MAX_PATH_IDS = 20_000  # critical-path node ids embedded for the graph view


def _diagnosis(bundle: Bundle) -> tuple[dict[str, Any], frozenset[int]]:
    """The view's diagnosis for the page (analysis/diagnosis.py; per-node slack left out)
    and the exec ids on the critical paths (for the timeline's outlines)."""
    from ..analysis.diagnosis import diagnose, to_json

    d = to_json(diagnose(bundle))
    crit: set[int] = set()
    for o in d["graphs"]:
        cp = o.get("critical_path")
        if cp:
            crit.update(cp.pop("exec_node_ids"))
            if len(cp["nodes"]) > MAX_PATH_IDS:
                cp["nodes"] = cp["nodes"][:MAX_PATH_IDS]
                cp["truncated"] = True
        o.pop("replays", None)
        ser = o.get("serialization") or {}
        ser.pop("what_if_path", None)
    return d, frozenset(crit)


def _svgs(bundle: Bundle) -> dict[str, Optional[str]]:
    """The first graph as SVG: modules collapsed, and as clusters when small enough."""
    if shutil.which("dot") is None or not bundle.graphs:
        return {"collapsed": None, "clusters": None}
    from ..exporters.dot import DotOptions, build_dot
    from ..exporters.dot import render as render_dot

    out: dict[str, Optional[str]] = {}
    for key, opts in (("collapsed", DotOptions(collapse=True, depth=1)),
                      ("clusters", DotOptions(collapse=False, depth=2))):
        if key == "clusters" and len(bundle.graphs[0].nodes) > MAX_GRAPH_SVG_NODES:
            out[key] = None
            continue
        try:
            text, _ = build_dot(bundle, opts)
            svg = render_dot(text, "svg").decode("utf-8", errors="replace")
            out[key] = svg[svg.find("<svg"):]
        except Exception:  # the page says how to get it instead
            out[key] = None
    return out


def payload(bundle: Bundle, replay: int = 0,
            ranks: Optional[Sequence[tuple[int, Bundle]]] = None) -> dict[str, Any]:
    """Everything the page draws, as plain data. ``ranks``: a multi-rank bundle's ranks (then
    ``bundle`` is rank 0's)."""
    strings = _Strings()
    views: list[dict[str, Any]] = []
    overview: list[dict[str, Any]] = []
    sources = list(ranks) if ranks else [(None, bundle)]
    for rank, b in sources:
        prefix = f"rank {rank}" if rank is not None else ""
        overview.extend(
            {"rank": rank, "graph": row["name"], "nodes": row["nodes"],
             "work_nodes": row["work_nodes"], "attributed": row["attributed"],
             "replays": row.get("replays", b.replays), "median_ns": row["median_ns"],
             "pool_bytes": row.get("pool_bytes")} for row in graph_rows(b))
        label = prefix or ("all graphs" if len(b.graphs) > 1 else b.graphs[0].name
                           if b.graphs else "bundle")
        if ranks and len(b.graphs) > 1:
            label += " · all graphs"
        views.append(_view(b, strings, replay, label))
        if len(b.graphs) > 1:
            views.extend(_view(only_graph(b, g.name), strings, replay,
                               (prefix + " · " if prefix else "") + g.name) for g in b.graphs)
    title = bundle.path.rstrip("/").rsplit("/", 1)[-1] or "bundle"
    if ranks:
        title = bundle.path.rstrip("/").rsplit("/", 2)[-2]
    return {
        "schema_version": 2,
        "title": title,
        "versions": bundle.manifest.get("versions", {}),
        "overview": overview,
        "views": views,
        "strings": strings.table,
        "graph_svg": {},  # filled by render (Graphviz is optional)
    }


def render(bundle: Bundle, replay: int = 0,
           ranks: Optional[Sequence[tuple[int, Bundle]]] = None) -> str:
    """The page as one string."""
    data = payload(bundle, replay, ranks)
    data["graph_svg"] = _svgs(bundle)
    template = resources.files("graphscope.reports").joinpath("templates/report.html").read_text(
        encoding="utf-8")
    # Every "<" and ">" escaped: no name can end the script element or open a comment in it.
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    head, tail = template.split("__PAYLOAD__", 1)
    return head + blob + tail


def write_html(bundle: Bundle, path: str, replay: int = 0, *, force: bool = False,
               inputs: tuple[str, ...] = (),
               ranks: Optional[Sequence[tuple[int, Bundle]]] = None) -> str:
    from ..outputs import write_output

    write_output(path, render(bundle, replay, ranks), force=force,
                 inputs=(bundle.path, *inputs), what="HTML report")
    return path
