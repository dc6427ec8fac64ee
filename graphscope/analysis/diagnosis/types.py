"""The diagnosis as typed data: frozen dataclasses of numbers, codes and nested sections (the
definitions: the package docstring). Wording lives in graphscope/render/diagnosis.py."""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

T = TypeVar("T")


# -- the stream order (analysis/stream_order.py)

@dataclass(frozen=True)
class Chain:
    """A run of one stream's nodes (visit order) between stream-order-only edges."""

    first: int  # local ids
    last: int
    nodes: int
    work_ns: float
    stream: int  # -1: nodes without events
    module: str  # its modules in a few words (:func:`run_label`)
    modules: int


@dataclass(frozen=True)
class StreamOrder:
    """The graph's orderings that only keep one stream's order (module docstring)."""

    op_info: bool  # memory ranges recorded (without them every edge is kept)
    nodes_without_op_info: int  # kept as hard dependencies
    inplace_writers: int  # nodes whose write-after-read/-write orderings are kept
    what_if_edges: int  # the data DAG plus the kept captured edges
    stream_order_only_edges: int
    edges: tuple[tuple[int, int], ...]  # local ids, the first MAX_LISTED_EDGES
    unchecked_edges: int  # the reachability checks ran out of budget for these
    chains: tuple[Chain, ...]  # the largest TOP, by work
    dependency_latency_ns: Optional[float]  # the nodes' measured latencies, summed
    path_with_latency_ns: Optional[float]  # the captured DAG's path, weighted the same



# -- the what-if (analysis/whatif.py)

@dataclass(frozen=True)
class Calibration:
    """The interference term (module docstring) and where it came from."""

    source: str  # "bundle": fitted from its concurrent nodes; "prior": PRIOR
    slowdown_per_overlap: float  # beta
    added_ns: float  # delta
    latency_added_ns: float  # lambda
    cross_stream_ns: float  # kappa: a dependency on another stream's node, over one's own
    groups: int  # launch signatures that ran both alone and beside others
    uncertainty_pct: float  # the share by which the term is moved for the interval


@dataclass(frozen=True)
class WhatIf:
    """The predicted span with independent chains on up to ``max_streams`` streams."""

    max_streams: int
    streams: int  # the streams the plan uses
    chains: int
    predicted_span_ns: float
    low_ns: float
    high_ns: float
    measured_span_ns: float  # of the replays the diagnosis uses
    gain_ns: float  # measured - predicted
    gain_pct: float
    model_as_captured_ns: float  # the model run on the graph as captured
    model_what_if_ns: float
    # the planned DAG's critical path with the solo durations and latencies, nothing shared:
    # the bound the simulation starts from
    no_contention_ns: float
    calibration: Calibration
    gpu: str
    sm_count: int
    compute_capability: str
    device_source: str  # "properties" | "name_table" | "assumed" (occupancy.py)
    registers: str  # "recorded" | "worst_case" (not in the bundle: the worst case assumed)



# -- the findings (analysis/findings.py)

LISTED = 8  # nodes, modules and edges listed as evidence

@dataclass(frozen=True)
class Action:
    """How to try a finding: a graphscope command (``argv``), or what to do by hand
    (``by_hand``: a code the renderer words, and its ``target``)."""

    kind: str  # "try_streams" | "try_compile" | "by_hand"
    argv: tuple[str, ...] = ()
    by_hand: str = ""  # "side_streams" | "compile_function" | "capture_more_of_the_loop"
    target: str = ""  # modules or a module glob


@dataclass(frozen=True)
class Evidence:
    nodes: tuple[int, ...]  # local ids, the first LISTED
    node_count: int
    modules: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]  # stream-order-only edges, the first LISTED
    edge_count: int


@dataclass(frozen=True)
class Finding:
    kind: str  # "streams" | "fusion" | "host"
    graph: str
    saving_ns: float  # per replay, after time is claimed once
    saving_pct: float  # of the graph's span (host: of span + gap)
    low_ns: float
    high_ns: float
    predicted_ns: float  # the model's saving (streams: the what-if's), before sharing
    shared_ns: float  # what findings ranked before it had claimed of it
    measured_ns: Optional[float]  # the saving a measurement (--try-streams) found: where there
    # is one, it is what the finding claims
    evidence: Evidence
    action: Action
    kernels: int = 0  # fusion: kernels fused away; streams: chains moved
    floor_ns: float = 0.0  # fusion: the kernel floor
    gap_ns: float = 0.0  # fusion: the median dependency gap of the fused kernels
    # the least saving listed (findings.py's floor: FLOOR_PCT % of the span or the replays'
    # spread; host: the gaps' spread), and that spread
    threshold_ns: float = 0.0
    spread_ns: float = 0.0
    gaps: int = 0  # host: the gaps between replays it was measured on


