"""The answer a report opens with: what the bundle is, where its time goes, what bounds each
graph, and the first things to try, as data (render/answer.py words it on one screen).

Built from the report's own sections (the graphs' rows, the module rows, the diagnosis), so
that the answer's figures are those the tables below it print: it computes no figure of its
own but the ranges over a group of graphs and the order of the findings.

Graphs of one capture site (a serving loop's bucket ladder) are one group: the answer gives
the range over the group and names its buckets, and a kind of finding found in several of the
group's graphs is one finding naming them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

GROUPED_FROM = 5  # a capture site of this many graphs or more is one row (--full: each)
TOP_MODULES = 3  # modules named in "where the time goes"
TOP_FINDINGS = 3  # findings the answer lists (the table below has them all)
TOP_BOUNDS = 3  # groups whose bounds the answer says (the Diagnosis below has every graph)
BUCKETS_NAMED = 4  # bucket labels named per group before "… N more"


@dataclass(frozen=True)
class GraphGroup:
    """One graph, or the graphs of one capture site (a bucket ladder)."""

    site: str  # the capture site ("decode.py:71"), or the graph's name where it has none
    names: tuple[str, ...]  # the graphs, in the bundle's order
    buckets: tuple[str, ...]  # each graph's name without the site ("#0 [1,1] [1]")
    traced: int  # graphs of the group replayed while traced
    low_ns: Optional[float]  # GPU work per replay (the Graphs table's time/replay): least
    high_ns: Optional[float]  # and most over the traced graphs; None: none traced
    replays: Optional[int]  # the program's replays of the group's graphs (None: not counted)
    nodes_low: int  # nodes per graph: least and most
    nodes_high: int
    attributed: int  # work nodes tagged with a module, over the group
    work_nodes: int
    pool_bytes: Optional[int]  # the group's pool memory: each pool once (None: not recorded)
    pools: int  # distinct pools the group's graphs use


@dataclass(frozen=True)
class ModuleTime:
    """A top-level module's GPU time per replay (the module table's row)."""

    module: str
    time_ns: float
    pct: float


@dataclass(frozen=True)
class Bound:
    """What bounds a group's graphs: the diagnosis's figures over the group."""

    site: str
    graphs: int  # graphs of the group the diagnosis measured
    buckets: tuple[str, ...]  # their names without the site (one graph: its name)
    span_low_ns: Optional[float]
    span_high_ns: Optional[float]
    # the figures and verdicts of one graph, the group's of the longest span (one graph's
    # numbers in one sentence; the Diagnosis counts each verdict over the group)
    widest: str  # its name without the site
    path_pct: Optional[float]  # its critical path / its span
    idle_pct: Optional[float]
    verdicts: tuple[Any, ...]  # its analysis.diagnosis.Verdict's


@dataclass(frozen=True)
class GroupedFinding:
    """A finding, or one kind of finding in several graphs of one capture site."""

    kind: str
    site: str  # "" for the bundle's own (between replays)
    graphs: tuple[str, ...]
    buckets: tuple[str, ...]  # the graphs' names without the site
    low_ns: float  # the least and most saving per replay over the graphs
    high_ns: float
    pct: float  # the first graph's share of its span
    finding: Any  # the first graph's analysis.diagnosis.Finding (its words, its try)
    # what it saves over the program's run: each graph's saving per replay times its replays
    # (a program's graphs; None where the replays are not counted, a model file's)
    program_ns: Optional[float] = None


@dataclass(frozen=True)
class VerdictGroup:
    """One kind of verdict over a group's graphs: how many graphs have it, and the first."""

    code: str
    graphs: tuple[str, ...]
    first: Any  # analysis.diagnosis.Verdict of the first graph that has it


@dataclass(frozen=True)
class DiagnosisGroup:
    """The Diagnosis of a group's graphs as ranges (least, most) over the measured graphs."""

    site: str
    names: tuple[str, ...]  # the measured graphs
    buckets: tuple[str, ...]
    path_ns: tuple[Optional[float], Optional[float]]
    work_ns: tuple[Optional[float], Optional[float]]
    span_ns: tuple[Optional[float], Optional[float]]
    idle_pct: tuple[Optional[float], Optional[float]]
    launch_ns: tuple[Optional[float], Optional[float]]
    verdicts: tuple[VerdictGroup, ...]


@dataclass(frozen=True)
class LadderTrim:
    """A capture site's buckets the program could drop (``analysis.ladder.trim``)."""

    site: str
    never_replayed: tuple[str, ...]  # bucket names without the site
    no_faster: tuple[tuple[str, str], ...]  # (bucket, the larger bucket it would run as)
    segment_bytes: Optional[float]  # at most this much pool freed
    capture_s: Optional[float]  # capture and instantiation time saved


