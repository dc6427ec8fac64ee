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

from ..analysis import Absent, plain
from ..analysis.document import report_json
from ..analysis.report import Report, ReportOptions, report_diagnosis
from ..analysis.summary import module_top_kernels, untraced_graphs
from ..model.bundle import Bundle, display_source, only_graph, source_base
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


def _view(bundle: Bundle, strings: _Strings, replay: int, label: str, graph: Optional[str],
          svg: Optional[str], diagnosis: Optional[Mapping[str, Any]], top: int,
          base: Optional[str] = None, in_report: bool = False) -> dict[str, Any]:
    """One entry of the view selector: ``graph`` is the one graph it shows (None: several),
    ``svg`` the key of its drawing in ``graph_svg``, ``diagnosis`` its diagnosis as JSON;
    ``in_report``: that is the graph's part of the embedded report's (the script takes it
    from there: here only its words)."""
    from ..analysis.summary import summarize

    s = summarize(bundle, top=top)
    diag, crit = _diagnosis(diagnosis, len(bundle.graphs), keep=in_report)
    if diag is not None and in_report:
        diag["report_graph"] = graph
    return {
        "diagnosis": diag, "label": label, "graph": graph, "graphs": len(bundle.graphs),
        "svg": svg, "total_ns": s["replay_kernel_median_ns"], "replays": bundle.replays,
        "coverage": s["coverage"], "modules": s["modules"], "top_kernels": s["top_kernels"],
        "module_kernels": module_top_kernels(bundle),
        "events": _events(bundle, strings, replay, base, crit), "ddp": s.get("ddp", []),
    }


def _report_view(report: Report, bundle: Bundle, strings: _Strings, replay: int, label: str,
                 graph: Optional[str], svg: Optional[str]) -> dict[str, Any]:
    """The whole bundle's view: its numbers are the embedded report's (the page's script
    reads them from there: ``"from_report"``), here only what the page alone draws."""
    diag, crit = _diagnosis(_present(report.diagnosis), len(bundle.graphs), keep=True,
                            typed=None if isinstance(report.diagnosis, Absent)
                            else report.diagnosis)
    return {
        "from_report": True, "label": label, "graph": graph, "graphs": len(bundle.graphs),
        "svg": svg, "replays": bundle.replays, "words": diag["words"] if diag else None,
        "module_kernels": module_top_kernels(bundle),
        "events": _events(bundle, strings, replay, source_base(bundle), crit),
    }


def _present(section: object) -> Any:
    """A report section as JSON (the diagnosis's own form: fields left out while None), None
    where it is absent."""
    from ..analysis.diagnosis.types import to_json

    return None if isinstance(section, Absent) else to_json(section)


def one_graph(diagnosis: Optional[Mapping[str, Any]], graph: str
              ) -> Optional[Mapping[str, Any]]:
    """The part of a bundle's diagnosis (JSON) about ``graph``: its figures, verdicts and
    findings; the bundle's own (between replays) left out."""
    if diagnosis is None:
        return None
    f = diagnosis["findings"]
    return {**diagnosis, "graphs": [o for o in diagnosis["graphs"] if o["graph"] == graph],
            "between_replays": None, "verdicts": [],
            "findings": {**f, "findings": [x for x in f["findings"] if x["graph"] == graph],
                         "refuted": [r for r in f.get("refuted") or () if r[0] == graph]}}


MAX_PATH_IDS = 20_000  # critical-path node ids embedded for the graph view
MAX_DIAGNOSED_GRAPHS = 1000  # a view of more graphs has no diagnosis (each graph's view has)