@dataclass(frozen=True)
class Findings:
    findings: tuple[Finding, ...]  # ranked by saving, largest first
    floor_pct: float
    below_floor: int
    nothing_above_noise: bool
    # streams the what-if predicted a gain for and ``--try-streams`` measured none (graph, the
    # what-if's gain %, the measured gain %): not listed, and said so
    refuted: tuple[tuple[str, float, float], ...] = ()
    timed: bool = True  # False: no graph had timed replays (nothing could be found)
    # the candidates not listed (under their floor, or a host finding from fewer than
    # ``min_gaps`` gaps), with their figures
    under_floor: tuple[Finding, ...] = ()
    min_gaps: int = 0




@dataclass(frozen=True)
class ModuleShare:
    """A module's share of the critical path: its time (timed graphs) or its node count (the
    JSON form holds the one it has: a node count never sits in an ``_ns`` field)."""

    OMIT_NONE: typing.ClassVar[frozenset[str]] = frozenset({"ns", "nodes"})

    module: str
    ns: Optional[float]
    nodes: Optional[float]
    pct: float


@dataclass(frozen=True)
class CriticalPath:
    length_ns: Optional[float]  # None where the graph has no timing
    length_nodes: Optional[int]  # untimed graphs only: the path's length in nodes
    nodes: tuple[int, ...]  # local ids, in path order
    exec_node_ids: tuple[int, ...]
    work_nodes: int
    modules: tuple[ModuleShare, ...]
    modules_rolled_up: tuple[ModuleShare, ...]


@dataclass(frozen=True)
class NearNode:
    local_id: int
    slack_ns: float
    name: str
    module: str


@dataclass(frozen=True)
class Slack:
    on_path: int
    zero_slack_off_path: int
    off_path: int
    near_critical: tuple[NearNode, ...]


@dataclass(frozen=True)
class ReplayFigures:
    """Where one replay's span went (one replay with events)."""

    replay: int
    span_ns: int
    first_ns: int
    last_ns: int
    idle_ns: int
    busy_ns: int
    dep_gap_ns: int
    concurrent_ns: int
    launch_ns: Optional[int]
    launch_call_ns: Optional[int]
    launch_queued_ns: Optional[int]
    # last node end -> the next replay's first node start (the gap between replays after it)
    gap_after_ns: Optional[int]


@dataclass(frozen=True)
class Medians:
    """The median of each figure over the replays the diagnosis uses."""

    span_ns: Optional[float]
    idle_ns: Optional[float]
    dep_gap_ns: Optional[float]
    concurrent_ns: Optional[float]
    launch_ns: Optional[float]
    launch_call_ns: Optional[float]
    launch_queued_ns: Optional[float]
    busy_ns: Optional[float]
    gap_after_ns: Optional[float]


@dataclass(frozen=True)
class ReplaySelection:
    """The replays every figure of a graph comes from."""

    OMIT_NONE: typing.ClassVar[frozenset[str]] = frozenset({"set_aside_span_ns",
                                                             "others_span_ns"})

    used: tuple[int, ...]
    set_aside: tuple[int, ...]  # a cold first replay, left out
    set_aside_span_ns: Optional[float]
    others_span_ns: Optional[float]  # the median span it was compared with
    traced: int  # replays traced
    with_events: int  # of which the bundle kept events
    only_cold: bool  # the only replay with events is a cold first one: used all the same


@dataclass(frozen=True)
class Assumption:
    """What the diagnosis of a graph assumed (code; the renderer words it)."""

    code: str  # "edges_dropped" | "untimed_as_zero" | "node_counts"
    count: int = 0
    kinds: tuple[tuple[str, int], ...] = ()  # untimed_as_zero: (node kind, count)
    why: str = ""  # node_counts: "not_replayed_traced" | "no_timed_replays"


