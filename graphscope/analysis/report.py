"""The report of a bundle, built once: every section `graphscope report` shows, as data.

The command reads the bundle and its optional files (``model.bundle_io``,
``model.bundle_files.read_extras``) and calls :func:`build_report`; the terminal, JSON, HTML
and Markdown renderers (``render/``) each render the :class:`Report` it returns and compute no
number of their own. A section that does not apply to the bundle is an
:class:`Absent` saying why: a short code a program can branch on, and what would make it apply, for
a person (the renderers word it; they never guess it from a missing key).

Sections and where their numbers come from:

=================  ===============================================================
answer             the first screen: what the bundle is, where the time goes, what bounds
                   each graph, the first findings (analysis/answer.py, from the sections)
header             replays, graphs, medians per replay (analysis/summary.py)
graphs             one row per graph (analysis/summary.py ``graph_rows``)
coverage           share of work nodes attributed, per phase
modules            GPU time per module (inclusive: a module's time holds its children's)
top_kernels/ops    the top kernels and aten ops by time per replay
by_graph           module time per graph (2-16 graphs)
ddp                DDP's buckets and their overlap (analysis/ddp.py)
memory, ladder     pools, capture cost, memory by module, bucket ladder
diagnosis          critical path, idle, launch, stream order (analysis/diagnosis.py)
eager              eager vs graph from eager.json (analysis/eager.py)
graph_coverage     a program's GPU time inside graphs (``run`` bundles)
cudagraph_trees    torch.compile's cudagraph-tree events (``run`` bundles)
counters           hardware counters by module (analysis/counters.py)
=================  ===============================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from . import Absent, Maybe, present
from .answer import Answer, build_answer

if TYPE_CHECKING:
    from ..model.bundle import Bundle
    from ..model.bundle_files import BundleExtras
    from .diagnosis import Diagnosis

# A table row or a nested record as JSON holds it: names to numbers, strings, lists, records.
Row = Mapping[str, object]
Rows = tuple[Row, ...]

DEFAULT_TOP = 10
# Larger bundles are diagnosed only on request: the diagnosis reads every node of every graph.
DIAGNOSIS_MAX_NODES = 1_000_000
DIAGNOSIS_MAX_GRAPHS = 1000  # a view of more graphs: each graph's own view is diagnosed


@dataclass(frozen=True)
class ReportOptions:
    """What the user asked of the report (command-line options, already validated)."""

    top: int = DEFAULT_TOP
    depth: Optional[int] = None  # module levels kept in the JSON (None: all)
    graph: Optional[str] = None  # the one graph this report is of (--graph), if any
    ladder: bool = False  # the bucket ladder even where the bundle recorded no capture cost
    diagnosis: Optional[bool] = None  # None: by size (DIAGNOSIS_MAX_NODES)
    full: bool = False  # every graph's row, not a capture site's buckets as one (--full)


@dataclass(frozen=True)
class Header:
    """The bundle at a glance."""

    replays: int
    graphs: int
    untraced_graphs: int  # a program's graphs none of the traced replays ran
    replay_kernel_median_ns: float  # GPU work per replay (sum of node durations), median
    replay_span_median_ns: float  # first node start to last node end per replay, median
    work_nodes: int
    annotated_nodes: int
    unjoined_records: int


@dataclass(frozen=True)
class Report:
    """Every section of a bundle's report (see the module docstring)."""

    header: Header
    graphs: Rows
    coverage: Mapping[str, Row]
    modules: Rows
    top_kernels: Rows
    top_ops: Rows
    by_graph: Maybe[Row] = Absent("one_graph", "module time per graph needs 2-16 graphs")
    ddp: Maybe[Rows] = Absent("no_ddp", "no DistributedDataParallel reducer work")
    memory: Maybe[Row] = Absent("not_recorded", "the bundle records no capture cost or memory")
    ladder: Maybe[Rows] = Absent("no_ladder", "no capture site captured several graphs")
    diagnosis: Maybe[Diagnosis] = Absent("not_asked",
                                         "the tables came from summary.json alone")
    eager: Maybe[Row] = Absent("no_eager_baseline",
                               "no eager.json: capture --eager-baseline records one")
    graph_coverage: Maybe[Row] = Absent("not_a_program", "a `graphscope run` bundle's figure")
    cudagraph_trees: Maybe[Row] = Absent("no_trees",
                                         "no torch.compile cudagraph trees were recorded")
    counters: Maybe[Row] = Absent("no_counters", "no counters.json: capture --counters")
    answer: Maybe[Answer] = Absent("not_built", "built by build_report")
    options: ReportOptions = field(default_factory=ReportOptions)