@dataclass(frozen=True)
class Answer:
    """The report's first screen (module docstring)."""

    mode: Optional[str]  # the manifest's ("step", "forward", "run", ...)
    replays: int
    work_ns: Optional[float]  # the header's GPU work per replay
    groups: tuple[GraphGroup, ...]
    modules: tuple[ModuleTime, ...]
    bounds: tuple[Bound, ...]
    findings: tuple[GroupedFinding, ...]
    more_findings: int  # grouped findings left out of the answer (the table lists them)
    more_bounds: int  # groups whose bounds are left out (the Diagnosis has every graph)
    all_findings: tuple[GroupedFinding, ...] = ()  # every finding, grouped (the table's rows)
    trims: tuple[LadderTrim, ...] = ()  # bucket ladders with buckets to drop
    diagnosis: tuple[DiagnosisGroup, ...] = ()  # the Diagnosis by group


FORWARD_BUCKETS = "forward buckets"  # capture --mode forward's graphs, one per input bucket


def _site(row: Mapping[str, Any]) -> str:
    """The capture site a graph is grouped by: a program's capture line; a forward capture's
    input buckets are one model's graphs too; any other graph is its own."""
    if row.get("site"):
        return str(row["site"])
    if row.get("kind") == "forward" and str(row["name"]).startswith("bucket"):
        return FORWARD_BUCKETS
    return str(row["name"])


def graph_groups(rows: Sequence[Mapping[str, Any]]) -> tuple[GraphGroup, ...]:
    """The graphs' rows grouped by capture site, in the order of each site's first graph."""
    by_site: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_site.setdefault(_site(r), []).append(r)
    out = []
    for site, members in by_site.items():
        times = [float(r["median_ns"]) for r in members if r.get("median_ns")]
        counted = [r["replays"] for r in members if isinstance(r.get("replays"), int)]
        pools: dict[str, int] = {}
        for r in members:
            if r.get("pool_bytes") is not None:
                key = str(r.get("pool_id") if r.get("pool_id") is not None else r["name"])
                pools[key] = max(pools.get(key, 0), int(r["pool_bytes"]))
        nodes = [int(r["nodes"]) for r in members]
        out.append(GraphGroup(
            site=site, names=tuple(str(r["name"]) for r in members),
            buckets=tuple(_bucket(str(r["name"]), site) for r in members),
            traced=len(times), low_ns=min(times) if times else None,
            high_ns=max(times) if times else None,
            replays=sum(counted) if len(counted) == len(members) else None,
            nodes_low=min(nodes), nodes_high=max(nodes),
            attributed=sum(int(r.get("attributed") or 0) for r in members),
            work_nodes=sum(int(r["work_nodes"]) for r in members),
            pool_bytes=sum(pools.values()) if pools else None, pools=len(pools)))
    return tuple(out)


def _bucket(name: str, site: str) -> str:
    return name[len(site):].strip() if name.startswith(site) and name != site else name


def ladder_trims(sites: Any) -> tuple[LadderTrim, ...]:
    """The report's bucket ladders (``analysis.ladder``: a tuple of sites, or Absent) that
    have buckets to drop."""
    out = []
    for site in sites if isinstance(sites, (list, tuple)) else ():
        t = site.get("trim") or {}
        if not t.get("buckets"):
            continue
        name = str(site["site"])
        out.append(LadderTrim(
            site=name, never_replayed=tuple(_bucket(str(b), name)
                                            for b in site["never_replayed"]),
            no_faster=tuple((_bucket(x["bucket"], name), _bucket(x["into"], name))
                            for x in t["no_faster"]),
            segment_bytes=t.get("segment_bytes"), capture_s=t.get("capture_s")))
    return tuple(out)


def build_answer(header: Any, rows: Sequence[Mapping[str, Any]],
                 modules: Sequence[Mapping[str, Any]], diagnosis: Any,
                 mode: Optional[str], ladders: Any = ()) -> Answer:
    """The answer from the report's sections: ``header`` (report.Header), the graphs' and the
    modules' rows, ``diagnosis`` (analysis.diagnosis.Diagnosis, or None where the report
    has none) and the bucket ladders (``ladders``)."""
    groups = graph_groups(rows)
    site_of = {n: g.site for g in groups for n in g.names}
    top = _top_modules(modules)
    shares = tuple(ModuleTime(str(r["module"]), float(r["median_ns"]), float(r["pct"]))
                   for r in top[:TOP_MODULES])
    bounds: tuple[Bound, ...] = ()
    grouped: list[GroupedFinding] = []
    dgroups: tuple[DiagnosisGroup, ...] = ()
    if diagnosis is not None:
        bounds = _bounds(diagnosis, groups)
        counts = {str(r["name"]): int(r["replays"]) for r in rows
                  if isinstance(r.get("replays"), int) and r.get("site")}
        grouped = group_findings(diagnosis.findings.findings, site_of, counts or None)
        dgroups = diagnosis_groups(diagnosis, groups)
    return Answer(mode=mode, replays=int(header.replays),
                  work_ns=header.replay_kernel_median_ns if header.replays else None,
                  groups=groups, modules=shares, bounds=bounds[:TOP_BOUNDS],
                  more_bounds=max(0, len(bounds) - TOP_BOUNDS),
                  findings=tuple(grouped[:TOP_FINDINGS]), all_findings=tuple(grouped),
                  trims=ladder_trims(ladders),
                  diagnosis=dgroups,
                  more_findings=max(0, len(grouped) - TOP_FINDINGS))


