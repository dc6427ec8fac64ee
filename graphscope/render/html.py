"""A self-contained HTML report: a JSON payload plus one template, no CDN, no network.

Views (``templates/report.html``): an icicle chart of GPU time by module (all / forward /
backward; click to zoom, hover for time, share, kernels and the top kernels), a timeline of one
replay on canvas (wheel to zoom, drag to pan, one lane per stream, kernels coloured by module at
a chosen depth with a legend of the colours, the critical path as a red band under its kernels,
a module track above them, a band per graph, ``--try-streams`` spans beside them, hover for op,
shapes, source line and duration), the graph as SVG with modules collapsed or as clusters
(Graphviz at report time), a module tree table (collapsible, sortable by any column, filter box;
a column per phase the bundle ran), a tab per section the report has (Diagnosis, Counters,
Program, Eager vs graph), and for bundles of several graphs or ranks a selector and an overview
table. The payload is columnar with interned strings, so a 100,000-node bundle stays a few MB
and the canvas draws only what is on screen. The page's sentences are worded in Python (here,
``render/diagnosis.py``, ``render/eager.py``, ``render/ranks.py``), never in its script.

Ranks
    A multi-rank bundle's page embeds its ranks section as `report --json` prints it, and a
    Ranks tab draws one lane per rank: each the events of one replay (the same replay on every
    rank where each kept it) from that rank's view. A rank's events are relative to its own
    first event; the section's ``collectives.offsets_ns`` (what to add to a rank's event times
    to put them on the first rank's clock; ``analysis/collectives.py`` says how they are
    measured) place lane r at ``t0_ns[r] + offsets_ns[r]``, less the smallest such shift.
    Without an alignment (no collective matched) the lanes start together. The collectives are
    the section's matched ones, each located in every lane's events; the straggler marks are
    the section's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Optional

from ..analysis import plain
from ..analysis.document import report_json
from ..analysis.report import Report, ReportOptions, build_report
from ..analysis.summary import graph_rows, module_top_kernels, summarize, untraced_graphs
from ..model.bundle import Bundle, display_source, only_graph, source_base
from ..model.bundle_files import BundleExtras
from ..model.graph import UNATTRIBUTED
from .fmt import fmt_ns, gain_words, svg_key
from .ladder_svg import ladder_svg
from .table import uneven_replays, uneven_words, untraced_words

if TYPE_CHECKING:
    from ..analysis.collectives import AlignedCollective, Alignment
    from ..analysis.diagnosis.types import MeasuredStreams
    from ..analysis.ranks import RanksSection
    from ..analysis.stragglers import Straggler

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


def replay_events(bundle: Bundle, replay: int) -> tuple[int, list[Mapping[str, Any]]]:
    """The replay drawn (``replay``, or the first kept if it was not) and its events, sorted by
    start, at most MAX_EVENTS."""
    kept = sorted({int(e["replay"]) for e in bundle.events})
    if kept and replay not in kept:
        replay = kept[0]
    evs = [e for e in bundle.events if int(e["replay"]) == replay][:MAX_EVENTS]
    evs.sort(key=lambda e: (int(e["start_ns"]), int(e.get("stream") or 0)))
    return replay, evs


def _events(bundle: Bundle, strings: _Strings, replay: int, base: Optional[str] = None,
            crit: frozenset[int] = frozenset()) -> dict[str, list[int]]:
    """One replay's kernel boxes as columns (:func:`replay_events`), times from its first
    start; source locations relative to ``base`` (the program's directory); ``cp`` is 1 for
    the nodes (exec ids) in ``crit``, the critical paths."""
    nodes = {n.exec_node_id: n for n in bundle.nodes()}
    _, evs = replay_events(bundle, replay)
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
    typed = from_json(Diagnosis, doc)
    d["words"] = words(typed)  # the tab's sentences, as the terminal's
    for o in typed.graphs:  # the timeline's bands of a graph measured on more streams
        bands = tried_bands(o.what_if_measured) if o.what_if_measured else None
        if bands:
            d["words"]["graphs"][o.graph]["tried_bands"] = bands
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


def tried_bands(m: MeasuredStreams) -> Optional[list[dict[str, Any]]]:
    """The timeline's bands of ``capture --try-streams``'s measurement (None: no span
    measured): the graph re-captured over more streams and the one-stream graph in the same
    alternated replays, each its median span, its IQR where known, its label and hover lines.
    The bundle keeps the re-captured graph's spans, not its kernels: each band is one bar."""
    if m.error or not (m.span_ns and m.one_stream_ns):
        return None
    n = f"{m.replays} replays" if m.replays else "the replays"

    def iqr(x: Optional[tuple[float, float]]) -> str:
        return f", IQR {fmt_ns(x[0])}-{fmt_ns(x[1])}" if x else ""

    equal = ("outputs equal to the one-stream graph's" if m.outputs_equal
             else "outputs DIFFER from the one-stream graph's")
    return [
        {"label": f"{m.streams} streams, measured", "ns": m.span_ns,
         "iqr": list(m.span_iqr_ns) if m.span_iqr_ns else None, "tip": [
             f"the graph re-captured over {m.streams} of up to {m.max_streams} streams "
             f"(capture --try-streams {m.max_streams}): {m.ops} aten ops, "
             f"{m.cross_stream_waits} cross-stream wait(s)",
             f"span {fmt_ns(m.span_ns)} (median of {n}{iqr(m.span_iqr_ns)}): "
             f"{gain_words(m.gain_pct or 0.0)} against one stream; {equal}",
             "its replays keep their spans, not their kernels: one bar"]},
        {"label": "1 stream, same replays", "ns": m.one_stream_ns,
         "iqr": list(m.one_stream_iqr_ns) if m.one_stream_iqr_ns else None, "tip": [
             "the graph as captured, replayed alternately with the re-captured one",
             f"span {fmt_ns(m.one_stream_ns)} (median of {n}{iqr(m.one_stream_iqr_ns)})"]},
    ]


def payload(bundle: Bundle, replay: int = 0,
            ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
            extras: Optional[BundleExtras] = None) -> dict[str, Any]:
    """Everything the page draws, as plain data. ``ranks``: a multi-rank bundle's ranks (then
    ``bundle`` is rank 0's); ``extras``: the bundle's optional files, read by the command.
    ``report``: the bundle's report as `report --json` prints it; the views' numbers and the
    eager, coverage and counters tabs are that report's. A multi-rank bundle's ``ranks`` is
    its ranks section as `report --json` prints it, with the per-rank timeline's data."""
    whole_rows = graph_rows(bundle) if not ranks else None
    whole = build_report(bundle, extras or BundleExtras(), ReportOptions(),
                         summary=summarize(bundle, rows=whole_rows)) if not ranks else None
    strings = _Strings()
    views: list[dict[str, Any]] = []
    overview: list[dict[str, Any]] = []
    sources = list(ranks) if ranks else [(None, bundle)]
    if ranks:  # every rank's view draws one replay: the same on every rank where it can
        replay = common_replay(ranks, replay)
    firsts = []
    for rank, b in sources:
        rows = whole_rows if rank is None and whole_rows is not None else graph_rows(b)
        firsts.append(len(views))
        overview.extend(_source_views(rank, b, rows, strings, replay, views,
                                      whole if rank is None else None))
    title = bundle.path.rstrip("/").rsplit("/", 1)[-1] or "bundle"
    if ranks:
        title = bundle.path.rstrip("/").rsplit("/", 2)[-2]
    doc = report_json(whole) if whole is not None else None
    tabs: dict[str, Any] = {
        k: doc[k] for k in ("eager", "graph_coverage", "cudagraph_trees", "counters")
        if doc is not None and k in doc}
    return {
        **tabs,
        **_words(doc),
        "report": doc,
        "ranks": ranks_payload(ranks, firsts, replay) if ranks else None,
        "schema_version": 2,
        "title": title,
        "versions": bundle.manifest.get("versions", {}),
        "overview": overview,
        # a program's graphs never replayed while traced (the header counts the traced ones),
        # and why, worded as the terminal's header words it
        "untraced_graphs": (untraced := sum(untraced_graphs(b) for _, b in sources)),
        "untraced_words": untraced_words(whole_rows, untraced) if untraced and whole_rows
        else "",
        # graphs traced a different number of times: the header's figure is the median of
        # the replays' totals, said as the terminal says it
        "uneven_words": uneven_words(whole_rows) if whole_rows and uneven_replays(whole_rows)
        else "",
        "views": views,
        "strings": strings.table,
        "graph_svg": {},  # filled by render (Graphviz is optional)
        "ladder_svg": _ladder_charts(bundle, whole_rows) if not ranks else [],
    }


def common_replay(ranks: Sequence[tuple[int, Bundle]], replay: int) -> int:
    """``replay`` where every rank kept its events, else the first such replay (else
    ``replay``: each rank's view then draws its own first)."""
    kept = [{int(e["replay"]) for e in b.events} for _, b in ranks]
    common = sorted(set.intersection(*kept)) if kept else []
    return replay if replay in common or not common else common[0]


def _source_views(rank: Optional[int], b: Bundle, rows: list[dict[str, Any]],
                  strings: _Strings, replay: int, views: list[dict[str, Any]],
                  report: Optional[Report]) -> list[dict[str, Any]]:
    """The views of one rank's bundle (or of the bundle), appended to ``views``: the whole
    bundle's, then one per graph for its MAX_GRAPH_VIEWS slowest; its overview rows."""
    prefix = f"rank {rank}" if rank is not None else ""
    label = prefix or ("all graphs" if len(b.graphs) > 1 else b.graphs[0].name
                       if b.graphs else "bundle")
    if rank is not None and len(b.graphs) > 1:
        label += " · all graphs"
    first = len(views)
    base = source_base(b)
    one = b.graphs[0].name if len(b.graphs) == 1 else None
    views.append(_view(b, strings, replay, label, one,
                       svg_key(rank, one) if one is not None else None, base, report))
    own: dict[str, int] = {}
    if len(b.graphs) > 1:  # each costs a summary
        slowest = sorted(range(len(rows)), key=lambda i: -(rows[i]["median_ns"] or 0.0))
        for i in sorted(slowest[:MAX_GRAPH_VIEWS]):
            g = b.graphs[i]
            own[g.name] = len(views)
            views.append(_view(only_graph(b, g.name), strings, replay,
                               (prefix + " · " if prefix else "") + g.name, g.name,
                               svg_key(rank, g.name), base))
    return [{"rank": rank, "graph": row["name"], "nodes": row["nodes"],
             "work_nodes": row["work_nodes"], "attributed": row["attributed"],
             "replays": row.get("replays", b.replays), "median_ns": row["median_ns"],
             "pool_bytes": row.get("pool_bytes"), "pool_shared": row.get("pool_shared"),
             "view": own.get(row["name"], first if len(b.graphs) == 1 else None)}
            for row in rows]


def _words(doc: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The sentences of the Eager vs graph and Program tabs, as the terminal words them
    (render/eager.py): ``eager_words`` where the report has an eager baseline,
    ``program_words`` (graph coverage, cudagraph trees; a line indented belongs to the one
    above it) where it has either."""
    if doc is None:
        return {}
    from .eager import coverage_line, step_lines, tree_lines

    out: dict[str, Any] = {}
    if "eager" in doc:
        out["eager_words"] = step_lines(doc["eager"])
    program = ([coverage_line(doc["graph_coverage"])] if "graph_coverage" in doc else []) + (
        tree_lines(doc["cudagraph_trees"])
        if "cudagraph_trees" in doc else [])
    if program:
        out["program_words"] = program
    return out


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


# ---------------------------------------------------------------- ranks
def ranks_payload(ranks: Sequence[tuple[int, Bundle]], views: Sequence[int],
                  replay: int) -> dict[str, Any]:
    """The ranks' data of the page (module docstring): ``ranks`` (``model.ranks.read_ranks``),
    the index of each rank's whole view in the page's views, the replay the views draw."""
    from ..analysis.collectives import Alignment
    from ..analysis.ranks import ranks_report
    from .ranks import collective_words, sentences

    section = ranks_report(ranks)
    a = section.collectives if isinstance(section.collectives, Alignment) else None
    lanes, index = [], []
    for (rank, b), view in zip(ranks, views):
        used, evs = replay_events(b, replay)
        lanes.append({"rank": rank, "view": view, "replay": used,
                      "t0_ns": int(evs[0]["start_ns"]) if evs else 0})
        index.append({int(e["exec_node_id"]): k for k, e in enumerate(evs)})
    n = len(a.replays) if a is not None else 0
    collectives = [] if a is None else [
        {"events": [index[i].get(x.exec_node_id, -1) for i, x in enumerate(c.ranks)],
         "label": collective_words(c), "tip": _collective_tip(c, n)} for c in a.collectives]
    return {
        "section": plain(section),
        "header": header_line(section),
        "sentences": sentences(section),
        "drawn": drawn_line(lanes, a),
        "lanes": lanes,
        "collectives": collectives,
        "stragglers": [m for s in section.stragglers
                       if (m := _straggler_mark(s, a, n)) is not None],
    }


def header_line(s: RanksSection) -> str:
    """The page header's numbers: over every rank, then each rank's (never rank 0's alone)."""
    m = s.merged
    each = ", ".join(f"rank {t.rank} {fmt_ns(t.kernel_ns)}" for t in s.totals)
    return (f"{m.ranks} ranks · graph work {fmt_ns(m.kernel_ns)} per replay over all ranks "
            f"({each}) · step {fmt_ns(m.step_ns)} (the longest rank's span)")


def drawn_line(lanes: Sequence[dict[str, Any]], a: Optional[Alignment]) -> str:
    """Which replay each lane draws, and the replays the section's medians are of."""
    replays = sorted({lane["replay"] for lane in lanes})
    drawn = (f"replay {replays[0]} of each rank" if len(replays) == 1 else ", ".join(
        f"rank {lane['rank']} replay {lane['replay']}" for lane in lanes))
    of = (f"; the collectives' numbers are medians over replays "
          f"{', '.join(str(r) for r in a.replays)}" if a is not None else "")
    return f"Drawn: {drawn}{of}."


def _collective_tip(c: AlignedCollective, replays: int) -> list[str]:
    from .ranks import KIND_WORDS, collective_words

    return [f"{collective_words(c)}: {KIND_WORDS.get(c.kind, c.kind)} ({c.kernel})",
            *[f"rank {x.rank}: arrives {fmt_ns(x.arrival_ns)} after the first, waits "
              f"{fmt_ns(x.wait_ns)}, own time {fmt_ns(x.own_ns)}" for x in c.ranks],
            f"medians of {replays} aligned replays; hatched: the wait for the last arrival "
            "in the replay drawn"]


def _straggler_mark(s: Straggler, a: Optional[Alignment], replays: int
                    ) -> Optional[dict[str, Any]]:
    """Where the timeline marks straggler ``s``: its collective (index in the alignment's),
    the late rank and the rank that waits longest, a label and the verdict in words."""
    from .ranks import straggler_sentence

    if a is None:
        return None
    j = next((k for k, c in enumerate(a.collectives)
              if (c.graph, c.index) == (s.graph, s.index)), None)
    if j is None:
        return None
    return {"collective": j, "rank": s.rank, "waiting_rank": s.waiting_rank,
            "label": f"straggler: rank {s.rank}, {fmt_ns(s.late_ns)} late",
            "tip": [straggler_sentence(s, replays)]}
