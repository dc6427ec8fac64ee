"""Why a graph takes the time it takes: critical path, where the span goes, stream order,
the contention-aware what-if and ranked findings. Pure functions of a loaded Bundle (numpy,
no torch): ``diagnose(bundle) -> Diagnosis`` (frozen dataclasses, ``types.py``; the wording is
graphscope/render/diagnosis.py's).

Replays (one selection for every figure of a graph)
    The replays used are the traced replays whose events the bundle kept (every traced one
    where it kept none), without a cold first replay: replay 0 is set aside where its span is
    over 1.05 times the median span of the others (where spans are not known for it, its summed
    node durations decide), and ``selection`` says so. Where replay 0 is the only one with
    events it is used all the same (``selection.only_cold``). Span, idle, dependency gaps,
    launch, the nodes' durations (so the critical path), the latencies and the what-if all
    come from these replays.

Durations
    A node's duration is the median over the replays used of its ``durations_ns`` (work
    nodes), else the median ``dur_ns`` of its events in them. A node with neither (empty,
    event record/wait, host nodes, ...) is taken as 0 ns (assumption ``untimed_as_zero``).
    Without timed replays nothing is measured: the critical path is the longest chain counted
    in nodes (``node_counts``).

Critical path
    The longest path through the captured DAG (its edges) weighted by those durations:
    earliest starts forward in topological order, latest starts (that keep the length)
    backward; slack = latest - earliest start. The path is followed back from the
    last-finishing node through the predecessor whose finish is the node's earliest start.
    It leaves out launch and dependency-resolution latency, which the measured span holds.
    Edges that form a cycle leave no critical path (``error``: "cycle"); the replays' figures
    are given all the same.

Per replay used with events (then the median over them)
    span        first node start -> last node end
    work        sum of the node durations (the DAG's weights)
    parallelism work / span (1.0: one node at a time)
    launch latency  host ``cudaGraphLaunch`` call start -> first node start, from
                timeline.json's ``launches``; where the GPU was still running an earlier replay
                (kept events, any graph) when the call started, from that replay's end instead:
                time queued behind earlier work is ``launch_queued_ns``, not launch latency
    dep_gap     per node with timed predecessors: its start - its last predecessor's end
                (dependency-resolution latency), summed
    idle        span - time with at least one node running
    concurrent  time with two or more nodes running
    gap_after   this replay's last node end -> the next replay's first node start: the gap
                between replays after it, where that next replay is known (below)

Gaps between replays
    Replays with events are ordered on their one clock. The gap between two consecutive ones
    (last node end -> the next one's first node start; its cycle: first node start -> the
    next one's) counts only where no replay without events can lie in it: not where a launch
    record of a replay without events falls between them, and not where some graph has more
    replays than are known (kept events or launch records) and its last known one is not
    after the gap (its other replays run after it; its skipped ones, manifest
    ``skip_replays``, before its first). A gap is time in which the GPU runs no graph node.

Stream order (graphscope/analysis/stream_order.py)
    The data DAG of the ops' memory ranges (``reads``/``writes``) with fresh outputs renamed
    (the allocator's reuse of a block is no ordering), in-place writes kept; nodes without
    op information are barriers; captured edges across streams are kept. A captured edge
    inside one stream is stream-order-only where its target is not reachable from its source
    in that DAG. The reachability checks visit at most REACH_BUDGET nodes per graph; edges
    left unchecked are counted. The chains are the runs of one stream's nodes between them.

What-if (graphscope/analysis/whatif.py)
    Where a graph has stream-order-only edges: the span predicted with its chains on up to 4
    streams, on a resource model of the GPU (occupancy, copy engines, interference calibrated
    from the bundle's concurrent nodes or a measured prior), with an interval and the
    assumptions made. ``capture --try-streams`` measures it (``what_if_measured``).

Verdicts (codes and numbers; graphscope/render/diagnosis.py words them)
    latency_bound  >= 10 work nodes, and the critical path's work nodes shorter than 5 us
        with the idle time hold >= 50 % of the span (judged by time: a graph of long GEMMs
        with many tiny kernels between them is not latency bound).
    dag_parallelism_unused  achieved parallelism < 1.05 while the captured DAG allows
        work / critical path >= 1.1.
    serialized  the what-if predicts a gain of at least 2 % of the span.
    streams_measured / streams_failed  what ``capture --try-streams`` found.
    host_bound  (bundle) the median gap between consecutive replays is longer than the median
        replay span: only for ``graphscope run`` bundles whose manifest says
        ``traced_back_to_back``; otherwise the gaps hold the tracer's own per-replay start,
        synchronize and flush (``note``: ``traced_one_at_a_time``) or graphscope's own replay
        loop (``own_replay_loop``).
    A verdict that claims a gain (serialized, streams_measured, host_bound) carries its
    finding's saving (``saving_ns``), floor and whether it is listed: one figure for both.

Findings (graphscope/analysis/findings.py): one ranked list per bundle, time claimed once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compute import diagnose, diagnose_json
    from .types import (
        Assumption,
        BetweenReplays,
        CriticalPath,
        Diagnosis,
        Findings,
        GraphDiagnosis,
        Medians,
        ModuleShare,
        ReplayFigures,
        ReplaySelection,
        Verdict,
        from_json,
        to_json,
    )

# Where each name lives, imported on first use: the result types and their JSON reader
# (``types``) are all a renderer of a recorded diagnosis needs; ``diagnose`` (``compute``)
# brings numpy, the DAG and the what-if.
_WHERE = {
    **dict.fromkeys(("diagnose", "diagnose_json"), "compute"),
    **dict.fromkeys(("Assumption", "BetweenReplays", "CriticalPath", "Diagnosis", "Findings",
                     "GraphDiagnosis", "Medians", "ModuleShare", "ReplayFigures",
                     "ReplaySelection", "Verdict", "from_json", "to_json"), "types"),
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{where}"), name)


__all__ = ["Assumption", "BetweenReplays", "CriticalPath", "Diagnosis", "Findings",
           "GraphDiagnosis", "Medians", "ModuleShare", "ReplayFigures", "ReplaySelection",
           "Verdict", "diagnose", "diagnose_json", "from_json", "to_json"]
