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

import copy
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Optional

from ..analysis.document import report_json
from ..analysis.report import Report, ReportOptions, build_report
from ..analysis.section import plain
from ..analysis.summary import graph_rows, module_top_kernels, summarize, untraced_graphs
from ..model.bundle import Bundle, display_source, only_graph, source_base
from ..model.bundle_files import BundleExtras
from ..model.graph import UNATTRIBUTED
from .fmt import fmt_ns, svg_key

MAX_EVENTS = 200_000  # timeline boxes of one replay per view
MAX_GRAPH_VIEWS = 100  # bundles of more graphs: views of the slowest, the overview lists all
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


def _events(bundle: Bundle, strings: _Strings, replay: int, base: Optional[str] = None,
            crit: frozenset[int] = frozenset()) -> dict[str, list[int]]:
    """One replay's kernel boxes as columns, sorted by start (first replay kept if ``replay``
    was not); source locations relative to ``base`` (the program's directory); ``cp`` is 1 for
    the nodes (exec ids) in ``crit``, the critical paths."""
    nodes = {n.exec_node_id: n for n in bundle.nodes()}
    kept = sorted({int(e["replay"]) for e in bundle.events})
    if kept and replay not in kept:
        replay = kept[0]
    evs = [e for e in bundle.events if int(e["replay"]) == replay][:MAX_EVENTS]
    evs.sort(key=lambda e: (int(e["start_ns"]), int(e.get("stream") or 0)))
    cols: dict[str, list[int]] = {k: [] for k in ("t", "d", "s", "name", "module", "phase",
                                                  "op", "shapes", "source", "acc", "g", "cp")}
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
        cols["source"].append(strings(display_source(n.source, base) if n else None))
        cols["g"].append(strings(n.graph if n else e.get("graph")))
        cols["acc"].append(1 if n and n.annotation.get("grad_accumulation") else 0)
        cols["cp"].append(1 if int(e["exec_node_id"]) in crit else 0)
    return cols


def _view(bundle: Bundle, strings: _Strings, replay: int, label: str,
          graph: Optional[str] = None, svg: Optional[str] = None,
          base: Optional[str] = None, report: Optional[Report] = None) -> dict[str, Any]:
    """One entry of the view selector: ``graph`` is the one graph it shows (None: several),
    ``svg`` the key of its drawing in ``graph_svg``; ``report``: the view's report, if built
    already (the page's numbers are the report's, as `report --json` prints them)."""
    if report is None:
        report = build_report(bundle, BundleExtras(), ReportOptions(graph=graph))
    doc = report_json(report)
    diag, crit = _diagnosis(doc.get("diagnosis"), len(bundle.graphs))
    return {
        "diagnosis": diag,
        "label": label,
        "graph": graph,
        "graphs": len(bundle.graphs),
        "svg": svg,
        "total_ns": report.header.replay_kernel_median_ns,
        "replays": bundle.replays,
        "coverage": doc["coverage"],
        "modules": plain(report.modules),
        "top_kernels": plain(report.top_kernels),
        "module_kernels": module_top_kernels(bundle),
        "events": _events(bundle, strings, replay, base, crit),
        "ddp": doc.get("ddp", []),
    }


MAX_PATH_IDS = 20_000  # critical-path node ids embedded for the graph view
MAX_DIAGNOSED_GRAPHS = 1000  # a view of more graphs has no diagnosis (each graph's view has)


def _diagnosis(doc: Any, graphs: int) -> tuple[Optional[dict[str, Any]], frozenset[int]]:
    """The view's diagnosis for the page (the report's, per-node slack left out) and the exec
    ids on the critical paths (for the timeline's outlines)."""
    if doc is None or graphs > MAX_DIAGNOSED_GRAPHS:
        return None, frozenset()
    from ..analysis.diagnosis.types import Diagnosis, from_json
    from .diagnosis import words

    d = copy.deepcopy(doc)
    d["words"] = words(from_json(Diagnosis, doc))  # the tab's sentences, as the terminal's
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
        (ser.get("renamed") or {}).pop("what_if_path", None)
    return d, frozenset(crit)