def summary_sections(summary: Mapping[str, Any]) -> dict[str, object]:
    """The header and tables of ``summary`` (a :func:`~.summary.summarize` result, or the
    bundle's summary.json, which holds the same) as :class:`Report` fields."""
    header = Header(**{k: summary[k] for k in Header.__dataclass_fields__ if k != "graphs"},
                    graphs=len(summary["graphs"]))
    out: dict[str, object] = {
        "header": header,
        "graphs": tuple(summary["graphs"]),
        "coverage": summary["coverage"],
        "modules": tuple(summary["modules"]),
        "top_kernels": tuple(summary["top_kernels"]),
        "top_ops": tuple(summary.get("top_ops") or ()),
    }
    for key, absent in (("by_graph", Absent("one_graph", "module time per graph needs 2-16 "
                                            "graphs")),
                        ("ddp", Absent("no_ddp", "no DistributedDataParallel reducer work")),
                        ("memory", Absent("not_recorded", "the bundle records no capture "
                                          "cost or memory (re-record it)")),
                        ("ladder", Absent("no_ladder", "no capture site captured several "
                                          "graphs"))):
        value = summary.get(key)
        out[key] = (tuple(value) if isinstance(value, list) else value) if value else absent
    return out


def wants_diagnosis(options: ReportOptions, nodes: int, graphs: int) -> Union[bool, Absent]:
    """Whether the report diagnoses a bundle of ``nodes`` nodes in ``graphs`` graphs, or why
    it does not."""
    if options.diagnosis is False:
        return Absent("not_asked", "--no-diagnosis")
    if options.diagnosis is None and (nodes > DIAGNOSIS_MAX_NODES or
                                      graphs > DIAGNOSIS_MAX_GRAPHS):
        return Absent("too_large", f"{graphs} graphs of {nodes} nodes (over "
                      f"{DIAGNOSIS_MAX_GRAPHS} graphs or {DIAGNOSIS_MAX_NODES} nodes): pass "
                      "--diagnosis, or --graph NAME for one graph's")
    return True


def report_diagnosis(bundle: Bundle) -> Optional[dict[str, Any]]:
    """The diagnosis `report` shows by default, kept in the bundle (diagnosis.json) so that
    reading it needs neither the nodes nor the analysis; None where the report would not
    diagnose a bundle this size by default."""
    from .diagnosis import diagnose, to_json

    if wants_diagnosis(ReportOptions(), sum(len(g.nodes) for g in bundle.graphs),
                       len(bundle.graphs)) is not True:
        return None
    out: dict[str, Any] = to_json(diagnose(bundle))
    return out


