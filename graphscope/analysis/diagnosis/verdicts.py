"""What the numbers support, as codes with their numbers (thresholds: the package docstring),
and ``capture --try-streams``'s measurement beside the prediction."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Optional

import numpy as np

from ..whatif import WhatIf
from .types import Findings, GraphDiagnosis, MeasuredStreams, Verdict

LATENCY_NODE_NS = 5_000  # a "short" work node: shorter than this, its fixed cost dominates
LATENCY_SHARE_PCT = 50.0  # short nodes on the critical path and idle gaps: this share of the
# span or more is latency bound
LATENCY_MIN_NODES = 10
SERIAL_PARALLELISM = 1.05  # achieved parallelism below this: one node at a time
SERIAL_DAG_PARALLELISM = 1.1  # ... while the DAG would allow at least this
SERIAL_MIN_GAIN_PCT = 2.0  # the what-if gains at least this: "serialized"


def verdicts(o: GraphDiagnosis, work_d: np.ndarray, path_d: np.ndarray) -> tuple[Verdict, ...]:
    """One graph's verdicts: latency bound, the DAG's parallelism unused, serialized (the
    what-if predicts a gain), and what --try-streams measured. ``work_d``: the work nodes'
    durations; ``path_d``: the durations of the critical path's work nodes."""
    v: list[Verdict] = []
    span = o.span_ns
    if span and o.timed:
        launch = o.launch_latency_ns
        launch_pct = 100.0 * launch / (launch + span) if launch and launch > 0 else 0.0
        idle = o.idle_pct or 0.0
        # by time: the span's share in short work nodes on the critical path and in idle gaps
        short = path_d[path_d < LATENCY_NODE_NS]
        short_pct = min(100.0, 100.0 * float(short.sum()) / span + idle)
        if len(work_d) >= LATENCY_MIN_NODES and short_pct >= LATENCY_SHARE_PCT:
            v.append(Verdict("latency_bound", o.graph, work_nodes=len(work_d), idle_pct=idle,
                             launch_pct=launch_pct or None, short_pct=short_pct,
                             short_nodes=len(short), short_under_ns=LATENCY_NODE_NS))
        par, dag_par = o.parallelism, o.dag_parallelism or 0.0
        if par is not None and par < SERIAL_PARALLELISM and dag_par >= SERIAL_DAG_PARALLELISM:
            v.append(Verdict("dag_parallelism_unused", o.graph, parallelism=par,
                             dag_parallelism=dag_par, streams=o.streams))
        wi = o.what_if
        so = o.stream_order
        measured = o.what_if_measured is not None and not o.what_if_measured.error and (
            o.what_if_measured.span_ns)
        # where --try-streams measured it, its verdict speaks instead of the prediction's
        if wi is not None and so is not None and wi.gain_pct >= SERIAL_MIN_GAIN_PCT and (
                not measured):
            v.append(Verdict("serialized", o.graph, edges=so.stream_order_only_edges,
                             streams=wi.streams, max_streams=wi.max_streams,
                             from_ns=wi.measured_span_ns, to_ns=wi.predicted_span_ns,
                             low_ns=wi.low_ns, high_ns=wi.high_ns, gain_pct=wi.gain_pct))
    m = o.what_if_measured
    if m is not None and m.error:
        v.append(Verdict("streams_failed", o.graph, max_streams=m.max_streams, error=m.error))
    elif m is not None and m.span_ns and m.one_stream_ns:
        v.append(Verdict("streams_measured", o.graph, streams=m.streams,
                         max_streams=m.max_streams, from_ns=m.one_stream_ns, to_ns=m.span_ns,
                         gain_pct=m.gain_pct, outputs_equal=m.outputs_equal,
                         max_abs_diff=m.max_abs_diff,
                         within_tolerance=None if m.outputs_equal else m.within_tolerance,
                         own_max_abs_diff=None if m.outputs_equal else m.own_max_abs_diff))
    return tuple(v)


def measured_streams(info: Mapping[str, Any], wi: Optional[WhatIf],
                     span: Optional[float]) -> Optional[MeasuredStreams]:
    """``capture --try-streams``'s measurement (graph info ``what_if_streams``,
    capture/streams.py): the spans of the graph re-captured over more streams and of the graph
    itself, traced alternately in one window (medians), beside the what-if's prediction
    (rescaled to the one-stream span of those same replays)."""
    m = (info or {}).get("what_if_streams")
    if not isinstance(m, Mapping):
        return None
    if m.get("error"):
        return MeasuredStreams(m.get("max_streams"), None, None, None, None, None, None, None,
                               None, None, None, None, None, None, None, str(m["error"]))
    one, alt = _num(m.get("median_one_stream_ns")), _num(m.get("median_ns"))
    pred = low = high = None
    if wi is not None and one and span:
        k = one / span
        pred, low, high = wi.predicted_span_ns * k, wi.low_ns * k, wi.high_ns * k
    return MeasuredStreams(
        max_streams=m.get("max_streams"), streams=m.get("streams"), ops=m.get("ops"),
        cross_stream_waits=m.get("cross_stream_waits"), replays=m.get("replays"),
        one_stream_ns=one, span_ns=alt,
        gain_pct=100.0 * (1.0 - alt / one) if one and alt else None, predicted_ns=pred,
        off_prediction_pct=100.0 * (alt / pred - 1.0) if alt and pred else None,
        within_interval=(low <= alt <= high) if alt and low is not None and high is not None
        else None,
        outputs_equal=m.get("outputs_equal"), max_abs_diff=_num(m.get("max_abs_diff")),
        one_stream_iqr_ns=_quartiles(m.get("one_stream_span_ns")),
        span_iqr_ns=_quartiles(m.get("span_ns")), error=None,
        within_tolerance=m.get("within_tolerance"), own_max_abs_diff=_own(m))


def _own(m: Mapping[str, Any]) -> Optional[float]:
    """The largest difference of the captured graph against itself over the compared parts
    (None: not measured, a bundle from before that comparison)."""
    parts = m.get("compared")
    owns = [_num(p.get("own_max_abs_diff")) for p in parts.values()
            if isinstance(p, Mapping)] if isinstance(parts, Mapping) else []
    known = [x for x in owns if x is not None]
    return max(known) if known else None


def _num(x: Any) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _quartiles(xs: Any) -> Optional[tuple[float, float]]:
    """(first, third) quartile of a list of spans, or None."""
    if not isinstance(xs, list) or len(xs) < 2:
        return None
    q = statistics.quantiles([float(x) for x in xs], n=4)
    return (q[0], q[2])


_FINDING_OF = {"serialized": "streams", "streams_measured": "streams", "host_bound": "host"}


def with_findings(vs: tuple[Verdict, ...], found: Findings) -> tuple[Verdict, ...]:
    """The verdicts that claim a gain (serialized, the streams measured, host bound), each
    with its finding's saving and floor: listed where the finding is, else under the floor
    with its figure. One number for both, so that they never disagree."""
    if not any(v.code in _FINDING_OF for v in vs):
        return vs
    listed = {(f.kind, f.graph): f for f in found.findings}
    under = {(f.kind, f.graph): f for f in found.under_floor}
    out = []
    for v in vs:
        key = (_FINDING_OF.get(v.code, ""), v.graph)
        f = listed.get(key) or under.get(key)
        if f is not None:
            few = f.kind == "host" and f.gaps < found.min_gaps
            v = replace(v, saving_ns=f.saving_ns, threshold_ns=f.threshold_ns,
                        listed=key in listed, gaps=f.gaps or None,
                        unlisted=None if key in listed else "few_gaps" if few else "floor")
        out.append(v)
    return tuple(out)