def _top_modules(modules: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The modules that say where the time goes: the top level, with a root that holds most
    of the time (80% or more: the model itself) replaced by its children; largest first."""
    timed = [r for r in modules if r.get("median_ns")]
    top = sorted((r for r in timed if r.get("level") == 0), key=lambda r: -float(r["median_ns"]))
    if top and float(top[0]["pct"]) >= 80.0:
        head = top[0]
        kids = [r for r in timed if r.get("level") == 1
                and str(r["module"]).startswith(f"{head['module']}.")]
        top = sorted(kids + top[1:], key=lambda r: -float(r["median_ns"])) if kids else top
    return top


def _measured(diagnosis: Any, groups: Sequence[GraphGroup]
              ) -> list[tuple[GraphGroup, list[Any]]]:
    """Each group with its graphs' diagnoses (those replayed while traced), where it has any."""
    by_name = {o.graph: o for o in diagnosis.graphs}
    out = []
    for grp in groups:
        measured = [by_name[n] for n in grp.names if n in by_name and by_name[n].timed]
        if measured:
            out.append((grp, measured))
    return out


def _bounds(diagnosis: Any, groups: Sequence[GraphGroup]) -> tuple[Bound, ...]:
    out = []
    for grp, measured in _measured(diagnosis, groups):
        spans = [o.span_ns for o in measured if o.span_ns]
        widest = max(measured, key=lambda o: o.span_ns or 0.0)
        path = widest.critical_path.length_ns if widest.critical_path is not None else None
        out.append(Bound(
            site=grp.site, graphs=len(measured),
            buckets=tuple(_bucket(o.graph, grp.site) for o in measured),
            span_low_ns=min(spans) if spans else None,
            span_high_ns=max(spans) if spans else None,
            path_pct=100.0 * path / widest.span_ns if path and widest.span_ns else None,
            widest=_bucket(widest.graph, grp.site), idle_pct=widest.idle_pct,
            verdicts=tuple(widest.verdicts)))
    return tuple(out)


def group_findings(findings: Sequence[Any], site_of: Mapping[str, str],
                   replays: Optional[Mapping[str, int]] = None) -> list[GroupedFinding]:
    """``findings`` (ranked) with the findings of one kind in graphs of one capture site made
    one, ranked by what they save the program: each graph's saving per replay times how often
    the program replayed it (``replays``: a program's graphs, each counted; else, as for a
    model file's graphs, each replayed alike, by the largest saving per replay)."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for f in findings:
        groups.setdefault((site_of.get(f.graph, f.graph), f.kind), []).append(f)
    counted = replays or {}
    out = [GroupedFinding(kind=kind, site=site, graphs=tuple(f.graph for f in fs),
                          buckets=tuple(_bucket(f.graph, site) for f in fs),
                          low_ns=min(f.saving_ns for f in fs),
                          high_ns=max(f.saving_ns for f in fs), pct=fs[0].saving_pct,
                          finding=fs[0],
                          program_ns=sum(f.saving_ns * counted[f.graph] for f in fs)
                          if all(f.graph in counted for f in fs) else None)
           for (site, kind), fs in groups.items()]
    by_program = all(g.program_ns is not None for g in out)
    out.sort(key=lambda g: -(g.program_ns if by_program and g.program_ns is not None
                             else g.high_ns))
    return out


def _span(xs: Sequence[Optional[float]]) -> tuple[Optional[float], Optional[float]]:
    vals = [float(x) for x in xs if x is not None]
    return (min(vals), max(vals)) if vals else (None, None)


def diagnosis_groups(diagnosis: Any, groups: Sequence[GraphGroup]
                     ) -> tuple[DiagnosisGroup, ...]:
    """Each group's measured graphs' diagnosis as ranges, and its verdicts by kind."""
    out = []
    for grp, measured in _measured(diagnosis, groups):
        kinds: dict[str, list[Any]] = {}
        for o in measured:
            for v in o.verdicts:
                kinds.setdefault(v.code, []).append(v)
        out.append(DiagnosisGroup(
            site=grp.site, names=tuple(o.graph for o in measured),
            buckets=tuple(_bucket(o.graph, grp.site) for o in measured),
            path_ns=_span([o.critical_path.length_ns if o.critical_path else None
                           for o in measured]),
            work_ns=_span([o.work_ns for o in measured]),
            span_ns=_span([o.span_ns for o in measured]),
            idle_pct=_span([o.idle_pct for o in measured]),
            launch_ns=_span([o.launch_latency_ns for o in measured]),
            verdicts=tuple(VerdictGroup(code, tuple(v.graph for v in vs), vs[0])
                           for code, vs in kinds.items())))
    return tuple(out)
