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
and the canvas draws only what is on screen. Its figures are the report's and the page's
(``analysis/page.py``: ``build_page``), both built once by the command; here they are only
laid out. The page's sentences are worded in Python (here, ``render/diagnosis.py``,
``render/eager.py``, ``render/ranks.py``), never in its script.

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

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Optional

from ..analysis import Absent, plain
from ..analysis.document import report_json
from ..analysis.page import Page, PageRanks, PageView
from ..analysis.report import Report
from .fmt import fmt_ns, gain_words
from .ladder_svg import ladder_svg
from .table import uneven_replays, uneven_words, untraced_words

if TYPE_CHECKING:
    from ..analysis.collectives import AlignedCollective, Alignment
    from ..analysis.diagnosis.types import Diagnosis, MeasuredStreams
    from ..analysis.ranks import RanksSection
    from ..analysis.stragglers import Straggler

__all__ = ["ladder_svg", "payload", "render"]


def _view(v: PageView) -> dict[str, Any]:
    """One entry of the view selector: the page's figures of it, and its diagnosis's words.
    The whole bundle's view draws its numbers from the embedded report (``"from_report"``);
    a graph's view whose diagnosis is its part of the report's holds only its words (and
    ``report_graph``: the script takes the rest from there)."""
    said = _words_of(v.diagnosis)
    out: dict[str, Any] = {
        "label": v.label, "graph": v.graph, "graphs": v.graphs, "svg": v.svg,
        "replays": v.replays, "module_kernels": v.module_kernels, "events": v.events}
    if v.from_report:
        return {**out, "from_report": True, "words": said}
    if said is None:
        diag = None
    elif v.in_report:
        diag = {"words": said, "report_graph": v.graph}
    else:
        diag = {**(v.diagnosis_json or {}), "words": said}
    f = v.figures
    assert f is not None  # a view not drawn from the report has its own figures
    return {**out, "diagnosis": diag, "total_ns": f.total_ns, "coverage": f.coverage,
            "modules": f.modules, "top_kernels": f.top_kernels, "ddp": f.ddp}


def _words_of(diagnosis: Optional[Diagnosis]) -> Optional[dict[str, Any]]:
    """The Diagnosis tab's sentences, as the terminal's, with the timeline's bands of each
    graph measured on more streams (None: no diagnosis)."""
    if diagnosis is None:
        return None
    from .diagnosis import words

    said = words(diagnosis)
    for o in diagnosis.graphs:
        bands = tried_bands(o.what_if_measured) if o.what_if_measured else None
        if bands:
            said["graphs"][o.graph]["tried_bands"] = bands
    return said


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


def payload(report: Optional[Report], page: Page) -> dict[str, Any]:
    """Everything the page draws, as plain data. ``report``: the bundle's report, built once
    by the command; the page embeds it as `report --json` prints it (``"report"``), and the
    whole bundle's view, the Summary, Eager vs graph, Program and Counters tabs draw from it.
    ``page``: the rest (``analysis.page.build_page``, built once by the command). A
    multi-rank bundle has no report: its page holds the ranks."""
    doc = report_json(report) if report is not None else None
    rows = [dict(r) for r in report.graphs] if report is not None else None
    untraced = page.untraced_graphs
    return {
        **_words(doc),
        "report": doc,
        "summary": summary_lines(report) if report is not None else None,
        "ranks": ranks_payload(page.ranks) if page.ranks is not None else None,
        "schema_version": 3,
        "title": page.title,
        "versions": page.versions,
        "overview": [dict(o) for o in page.overview],
        # a program's graphs never replayed while traced (the header counts the traced ones),
        # and why, worded as the terminal's header words it
        "untraced_graphs": untraced,
        "untraced_words": untraced_words(rows, untraced) if untraced and rows else "",
        # graphs traced a different number of times: the header's figure is the median of
        # the replays' totals, said as the terminal says it
        "uneven_words": uneven_words(rows) if rows and uneven_replays(rows) else "",
        "views": [_view(v) for v in page.views],
        "strings": list(page.strings),
        "graph_svg": {},  # filled by render (Graphviz is optional)
        "ladder_svg": [svg for site in page.ladder if (svg := ladder_svg(dict(site)))],
    }


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


def render(report: Optional[Report], page: Page,
           graph_svg: Mapping[str, Mapping[str, Optional[str]]] = {},  # noqa: B006 (read only)
           ) -> str:
    """The page as one string (:func:`payload` says what it takes). ``graph_svg``: the
    drawings the caller made (``render.dot.graph_svgs``: {svg key: {"collapsed",
    "clusters"}}, None where Graphviz could not draw one; empty without Graphviz: then the
    page says how to get them)."""
    data = payload(report, page)
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
def ranks_payload(p: PageRanks) -> dict[str, Any]:
    """The ranks' data of the page (module docstring): the section, its lanes and where each
    aligned collective and straggler sits (``analysis.page.PageRanks``), in words."""
    from ..analysis.collectives import Alignment
    from .ranks import collective_words, sentences

    section = p.section
    a = section.collectives if isinstance(section.collectives, Alignment) else None
    lanes = [plain(lane) for lane in p.lanes]
    n = len(a.replays) if a is not None else 0
    collectives = [] if a is None else [
        {"events": list(events), "label": collective_words(c), "tip": _collective_tip(c, n)}
        for c, events in zip(a.collectives, p.collective_events)]
    return {
        "section": plain(section),
        "header": header_line(section),
        "sentences": sentences(section),
        "drawn": drawn_line(lanes, a),
        "lanes": lanes,
        "collectives": collectives,
        "stragglers": [_straggler_mark(s, j, n) for s, j
                       in zip(section.stragglers, p.straggler_collectives) if j is not None],
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


def _straggler_mark(s: Straggler, j: int, replays: int) -> dict[str, Any]:
    """Where the timeline marks straggler ``s``: its collective ``j`` (index in the
    alignment's), the late rank and the rank that waits longest, a label and the verdict in
    words."""
    from .ranks import straggler_sentence

    return {"collective": j, "rank": s.rank, "waiting_rank": s.waiting_rank,
            "label": f"straggler: rank {s.rank}, {fmt_ns(s.late_ns)} late",
            "tip": [straggler_sentence(s, replays)]}