def _diagnosis(doc: Optional[Mapping[str, Any]], graphs: int, keep: bool = False,
               typed: Any = None) -> tuple[Optional[dict[str, Any]], frozenset[int]]:
    """The view's diagnosis for the page (per-node slack and each replay's figures left out,
    its words added) and the exec ids on the critical paths (for the timeline's outlines).
    ``keep``: the diagnosis rides in the embedded report: only its words."""
    if doc is None or graphs > MAX_DIAGNOSED_GRAPHS:
        return None, frozenset()
    from ..analysis.diagnosis.types import Diagnosis, from_json
    from .diagnosis import words

    typed = typed if typed is not None else from_json(Diagnosis, doc)
    said = words(typed)  # the tab's sentences, as the terminal's
    for o in typed.graphs:  # the timeline's bands of a graph measured on more streams
        bands = tried_bands(o.what_if_measured) if o.what_if_measured else None
        if bands:
            said["graphs"][o.graph]["tried_bands"] = bands
    crit = frozenset(i for o in doc["graphs"] if o.get("critical_path")
                     for i in o["critical_path"].get("exec_node_ids") or ())
    if keep:
        return {"words": said}, crit
    d = copy.deepcopy(dict(doc))
    d["words"] = said
    for o in d["graphs"]:
        cp = o.get("critical_path")
        if cp:
            cp.pop("exec_node_ids", None)
            if len(cp["nodes"]) > MAX_PATH_IDS:
                cp["nodes"] = cp["nodes"][:MAX_PATH_IDS]
                cp["truncated"] = True
        o.pop("replays", None)
        ser = o.get("serialization") or {}
        ser.pop("what_if_path", None)
        (ser.get("renamed") or {}).pop("what_if_path", None)
    return d, crit


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


def payload(report: Optional[Report], bundle: Bundle, replay: int = 0,
            ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
            section: Optional[RanksSection] = None) -> dict[str, Any]:
    """Everything the page draws, as plain data. ``report``: the bundle's report, built once
    by the command; the page embeds it as `report --json` prints it (``"report"``), and the
    whole bundle's view, the Summary, Eager vs graph, Program and Counters tabs draw from it.
    ``bundle``: its nodes, for what only the page draws (timeline, per-graph views). A
    multi-rank bundle has no report: ``ranks`` (``model.ranks.read_ranks``; then ``bundle`` is
    rank 0's) and ``section``, their ranks section, built once by the command."""
    strings = _Strings()
    views: list[dict[str, Any]] = []
    overview: list[dict[str, Any]] = []
    sources = list(ranks) if ranks else [(None, bundle)]
    if ranks:  # every rank's view draws one replay: the same on every rank where it can
        replay = common_replay(ranks, replay)
    firsts = []
    for rank, b in sources:
        firsts.append(len(views))
        overview.extend(_source_views(rank, b, strings, replay, views,
                                      report if rank is None else None))
    title = bundle.path.rstrip("/").rsplit("/", 1)[-1] or "bundle"
    if ranks:
        title = bundle.path.rstrip("/").rsplit("/", 2)[-2]
    doc = report_json(report) if report is not None else None
    rows = [dict(r) for r in report.graphs] if report is not None else None
    untraced = report.header.untraced_graphs if report is not None else sum(
        untraced_graphs(b) for _, b in sources)
    return {
        **_words(doc),
        "report": doc,
        "summary": summary_lines(report) if report is not None else None,
        "ranks": ranks_payload(ranks, firsts, replay, section) if ranks and section else None,
        "schema_version": 3,
        "title": title,
        "versions": bundle.manifest.get("versions", {}),
        "overview": overview,
        # a program's graphs never replayed while traced (the header counts the traced ones),
        # and why, worded as the terminal's header words it
        "untraced_graphs": untraced,
        "untraced_words": untraced_words(rows, untraced) if untraced and rows else "",
        # graphs traced a different number of times: the header's figure is the median of
        # the replays' totals, said as the terminal says it
        "uneven_words": uneven_words(rows) if rows and uneven_replays(rows) else "",
        "views": views,
        "strings": strings.table,
        "graph_svg": {},  # filled by render (Graphviz is optional)
        "ladder_svg": _ladder_charts(report, bundle) if report is not None else [],
    }


def common_replay(ranks: Sequence[tuple[int, Bundle]], replay: int) -> int:
    """``replay`` where every rank kept its events, else the first such replay (else
    ``replay``: each rank's view then draws its own first)."""
    kept = [{int(e["replay"]) for e in b.events} for _, b in ranks]
    common = sorted(set.intersection(*kept)) if kept else []
    return replay if replay in common or not common else common[0]