@dataclass(frozen=True)
class Verdict:
    """What the numbers support, as a code with its numbers (package docstring). Its JSON
    form holds the numbers its code has (the others, None, are left out)."""

    OMIT_NONE: typing.ClassVar[frozenset[str]] = frozenset({
        "work_nodes", "median_node_ns", "idle_pct", "launch_pct", "parallelism",
        "dag_parallelism", "streams", "edges", "from_ns", "to_ns", "low_ns", "high_ns",
        "gain_pct", "max_streams", "outputs_equal", "max_abs_diff", "within_tolerance",
        "own_max_abs_diff", "error", "short_pct", "short_nodes",
        "short_under_ns", "saving_ns", "threshold_ns", "listed", "gaps",
        "unlisted"})

    code: str  # "latency_bound" | "under_parallelized" | "serialized" | "streams_measured"
    # | "streams_failed" | "host_bound"
    graph: str = ""  # "" for the bundle's (between replays)
    work_nodes: Optional[int] = None
    median_node_ns: Optional[float] = None
    idle_pct: Optional[float] = None
    launch_pct: Optional[float] = None
    parallelism: Optional[float] = None
    dag_parallelism: Optional[float] = None
    streams: Optional[int] = None
    edges: Optional[int] = None
    from_ns: Optional[float] = None
    to_ns: Optional[float] = None
    low_ns: Optional[float] = None
    high_ns: Optional[float] = None
    gain_pct: Optional[float] = None
    max_streams: Optional[int] = None
    outputs_equal: Optional[bool] = None
    max_abs_diff: Optional[float] = None
    within_tolerance: Optional[bool] = None  # outputs not bitwise equal, but within it
    own_max_abs_diff: Optional[float] = None  # the captured graph's own replay-to-replay
    error: Optional[str] = None
    # latency_bound: the span's share in the critical path's work nodes shorter than
    # ``short_under_ns`` and in idle gaps, and how many such nodes the path holds
    short_pct: Optional[float] = None
    short_nodes: Optional[int] = None
    short_under_ns: Optional[float] = None
    # serialized, streams_measured, host_bound: their finding's saving per replay (findings.py:
    # time claimed once), the floor it must reach to be listed, and whether it is listed
    saving_ns: Optional[float] = None
    threshold_ns: Optional[float] = None
    listed: Optional[bool] = None
    gaps: Optional[int] = None  # host_bound: the gaps between replays it was measured on
    unlisted: Optional[str] = None  # why not listed: "floor" | "few_gaps"


@dataclass(frozen=True)
class MeasuredStreams:
    """``capture --try-streams``'s measurement beside the prediction."""

    max_streams: Optional[int]
    streams: Optional[int]
    ops: Optional[int]
    cross_stream_waits: Optional[int]
    replays: Optional[int]
    one_stream_ns: Optional[float]
    span_ns: Optional[float]
    gain_pct: Optional[float]
    predicted_ns: Optional[float]  # the what-if's prediction for it
    off_prediction_pct: Optional[float]  # measured / predicted - 1, in %
    within_interval: Optional[bool]
    outputs_equal: Optional[bool]
    max_abs_diff: Optional[float]
    one_stream_iqr_ns: Optional[tuple[float, float]]
    span_iqr_ns: Optional[tuple[float, float]]
    error: Optional[str]
    within_tolerance: Optional[bool] = None  # every compared tensor within the tolerance
    own_max_abs_diff: Optional[float] = None  # the captured graph against itself


@dataclass(frozen=True)
class GraphDiagnosis:
    # fields left out of the JSON form while they are None: ``"error" in graph`` is the test
    # its readers make
    OMIT_NONE: typing.ClassVar[frozenset[str]] = frozenset({"error"})
    PER_NODE: typing.ClassVar[frozenset[str]] = frozenset({"slack_ns"})  # only when asked

    graph: str
    nodes: int
    edges: int
    work_nodes: int
    timed: bool  # this graph was replayed while traced
    error: Optional[str]  # "cycle": no critical path (the replays' figures still stand)
    assumptions: tuple[Assumption, ...]
    selection: ReplaySelection
    critical_path: Optional[CriticalPath]
    slack: Optional[Slack]
    slack_ns: Optional[Mapping[int, float]]  # per node (local id): only when asked for
    work_ns: Optional[float]
    dag_parallelism: Optional[float]
    streams: int
    replays: tuple[ReplayFigures, ...]  # the replays used, with events
    median: Medians
    span_ns: Optional[float]
    span_replays: int
    parallelism: Optional[float]
    idle_pct: Optional[float]
    concurrency_pct: Optional[float]
    launch_latency_ns: Optional[float]
    launch_recorded: bool
    stream_order: Optional[StreamOrder]
    what_if: Optional[WhatIf]
    what_if_measured: Optional[MeasuredStreams]
    verdicts: tuple[Verdict, ...]


