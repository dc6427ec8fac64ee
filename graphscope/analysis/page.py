"""The HTML page's figures beyond the report, computed once: :func:`build_page`.

The page (``render/html.py``) draws the :class:`~.report.Report` and, from the bundle's nodes,
what only it shows: one replay's kernels as timeline columns (strings interned once for every
view), each view's module top kernels, a view per graph for the slowest graphs (each its
summary and its part of the diagnosis), the overview rows, the bucket ladder's sites, and for
a multi-rank bundle each rank's views (its diagnosis where the ranks section keeps none) and
where its lanes and collectives sit. The command builds the :class:`Page` once and hands it,
with the report, to the page's renderer, which words and lays it out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ..model.bundle import Bundle, display_source, only_graph, source_base
from ..model.graph import UNATTRIBUTED
from ..render.fmt import svg_key
from . import Absent
from .diagnosis.types import Diagnosis, from_json, to_json
from .report import Report, ReportOptions, report_diagnosis
from .summary import graph_rows, module_top_kernels, summarize, untraced_graphs

if TYPE_CHECKING:
    from .ranks import RanksSection

MAX_EVENTS = 200_000  # timeline boxes of one replay per view
MAX_GRAPH_VIEWS = 100  # bundles of more graphs: views of the slowest, the overview lists all
MAX_PATH_IDS = 20_000  # critical-path node ids embedded for the graph view
MAX_DIAGNOSED_GRAPHS = 1000  # a view of more graphs has no diagnosis (each graph's view has)
MAX_LADDER_POINTS = 2000  # more buckets at one site: report --ladder --json lists them
_PHASES = {"forward": 0, "backward": 1, "optimizer": 2}
Columns = Mapping[str, list[int]]


@dataclass(frozen=True)
class ViewFigures:
    """A view's own summary (a graph's view, or a rank's): its GPU work per replay (median),
    coverage, module rows, top kernels and DDP buckets (``summary.summarize``'s)."""

    total_ns: float
    coverage: Any
    modules: Any
    top_kernels: Any
    ddp: Any


@dataclass(frozen=True)
class PageView:
    """One entry of the page's view selector. ``graph``: the one graph it shows (None:
    several); ``svg``: the key of its drawing; ``events``: one replay's kernel boxes as
    columns (indexes into :attr:`Page.strings`); ``figures``: None where the numbers are the
    report's (the whole bundle's view); ``diagnosis``: the view's, for its words (None: no
    diagnosis); ``diagnosis_json``: its JSON as the page embeds it (per-node slack and each
    replay's figures left out), None where it rides in the report (``in_report``)."""

    label: str
    graph: Optional[str]
    graphs: int
    svg: Optional[str]
    replays: int
    module_kernels: Mapping[str, list[list[Any]]]
    events: Columns
    from_report: bool = False
    in_report: bool = False
    figures: Optional[ViewFigures] = None
    diagnosis: Optional[Diagnosis] = None
    diagnosis_json: Optional[Mapping[str, Any]] = None


@dataclass(frozen=True)
class Lane:
    """A rank's lane on the Ranks tab: its whole view, the replay drawn, its first start."""

    rank: int
    view: int
    replay: int
    t0_ns: int


@dataclass(frozen=True)
class PageRanks:
    """A multi-rank page's ranks: the section, one lane per rank, for each aligned collective
    its event (index in the lane's replay, -1: not there) in each lane, and for each
    straggler the index of its collective (None: not aligned)."""

    section: RanksSection
    lanes: tuple[Lane, ...]
    collective_events: tuple[tuple[int, ...], ...]
    straggler_collectives: tuple[Optional[int], ...]


@dataclass(frozen=True)
class Page:
    """What the page draws beyond the report (module docstring)."""

    title: str
    versions: Mapping[str, Any]
    views: tuple[PageView, ...]
    overview: tuple[Mapping[str, Any], ...]
    strings: tuple[str, ...]
    untraced_graphs: int
    ladder: tuple[Mapping[str, Any], ...] = ()  # the sites drawn as charts
    ranks: Optional[PageRanks] = None


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


@dataclass
class _Build:
    """The page as it is built: the views so far, one strings table, the replay drawn."""

    replay: int
    strings: _Strings = field(default_factory=_Strings)
    views: list[PageView] = field(default_factory=list)


def build_page(report: Optional[Report], bundle: Bundle, replay: int = 0,
               ranks: Optional[Sequence[tuple[int, Bundle]]] = None,
               section: Optional[RanksSection] = None,
               kept: Sequence[Optional[Mapping[str, Any]]] = ()) -> Page:
    """The page of ``report`` (built once by the command) and ``bundle`` (its nodes: the
    timeline, per-graph views). A multi-rank bundle has no report: ``ranks``
    (``model.ranks.read_ranks``; then ``bundle`` is rank 0's), their ``section`` and each
    rank's kept diagnosis.json (``kept``, None where not current: then it is made here)."""
    build = _Build(replay=common_replay(ranks, replay) if ranks else replay)
    sources = list(ranks) if ranks else [(None, bundle)]
    overview: list[Mapping[str, Any]] = []
    firsts = []
    for i, (rank, b) in enumerate(sources):
        firsts.append(len(build.views))
        overview.extend(_source_views(build, rank, b, report if rank is None else None,
                                      kept[i] if i < len(kept) else None))
    title = bundle.path.rstrip("/").rsplit("/", 1)[-1] or "bundle"
    if ranks:
        title = bundle.path.rstrip("/").rsplit("/", 2)[-2]
    untraced = report.header.untraced_graphs if report is not None else sum(
        untraced_graphs(b) for _, b in sources)
    return Page(
        title=title, versions=bundle.manifest.get("versions", {}), views=tuple(build.views),
        overview=tuple(overview), strings=tuple(build.strings.table), untraced_graphs=untraced,
        ladder=_ladder_sites(report, bundle) if report is not None else (),
        ranks=_ranks(ranks, firsts, build.replay, section) if ranks and section else None)


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


def _view(build: _Build, bundle: Bundle, label: str, graph: Optional[str], svg: Optional[str],
          diagnosis: Optional[Mapping[str, Any]], top: int, base: Optional[str] = None,
          in_report: bool = False) -> PageView:
    """A view of its own figures: ``diagnosis`` is its diagnosis as JSON; ``in_report``: that
    is the graph's part of the embedded report's (the page takes it from there)."""
    s = summarize(bundle, top=top)
    typed, doc, crit = _diagnosis(diagnosis, len(bundle.graphs), keep=in_report)
    return PageView(
        label=label, graph=graph, graphs=len(bundle.graphs), svg=svg, replays=bundle.replays,
        module_kernels=module_top_kernels(bundle),
        events=_events(bundle, build.strings, build.replay, base, crit),
        in_report=in_report,
        figures=ViewFigures(total_ns=s["replay_kernel_median_ns"], coverage=s["coverage"],
                            modules=s["modules"], top_kernels=s["top_kernels"],
                            ddp=s.get("ddp", [])),
        diagnosis=typed, diagnosis_json=doc)


def _report_view(build: _Build, report: Report, bundle: Bundle, label: str,
                 graph: Optional[str], svg: Optional[str]) -> PageView:
    """The whole bundle's view: its numbers are the embedded report's."""
    typed, _, crit = _diagnosis(_present(report.diagnosis), len(bundle.graphs), keep=True,
                            typed=None if isinstance(report.diagnosis, Absent)
                            else report.diagnosis)
    return PageView(
        label=label, graph=graph, graphs=len(bundle.graphs), svg=svg, replays=bundle.replays,
        module_kernels=module_top_kernels(bundle),
        events=_events(bundle, build.strings, build.replay, source_base(bundle), crit),
        from_report=True, in_report=True, diagnosis=typed)


def _present(section: object) -> Any:
    """A report section as JSON (the diagnosis's own form: fields left out while None), None
    where it is absent."""
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


def _diagnosis(doc: Optional[Mapping[str, Any]], graphs: int, keep: bool = False,
               typed: Optional[Diagnosis] = None
               ) -> tuple[Optional[Diagnosis], Optional[dict[str, Any]], frozenset[int]]:
    """A view's diagnosis (for its words; None: none, or too many graphs), its JSON for the
    page (per-node slack and each replay's figures left out; None where ``keep``: it rides in
    the embedded report) and the exec ids on the critical paths (the timeline's outlines)."""
    if doc is None or graphs > MAX_DIAGNOSED_GRAPHS:
        return None, None, frozenset()
    typed = typed if typed is not None else from_json(Diagnosis, doc)
    crit = frozenset(i for o in doc["graphs"] if o.get("critical_path")
                     for i in o["critical_path"].get("exec_node_ids") or ())
    if keep:
        return typed, None, crit
    d = copy.deepcopy(dict(doc))
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
    return typed, d, crit


def common_replay(ranks: Sequence[tuple[int, Bundle]], replay: int) -> int:
    """``replay`` where every rank kept its events, else the first such replay (else
    ``replay``: each rank's view then draws its own first)."""
    kept = [{int(e["replay"]) for e in b.events} for _, b in ranks]
    common = sorted(set.intersection(*kept)) if kept else []
    return replay if replay in common or not common else common[0]



def _source_views(build: _Build, rank: Optional[int], b: Bundle, report: Optional[Report],
                  kept: Optional[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The views of one rank's bundle (or of the bundle, whose ``report`` is given), appended
    to the page's: the whole bundle's, then one per graph for its MAX_GRAPH_VIEWS slowest; its
    overview rows. Each graph's diagnosis is its part of the bundle's (diagnosed once); a
    bundle too large for one is diagnosed graph by graph, for the graphs that have a view."""
    prefix = f"rank {rank}" if rank is not None else ""
    label = prefix or ("all graphs" if len(b.graphs) > 1 else b.graphs[0].name
                       if b.graphs else "bundle")
    if rank is not None and len(b.graphs) > 1:
        label += " · all graphs"
    views = build.views
    first = len(views)
    base = source_base(b)
    one = b.graphs[0].name if len(b.graphs) == 1 else None
    key = svg_key(rank, one) if one is not None else None
    top = report.options.top if report is not None else ReportOptions().top
    if report is not None:
        rows: list[dict[str, Any]] = [dict(r) for r in report.graphs]
        views.append(_report_view(build, report, b, label, one, key))
        whole = _present(report.diagnosis)
        # left out for the bundle's size (not as not asked for): each graph's view has its own
        by_graph = (isinstance(report.diagnosis, Absent)
                    and report.diagnosis.reason == "too_large")
    else:
        rows = graph_rows(b)
        whole = kept or report_diagnosis(b)  # a rank's diagnosis.json where current, else made
        by_graph = whole is None
        views.append(_view(build, b, label, one, key, whole, top, base))
    own: dict[str, int] = {}
    if len(b.graphs) > 1:  # each costs a summary
        slowest = sorted(range(len(rows)), key=lambda i: -(rows[i]["median_ns"] or 0.0))
        for i in sorted(slowest[:MAX_GRAPH_VIEWS]):
            name = b.graphs[i].name
            own[name] = len(views)
            g = only_graph(b, name)
            views.append(_view(build, g, (prefix + " · " if prefix else "") + name, name,
                               svg_key(rank, name),
                               report_diagnosis(g) if by_graph else one_graph(whole, name), top,
                               base, in_report=report is not None and not by_graph))
    return [{"rank": rank, "graph": row["name"], "nodes": row["nodes"],
             "work_nodes": row["work_nodes"], "attributed": row["attributed"],
             "replays": row.get("replays", b.replays), "median_ns": row["median_ns"],
             "pool_bytes": row.get("pool_bytes"), "pool_shared": row.get("pool_shared"),
             "view": own.get(row["name"], first if len(b.graphs) == 1 else None)}
            for row in rows]


def _ladder_sites(report: Report, bundle: Bundle) -> tuple[Mapping[str, Any], ...]:
    """The bucket ladder's sites the page charts, one per capture site with several graphs:
    the report's ladder, or (it shows one only for bundles that recorded capture cost) the
    ladder of the report's graph rows; a site of over MAX_LADDER_POINTS buckets left out."""
    if len(bundle.graphs) < 2:
        return ()
    from .ladder import ladder

    sites = _present(report.ladder) or ladder(bundle, [dict(r) for r in report.graphs])
    return tuple(site for site in sites if len(site["buckets"]) <= MAX_LADDER_POINTS)


def _ranks(ranks: Sequence[tuple[int, Bundle]], views: Sequence[int], replay: int,
           section: RanksSection) -> PageRanks:
    """Where each rank's lane and each aligned collective sit: ``views`` is the index of each
    rank's whole view, ``replay`` the one the views draw (module docstring of render/html.py:
    how the lanes are placed)."""
    from .collectives import Alignment

    a = section.collectives if isinstance(section.collectives, Alignment) else None
    lanes, index = [], []
    for (rank, b), view in zip(ranks, views):
        used, evs = replay_events(b, replay)
        lanes.append(Lane(rank=rank, view=view, replay=used,
                          t0_ns=int(evs[0]["start_ns"]) if evs else 0))
        index.append({int(e["exec_node_id"]): k for k, e in enumerate(evs)})
    events = () if a is None else tuple(
        tuple(index[i].get(x.exec_node_id, -1) for i, x in enumerate(c.ranks))
        for c in a.collectives)
    stragglers = tuple(None if a is None else next(
        (k for k, c in enumerate(a.collectives) if (c.graph, c.index) == (s.graph, s.index)),
        None) for s in section.stragglers)
    return PageRanks(section=section, lanes=tuple(lanes), collective_events=events,
                     straggler_collectives=stragglers)