def build_report(bundle: Optional[Bundle], extras: BundleExtras,
                 options: ReportOptions = ReportOptions(),  # noqa: B008 (frozen)
                 summary: Optional[Mapping[str, Any]] = None,
                 diagnosis: Optional[Mapping[str, Any]] = None) -> Report:
    """The report of ``bundle`` (a whole bundle, or the view of one graph: ``only_graph``).

    ``summary``: the bundle's summary.json where it is current and holds what ``options``
    ask (the default --top): then the tables are not recomputed, and ``bundle`` may be None
    where no other section needs the nodes. ``diagnosis``: the bundle's diagnosis.json where
    current: the diagnosis as it was computed when the bundle was written (``bundle`` read or
    not: the optional files may need the nodes, the diagnosis then does not).
    """
    if summary is None:
        from .summary import summarize

        if bundle is None:
            raise ValueError("build_report needs the bundle or its summary")
        summary = summarize(bundle, top=options.top)
    fields = summary_sections(summary)
    if bundle is not None:
        fields.update(_bundle_sections(bundle, extras, options, diagnosis))
    elif diagnosis is not None:
        fields["diagnosis"] = diagnosis
    else:  # the tables alone: say why the diagnosis is not there
        rows = summary["graphs"]
        asked = wants_diagnosis(options, sum(int(r["nodes"]) for r in rows), len(rows))
        fields["diagnosis"] = asked if isinstance(asked, Absent) else Absent(
            "not_asked", "the tables came from summary.json alone")
    diag = fields.get("diagnosis")
    if isinstance(diag, Mapping):  # a kept diagnosis.json: read into its types, once
        from .diagnosis import Diagnosis, from_json

        fields["diagnosis"] = diag = from_json(Diagnosis, diag)
    fields["answer"] = build_answer(
        fields["header"], fields["graphs"], fields["modules"],  # type: ignore[arg-type]
        diag if diag is not None and present(diag) else None, extras.mode,
        fields.get("ladder", ()))
    return Report(**fields, options=options)  # type: ignore[arg-type]


def _bundle_sections(bundle: Bundle, extras: BundleExtras, options: ReportOptions,
                     kept: Optional[Mapping[str, Any]] = None) -> dict[str, object]:
    """The sections that read the nodes: ladder (on request), diagnosis, eager, counters."""
    out: dict[str, object] = {}
    if options.ladder:
        from .ladder import ladder
        from .summary import graph_rows

        sites = ladder(bundle, graph_rows(bundle))
        out["ladder"] = tuple(sites) if sites else Absent(
            "one_graph_view" if options.graph else "no_ladder",
            "it compares a site's graphs: not shown with --graph" if options.graph
            else "no capture site captured several graphs in this bundle")
    asked = wants_diagnosis(options, sum(len(g.nodes) for g in bundle.graphs),
                            len(bundle.graphs))
    if asked is True and kept is not None:  # the bundle's diagnosis.json, current
        out["diagnosis"] = kept
    elif asked is True:
        from .diagnosis import diagnose

        out["diagnosis"] = diagnose(bundle)  # asked for, whatever the bundle's size
    else:
        out["diagnosis"] = asked
    out.update(_extra_sections(bundle, extras, options))
    return out


def _extra_sections(bundle: Bundle, extras: BundleExtras, options: ReportOptions
                    ) -> dict[str, object]:
    """Eager vs graph, a program's graph coverage and trees, and hardware counters."""
    out: dict[str, object] = {}
    if extras.eager is not None:
        from .eager import compare

        out["eager"] = compare(bundle, extras.eager, options.depth)
    if extras.mode == "run" and not options.graph:
        # the program's share of GPU time in graphs: not a figure of one graph's view
        from .eager import graph_coverage

        cov = graph_coverage(bundle, extras.outside)
        out["graph_coverage"] = cov if cov is not None else Absent(
            "not_recorded", "the bundle's timeline does not record eager work")
    elif extras.mode == "run":
        out["graph_coverage"] = Absent("one_graph_view", "a program's figure, not one graph's")
    if extras.trees is not None:
        from .eager import tree_summary

        out["cudagraph_trees"] = tree_summary(extras.trees)
    if extras.counters is not None:
        from .counters import analyze

        c = analyze(bundle, extras.counters, top=options.top)
        if options.graph:  # the other graphs' nodes are left out on purpose: nothing to note
            c["unmatched_nodes"] = 0
        out["counters"] = c
    return out