def _source_views(rank: Optional[int], b: Bundle, strings: _Strings, replay: int,
                  views: list[dict[str, Any]], report: Optional[Report]
                  ) -> list[dict[str, Any]]:
    """The views of one rank's bundle (or of the bundle, whose ``report`` is given), appended
    to ``views``: the whole bundle's, then one per graph for its MAX_GRAPH_VIEWS slowest; its
    overview rows. Each graph's diagnosis is its part of the bundle's (diagnosed once); a
    bundle too large for one is diagnosed graph by graph, for the graphs that have a view."""
    from ..analysis.summary import graph_rows

    prefix = f"rank {rank}" if rank is not None else ""
    label = prefix or ("all graphs" if len(b.graphs) > 1 else b.graphs[0].name
                       if b.graphs else "bundle")
    if rank is not None and len(b.graphs) > 1:
        label += " · all graphs"
    first = len(views)
    base = source_base(b)
    one = b.graphs[0].name if len(b.graphs) == 1 else None
    key = svg_key(rank, one) if one is not None else None
    top = report.options.top if report is not None else ReportOptions().top
    if report is not None:
        rows: list[dict[str, Any]] = [dict(r) for r in report.graphs]
        views.append(_report_view(report, b, strings, replay, label, one, key))
        whole = _present(report.diagnosis)
        # left out for the bundle's size (not as not asked for): each graph's view has its own
        by_graph = (isinstance(report.diagnosis, Absent)
                    and report.diagnosis.reason == "too_large")
    else:
        rows = graph_rows(b)
        whole = _rank_diagnosis(b)
        by_graph = whole is None
        views.append(_view(b, strings, replay, label, one, key, whole, top, base))
    own: dict[str, int] = {}
    if len(b.graphs) > 1:  # each costs a summary
        slowest = sorted(range(len(rows)), key=lambda i: -(rows[i]["median_ns"] or 0.0))
        for i in sorted(slowest[:MAX_GRAPH_VIEWS]):
            name = b.graphs[i].name
            own[name] = len(views)
            g = only_graph(b, name)
            views.append(_view(g, strings, replay, (prefix + " · " if prefix else "") + name,
                               name, svg_key(rank, name),
                               report_diagnosis(g) if by_graph else one_graph(whole, name), top,
                               base, in_report=report is not None and not by_graph))
    return [{"rank": rank, "graph": row["name"], "nodes": row["nodes"],
             "work_nodes": row["work_nodes"], "attributed": row["attributed"],
             "replays": row.get("replays", b.replays), "median_ns": row["median_ns"],
             "pool_bytes": row.get("pool_bytes"), "pool_shared": row.get("pool_shared"),
             "view": own.get(row["name"], first if len(b.graphs) == 1 else None)}
            for row in rows]


def _rank_diagnosis(b: Bundle) -> Optional[Mapping[str, Any]]:
    """A rank's diagnosis: its diagnosis.json where current, else made (None where the report
    would not diagnose a bundle this size by default)."""
    from ..model.bundle_files import read_diagnosis

    return read_diagnosis(b.path) or report_diagnosis(b)


def summary_lines(report: Report) -> Optional[list[tuple[int, str]]]:
    """The Summary tab: the report's answer (what the bundle is, where its time goes, what
    bounds each graph, what to try first) in the terminal's words, (indent, text) lines."""
    from .answer import answer_lines

    return None if isinstance(report.answer, Absent) else answer_lines(report.answer)


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


def _ladder_charts(report: Report, bundle: Bundle) -> list[str]:
    """The bucket ladder's charts (time per replay and per row against bucket size), one per
    capture site with several graphs: the report's ladder, or (it shows one only for bundles
    that recorded capture cost) the ladder of the report's graph rows."""
    from ..analysis.ladder import ladder

    if len(bundle.graphs) < 2:
        return []
    sites = _present(report.ladder) or ladder(bundle, [dict(r) for r in report.graphs])
    return [svg for site in sites
            if len(site["buckets"]) <= MAX_LADDER_POINTS and (svg := ladder_svg(site))]


def render(report: Optional[Report], bundle: Bundle, replay: int = 0,
           ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
           graph_svg: Mapping[str, Mapping[str, Optional[str]]] = {},  # noqa: B006 (read only)
           section: Optional[RanksSection] = None) -> str:
    """The page as one string (:func:`payload` says what it takes). ``graph_svg``: the
    drawings the caller made (``render.dot.graph_svgs``: {svg key: {"collapsed",
    "clusters"}}, None where Graphviz could not draw one; empty without Graphviz: then the
    page says how to get them)."""
    data = payload(report, bundle, replay, ranks, section)
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
                  replay: int, section: RanksSection) -> dict[str, Any]:
    """The ranks' data of the page (module docstring): ``ranks`` (``model.ranks.read_ranks``),
    the index of each rank's whole view in the page's views, the replay the views draw, and
    their ranks section."""
    from ..analysis.collectives import Alignment
    from .ranks import collective_words, sentences

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
