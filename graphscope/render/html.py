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
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Optional

from ..analysis.summary import graph_rows, module_top_kernels, summarize
from ..model.graph import UNATTRIBUTED, Bundle, only_graph

MAX_EVENTS = 200_000  # timeline boxes of one replay per view
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


def _events(bundle: Bundle, strings: _Strings, replay: int) -> dict[str, list[int]]:
    """One replay's kernel boxes as columns, sorted by start (first replay kept if ``replay``
    was not)."""
    nodes = {n.exec_node_id: n for n in bundle.nodes()}
    kept = sorted({int(e["replay"]) for e in bundle.events})
    if kept and replay not in kept:
        replay = kept[0]
    evs = [e for e in bundle.events if int(e["replay"]) == replay][:MAX_EVENTS]
    evs.sort(key=lambda e: (int(e["start_ns"]), int(e.get("stream") or 0)))
    cols: dict[str, list[int]] = {k: [] for k in ("t", "d", "s", "name", "module", "phase",
                                                  "op", "shapes", "source", "acc")}
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
    return cols


def _view(bundle: Bundle, strings: _Strings, replay: int, label: str) -> dict[str, Any]:
    s = summarize(bundle, top=10)
    return {
        "label": label,
        "total_ns": s["replay_kernel_median_ns"],
        "replays": bundle.replays,
        "coverage": s["coverage"],
        "modules": s["modules"],
        "top_kernels": s["top_kernels"],
        "module_kernels": module_top_kernels(bundle),
        "events": _events(bundle, strings, replay),
        "ddp": s.get("ddp", []),
    }


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


NO_SVG: Mapping[str, Optional[str]] = {"collapsed": None, "clusters": None}


def render(bundle: Bundle, replay: int = 0,
           ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
           graph_svg: Mapping[str, Optional[str]] = NO_SVG) -> str:
    """The page as one string. ``graph_svg``: the graph views the caller drew
    (``render.dot.graph_svgs``; None where Graphviz could not: the page says how to get them)."""
    data = payload(bundle, replay, ranks)
    data["graph_svg"] = dict(graph_svg)
    template = resources.files("graphscope.render").joinpath("templates/report.html").read_text(
        encoding="utf-8")
    # Every "<" and ">" escaped: no name can end the script element or open a comment in it.
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    head, tail = template.split("__PAYLOAD__", 1)
    return head + blob + tail


def write_html(bundle: Bundle, path: str, replay: int = 0, *, force: bool = False,
               inputs: tuple[str, ...] = (),
               ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
               graph_svg: Mapping[str, Optional[str]] = NO_SVG) -> str:
    from ..outputs import write_output

    write_output(path, render(bundle, replay, ranks, graph_svg), force=force,
                 inputs=(bundle.path, *inputs), what="HTML report")
    return path