def payload(bundle: Bundle, replay: int = 0,
            ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
            extras: Optional[BundleExtras] = None) -> dict[str, Any]:
    """Everything the page draws, as plain data. ``ranks``: a multi-rank bundle's ranks (then
    ``bundle`` is rank 0's); ``extras``: the bundle's optional files, read by the command.
    ``report``: the bundle's report as `report --json` prints it; the views' numbers and the
    eager, coverage and counters tabs are that report's."""
    whole_rows = graph_rows(bundle) if not ranks else None
    whole = build_report(bundle, extras or BundleExtras(), ReportOptions(),
                         summary=summarize(bundle, rows=whole_rows)) if not ranks else None
    strings = _Strings()
    views: list[dict[str, Any]] = []
    overview: list[dict[str, Any]] = []
    sources = list(ranks) if ranks else [(None, bundle)]
    for rank, b in sources:
        prefix = f"rank {rank}" if rank is not None else ""
        rows = whole_rows if rank is None and whole_rows is not None else graph_rows(b)
        label = prefix or ("all graphs" if len(b.graphs) > 1 else b.graphs[0].name
                           if b.graphs else "bundle")
        if ranks and len(b.graphs) > 1:
            label += " · all graphs"
        first = len(views)
        base = source_base(b)
        one = b.graphs[0].name if len(b.graphs) == 1 else None
        views.append(_view(b, strings, replay, label, one,
                           svg_key(rank, one) if one is not None else None, base,
                           whole if rank is None else None))
        # a view per graph: for the slowest MAX_GRAPH_VIEWS of them (each costs a summary)
        own: dict[str, int] = {}
        if len(b.graphs) > 1:
            slowest = sorted(range(len(rows)), key=lambda i: -(rows[i]["median_ns"] or 0.0))
            keep = sorted(slowest[:MAX_GRAPH_VIEWS])
            for i in keep:
                g = b.graphs[i]
                own[g.name] = len(views)
                views.append(_view(only_graph(b, g.name), strings, replay,
                                   (prefix + " · " if prefix else "") + g.name, g.name,
                                   svg_key(rank, g.name), base))
        overview.extend(
            {"rank": rank, "graph": row["name"], "nodes": row["nodes"],
             "work_nodes": row["work_nodes"], "attributed": row["attributed"],
             "replays": row.get("replays", b.replays), "median_ns": row["median_ns"],
             "pool_bytes": row.get("pool_bytes"), "pool_shared": row.get("pool_shared"),
             "view": own.get(row["name"], first if len(b.graphs) == 1 else None)}
            for row in rows)
    title = bundle.path.rstrip("/").rsplit("/", 1)[-1] or "bundle"
    if ranks:
        title = bundle.path.rstrip("/").rsplit("/", 2)[-2]
    doc = report_json(whole) if whole is not None else None
    tabs: dict[str, Any] = {
        k: doc[k] for k in ("eager", "graph_coverage", "cudagraph_trees", "counters")
        if doc is not None and k in doc}
    return {
        **tabs,
        "report": doc,
        "schema_version": 2,
        "title": title,
        "versions": bundle.manifest.get("versions", {}),
        "overview": overview,
        # a program's graphs never replayed while traced (the header counts the traced ones)
        "untraced_graphs": sum(untraced_graphs(b) for _, b in sources),
        "views": views,
        "strings": strings.table,
        "graph_svg": {},  # filled by render (Graphviz is optional)
        "ladder_svg": _ladder_charts(bundle, rows) if not ranks else [],
    }


MAX_LADDER_POINTS = 2000  # more buckets at one site: report --ladder --json lists them


def _ladder_charts(bundle: Bundle, rows: Optional[list[dict[str, Any]]] = None) -> list[str]:
    """The bucket ladder's charts (time per replay and per row against bucket size), one per
    capture site with several graphs. ``rows``: the bundle's graph rows, if made already."""
    from ..analysis.ladder import ladder

    if len(bundle.graphs) < 2:
        return []
    return [svg for site in ladder(bundle, graph_rows(bundle) if rows is None else rows)
            if len(site["buckets"]) <= MAX_LADDER_POINTS and (svg := ladder_svg(site))]