@dataclass(frozen=True)
class BetweenReplays:
    pairs: int
    median_gap_ns: Optional[float]
    max_gap_ns: float
    total_gap_ns: float
    median_span_ns: Optional[float]
    host_wait_median_ns: Optional[float]
    note: Optional[str]  # "own_replay_loop" | "traced_one_at_a_time": why no verdict
    gap_spread_ns: float  # half the IQR of the gaps (0 below four)
    # median over the gaps: one replay's first node start to the next one's (span + gap)
    median_cycle_ns: Optional[float] = None


@dataclass(frozen=True)
class Diagnosis:
    graphs: tuple[GraphDiagnosis, ...]
    between_replays: Optional[BetweenReplays]
    launch_recorded: bool
    verdicts: tuple[Verdict, ...]  # the bundle's own (between replays); each graph has its own
    findings: Findings

    @property
    def all_verdicts(self) -> tuple[Verdict, ...]:
        """Every graph's verdicts, in graph order, then the bundle's."""
        return tuple(v for o in self.graphs for v in o.verdicts) + self.verdicts


def from_json(cls: type[T], data: Mapping[str, Any], at: str = "") -> T:
    """The section ``cls`` (a dataclass of this package, ``findings.py`` or ``whatif.py``)
    back from its JSON form (``to_json``), field by field by their types. A value of another
    type (a diagnosis.json edited by hand) is a BundleError naming its field (``at``: where
    ``data`` sits)."""
    if not isinstance(data, Mapping):
        _wrong(at, "an object", data)
    return cls(**{name: _from(tp, data.get(name), f"{at}.{name}".lstrip("."))
                  for name, tp in _fields(cls)})  # type: ignore[arg-type]


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """``cls``'s fields and their types, resolved once per class (a 67-graph diagnosis reads
    2,000 sections: resolving the hints each time took half of `report`'s time)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def _wrong(at: str, what: str, v: Any) -> typing.NoReturn:
    from ..._errors import BundleError

    raise BundleError(f"diagnosis: {at or 'the diagnosis'} must be {what}, not {v!r:.60}")


_SCALARS: dict[Any, tuple[tuple[type, ...], str]] = {
    int: ((int, float), "a number"), float: ((int, float), "a number"), str: ((str,), "a string"),
    bool: ((bool,), "true or false")}


def _from(tp: Any, v: Any, at: str = "") -> Any:
    if v is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _from(inner[0], v, at) if len(inner) == 1 else v
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_json(tp, v, at)
    if origin is tuple:
        if not isinstance(v, (list, tuple)):
            _wrong(at, "a list", v)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from(args[0], x, f"{at}[{i}]") for i, x in enumerate(v))
        if len(v) != len(args):
            _wrong(at, f"a list of {len(args)} items", v)
        return tuple(_from(a, x, f"{at}[{i}]") for i, (a, x) in enumerate(zip(args, v)))
    if origin in (Mapping, dict, collections.abc.Mapping):
        if not isinstance(v, Mapping):
            _wrong(at, "an object", v)
        key = args[0] if args else str
        try:
            return {key(k): _from(args[1], x, f"{at}.{k}") if args else x
                    for k, x in v.items()}
        except ValueError:
            _wrong(at, f"an object keyed by {key.__name__}", v)
    kinds, what = _SCALARS.get(tp, ((object,), ""))
    if not isinstance(v, kinds) or (isinstance(v, bool) and tp is not bool):
        _wrong(at, what, v)
    return v


def to_json(diag: Any, per_node: bool = False) -> Any:
    """``diag`` (or any of its sections) as plain JSON data, field by field (per-node slack
    only with ``per_node``, its keys as strings; a graph's ``error`` only where it has one)."""
    if dataclasses.is_dataclass(diag) and not isinstance(diag, type):
        out = {}
        omit: frozenset[str] = getattr(type(diag), "OMIT_NONE", frozenset())
        per: frozenset[str] = (frozenset() if per_node
                               else getattr(type(diag), "PER_NODE", frozenset()))
        for f in dataclasses.fields(diag):
            v = getattr(diag, f.name)
            if f.name in per or (v is None and f.name in omit):
                continue
            out[f.name] = to_json(v, per_node)
        return out
    if isinstance(diag, dict):
        return {str(k): to_json(v, per_node) for k, v in diag.items()}
    if isinstance(diag, (list, tuple)):
        return [to_json(v, per_node) for v in diag]
    if hasattr(diag, "tolist"):  # a numpy array or scalar
        return diag.tolist()
    return diag