def render(bundle: Bundle, replay: int = 0,
           ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
           graph_svg: Mapping[str, Mapping[str, Optional[str]]] = {},  # noqa: B006 (read only)
           extras: Optional[BundleExtras] = None,
           ) -> str:
    """The page as one string. ``graph_svg``: the drawings the caller made
    (``render.dot.graph_svgs``: {svg key: {"collapsed", "clusters"}}, None where Graphviz could
    not draw one; empty without Graphviz: then the page says how to get them)."""
    data = payload(bundle, replay, ranks, extras)
    data["graph_svg"] = {k: dict(v) for k, v in graph_svg.items()}
    data["graphviz"] = bool(graph_svg)
    template = resources.files("graphscope.render").joinpath("templates/report.html").read_text(
        encoding="utf-8")
    # Every "<" and ">" escaped: no name can end the script element or open a comment in it.
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    head, tail = template.split("__PAYLOAD__", 1)
    return head + blob + tail


def _points(buckets: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(float(b["batch"]), float(b[key])) for b in buckets
            if b.get("batch") and b.get(key)]


def ladder_svg(site: dict[str, Any], width: int = 360, height: int = 220) -> str:
    """Two panels, time per replay and time per batch row against bucket size (a log x axis
    when the sizes span 16x or more): an inline SVG, every label escaped."""
    import html
    import math

    buckets = site["buckets"]
    panels = [("time per replay", _points(buckets, "median_ns")),
              ("time per row", _points(buckets, "ns_per_row"))]
    xs = [x for _, pts in panels for x, _ in pts]
    if not xs:
        return ""
    lo, hi = min(xs), max(xs)
    logx = lo > 0 and hi / lo >= 16
    fx = (lambda v: math.log2(v)) if logx else (lambda v: v)
    x0, x1 = fx(lo), fx(hi)
    pad_l, pad_r, pad_t, pad_b = 56, 12, 22, 34
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="ladder" style="margin-top:16px" '
             f'width="{2 * width}" height="{height}" font-size="11" font-family="sans-serif">']
    for k, (title, pts) in enumerate(panels):
        ox = k * width
        ymax = max((y for _, y in pts), default=1.0) * 1.1 or 1.0
        w, h = width - pad_l - pad_r, height - pad_t - pad_b

        def px(v: float, ox: int = ox, w: int = w) -> float:
            return ox + pad_l + (w * (fx(v) - x0) / (x1 - x0) if x1 > x0 else w / 2)

        def py(v: float, ymax: float = ymax, h: int = h) -> float:
            return pad_t + h - h * v / ymax

        parts.append(f'<text x="{ox + pad_l}" y="14" font-weight="bold">'
                     f'{html.escape(title)} vs bucket size</text>')
        parts.append(f'<line x1="{ox + pad_l}" y1="{pad_t + h}" x2="{ox + pad_l + w}" '
                     f'y2="{pad_t + h}" stroke="#888"/><line x1="{ox + pad_l}" y1="{pad_t}" '
                     f'x2="{ox + pad_l}" y2="{pad_t + h}" stroke="#888"/>')
        for frac in (0.0, 0.5, 1.0):
            v = ymax / 1.1 * frac
            parts.append(f'<text x="{ox + pad_l - 4}" y="{py(v) + 4:.1f}" text-anchor="end">'
                         f'{html.escape(fmt_ns(v) if v else "0")}</text>')
        parts.extend(f'<text x="{px(x):.1f}" y="{pad_t + h + 14}" text-anchor="middle">'
                     f'{int(x)}</text>' for x in sorted({x for x, _ in pts}))
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        parts.append(f'<polyline fill="none" stroke="#3366cc" points="{line}"/>')
        for x, y in pts:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#3366cc">'
                         f'<title>{html.escape(f"batch {int(x)}: {fmt_ns(y)}")}</title></circle>')
        parts.append(f'<text x="{ox + pad_l + w / 2:.1f}" y="{height - 4}" '
                     f'text-anchor="middle">bucket size (batch rows{", log scale" if logx else ""})'
                     '</text>')
    parts.append("</svg>")
    return "".join(parts)
