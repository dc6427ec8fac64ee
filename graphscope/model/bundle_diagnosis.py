"""What a kept ``diagnosis.json`` must hold before a report prints it instead of diagnosing the
bundle again: every field of the type the diagnosis writes (the shape of
:class:`graphscope.analysis.diagnosis.types.Diagnosis`'s JSON form; a unit test keeps the two in
step), and figures the bundle's own data allows. Its key is a digest anyone can compute, so
both are checked: a saving never exceeds the span it is a share of, a count never exceeds the
nodes or edges of its graph, a list never outgrows its graph, the graphs are the summary's.
A diagnosis that fails any check is not an error: it is diagnosed again from the nodes."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional

from .bundle_check import _BOOL, _NUM, _SINT, _STR, _misfit


def _of(kind: Any, names: str) -> dict[str, Any]:
    """``{name: kind}`` for the space-separated ``names`` (``?name``: absent or null)."""
    return dict.fromkeys(names.split(), kind)


_SHARE = {"module": _STR, "?ns": _NUM, "?nodes": _NUM, "pct": _NUM}
_VERDICT = {"code": _STR, "graph": _STR,
            **_of(_SINT, "?work_nodes ?streams ?edges ?max_streams ?short_nodes ?gaps"),
            **_of(_NUM, "?median_node_ns ?idle_pct ?launch_pct ?parallelism ?dag_parallelism "
                        "?from_ns ?to_ns ?low_ns ?high_ns ?gain_pct ?max_abs_diff "
                        "?own_max_abs_diff ?short_pct ?short_under_ns ?saving_ns "
                        "?threshold_ns"),
            **_of(_BOOL, "?outputs_equal ?within_tolerance ?listed"),
            "?error": _STR, "?unlisted": _STR}
_FINDING = {"kind": _STR, "graph": _STR,
            **_of(_NUM, "saving_ns saving_pct low_ns high_ns predicted_ns shared_ns "
                        "?measured_ns floor_ns gap_ns threshold_ns spread_ns"),
            "evidence": {"nodes": [_SINT], "node_count": _SINT, "modules": [_STR],
                         "edges": [(_SINT, _SINT)], "edge_count": _SINT},
            "action": {"kind": _STR, "argv": [_STR], "by_hand": _STR, "target": _STR},
            "kernels": _SINT, "gaps": _SINT}
_WHAT_IF = {
    **_of(_SINT, "max_streams streams chains sm_count"),
    **_of(_NUM, "predicted_span_ns low_ns high_ns measured_span_ns gain_ns gain_pct "
                "model_as_captured_ns model_what_if_ns no_contention_ns"),
    "calibration": {"source": _STR, "groups": _SINT,
                    **_of(_NUM, "slowdown_per_overlap added_ns latency_added_ns "
                                "cross_stream_ns uncertainty_pct")},
    **_of(_STR, "gpu compute_capability device_source registers")}
_MEASURED = {
    **_of(_SINT, "?max_streams ?streams ?ops ?cross_stream_waits ?replays"),
    **_of(_NUM, "?one_stream_ns ?span_ns ?gain_pct ?predicted_ns ?off_prediction_pct "
                "?max_abs_diff ?own_max_abs_diff"),
    **_of(_BOOL, "?within_interval ?outputs_equal ?within_tolerance"),
    "?one_stream_iqr_ns": (_NUM, _NUM), "?span_iqr_ns": (_NUM, _NUM), "?error": _STR}
_STREAM_ORDER = {
    "op_info": _BOOL,
    **_of(_SINT, "nodes_without_op_info inplace_writers what_if_edges "
                 "stream_order_only_edges unchecked_edges"),
    "edges": [(_SINT, _SINT)],
    "chains": [{**_of(_SINT, "first last nodes stream modules"), "work_ns": _NUM,
                "module": _STR}],
    **_of(_NUM, "?dependency_latency_ns ?path_with_latency_ns")}
_GRAPH = {
    "graph": _STR, **_of(_SINT, "nodes edges work_nodes streams span_replays"),
    **_of(_BOOL, "timed launch_recorded"), "?error": _STR,
    "assumptions": [{"code": _STR, "count": _SINT, "kinds": [(_STR, _SINT)], "why": _STR}],
    "selection": {"used": [_SINT], "set_aside": [_SINT],
                  **_of(_NUM, "?set_aside_span_ns ?others_span_ns"),
                  **_of(_SINT, "traced with_events"), "only_cold": _BOOL},
    "?critical_path": {"?length_ns": _NUM, "?length_nodes": _SINT, "nodes": [_SINT],
                       "exec_node_ids": [_SINT], "work_nodes": _SINT, "modules": [_SHARE],
                       "modules_rolled_up": [_SHARE]},
    "?slack": {**_of(_SINT, "on_path zero_slack_off_path off_path"),
               "near_critical": [{"local_id": _SINT, "slack_ns": _NUM, "name": _STR,
                                  "module": _STR}]},
    "?slack_ns": {"*": _NUM},
    **_of(_NUM, "?work_ns ?dag_parallelism ?span_ns ?parallelism ?idle_pct ?concurrency_pct "
                "?launch_latency_ns"),
    "replays": [{**_of(_SINT, "replay span_ns first_ns last_ns idle_ns busy_ns dep_gap_ns "
                              "concurrent_ns ?launch_ns ?launch_call_ns ?launch_queued_ns "
                              "?gap_after_ns")}],
    "median": _of(_NUM, "?span_ns ?idle_ns ?dep_gap_ns ?concurrent_ns ?launch_ns "
                        "?launch_call_ns ?launch_queued_ns ?busy_ns ?gap_after_ns"),
    "?stream_order": _STREAM_ORDER, "?what_if": _WHAT_IF, "?what_if_measured": _MEASURED,
    "verdicts": [_VERDICT]}
DIAGNOSIS_SPEC: dict[str, Any] = {
    "graphs": [_GRAPH],
    "?between_replays": {"pairs": _SINT,
                         **_of(_NUM, "?median_gap_ns max_gap_ns total_gap_ns ?median_span_ns "
                                     "?host_wait_median_ns gap_spread_ns ?median_cycle_ns"),
                         "?note": _STR},
    "launch_recorded": _BOOL,
    "verdicts": [_VERDICT],
    "findings": {"findings": [_FINDING], "floor_pct": _NUM, "below_floor": _SINT,
                 "nothing_above_noise": _BOOL, "refuted": [(_STR, _NUM, _NUM)],
                 "timed": _BOOL, "under_floor": [_FINDING], "min_gaps": _SINT},
}

MAX_SPAN_NS = 1 << 52  # a replay's figures: as the per-replay sums of durations (bundle_io)
# shares of a whole (a span, a path): 0..100; gains and errors of a prediction are not shares
_SHARES = ("idle_pct", "concurrency_pct", "launch_pct", "saving_pct", "pct", "floor_pct",
           "uncertainty_pct", "short_pct")
MAX_PCT = 1e6  # a gain or an error of a prediction, in %
# counts of a graph's nodes, and of its nodes or edges (a dropped edge, a what-if's edges)
_NODE_COUNTS = ("node_count", "kernels", "work_nodes", "length_nodes", "on_path",
                "zero_slack_off_path", "off_path", "nodes_without_op_info", "inplace_writers",
                "short_nodes", "streams", "chains")
_EDGE_COUNTS = ("edge_count", "stream_order_only_edges", "unchecked_edges", "edges", "count")
_VERDICTS = 16  # a graph's verdicts, the bundle's: each code once, and a few more


def diagnosis_misfit(diag: Any, summary: Optional[Mapping[str, Any]] = None) -> Optional[str]:
    """Why the kept diagnosis ``diag`` cannot be printed as it is (None: it can): a field of
    the wrong type, or a figure its bundle cannot hold (``summary``: the bundle's
    summary.json, whose graphs the diagnosis must describe)."""
    bad = _misfit(diag, DIAGNOSIS_SPEC)
    if bad is not None:
        return f"'{bad[0]}' must be {bad[1]}"
    return _figures_misfit(diag) or _graphs_misfit(diag, summary) or _findings_misfit(diag)


def _numbers(v: Any, key: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _numbers(x, str(k))
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _numbers(x, key)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        yield key, v


def _figures_misfit(diag: Mapping[str, Any]) -> Optional[str]:
    """Times within a replay's reach, shares within 0..100, every number finite."""
    for key, v in _numbers(diag):
        if not math.isfinite(v):
            return f"{key} is not finite"
        if key.endswith("_ns") and abs(v) > MAX_SPAN_NS:
            return f"{key} {v:g} is past {MAX_SPAN_NS} ns"
        if key in _SHARES and not -1e-6 <= v <= 100 + 1e-6:
            return f"{key} {v:g} is not a share in 0..100"
        if key.endswith("_pct") and abs(v) > MAX_PCT:
            return f"{key} {v:g} is past {MAX_PCT:g}%"
    return None


def _graphs_misfit(diag: Mapping[str, Any], summary: Optional[Mapping[str, Any]]
                   ) -> Optional[str]:
    """Each graph's counts within its nodes and edges, its lists within its size."""
    graphs = diag["graphs"]
    if summary is not None and [(g.get("name"), g.get("nodes"), g.get("work_nodes"))
                                for g in summary.get("graphs", [])] != [
            (g["graph"], g["nodes"], g["work_nodes"]) for g in graphs]:
        return "its graphs are not the summary's"
    replays = summary.get("replays", 0) if summary is not None else 0
    for g in graphs:
        nodes, edges = g["nodes"], g["edges"]
        if not 0 <= g["work_nodes"] <= nodes or edges < 0:
            return f"{g['graph']!r:.60}: node counts out of range"
        for key, v in _counts(g):
            limit = (nodes if key in _NODE_COUNTS else nodes + edges if key in _EDGE_COUNTS
                     else None)
            if limit is not None and not 0 <= v <= max(limit, 1):
                return f"{g['graph']!r:.60}: {key} {v} is past its graph's {limit}"
        longest = _longest_list(g)
        if longest > nodes + edges + (replays if isinstance(replays, int) else 0) + 64:
            return f"{g['graph']!r:.60}: a list of {longest} items outgrows its graph"
        if len(g["verdicts"]) > _VERDICTS:
            return f"{g['graph']!r:.60}: {len(g['verdicts'])} verdicts"
    if len(diag["verdicts"]) > _VERDICTS:
        return f"{len(diag['verdicts'])} verdicts"
    return None


def _counts(v: Any) -> Iterator[tuple[str, int]]:
    """The integers held by a key (not the ids listed under one) of ``v``, at any depth."""
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, int) and not isinstance(x, bool):
                yield str(k), x
            elif isinstance(x, (dict, list)):
                yield from _counts(x)
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, dict):
                yield from _counts(x)


def _longest_list(v: Any) -> int:
    if isinstance(v, dict):
        return max((_longest_list(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return max([len(v)] + [_longest_list(x) for x in v if isinstance(x, (dict, list))])
    return 0


def _findings_misfit(diag: Mapping[str, Any]) -> Optional[str]:
    """A finding on one of its graphs (host: between replays), saving at most what it is a
    share of; at most two a graph (streams, fusion) and one between replays."""
    fs = diag["findings"]
    listed: Sequence[Mapping[str, Any]] = fs["findings"] + fs["under_floor"]
    if len(listed) > 2 * len(diag["graphs"]) + 1 or fs["below_floor"] > len(listed) + len(
            diag["graphs"]) + 1 or len(fs["refuted"]) > len(diag["graphs"]):
        return f"{len(listed)} findings for {len(diag['graphs'])} graph(s)"
    by_name = {g["graph"]: g for g in diag["graphs"]}
    between = diag.get("between_replays") or {}
    for f in listed:
        if f["graph"]:
            g = by_name.get(f["graph"])
            if g is None:
                return f"a finding on {f['graph']!r:.60}, not one of its graphs"
            if not (f["kernels"] <= g["work_nodes"] and f["evidence"]["node_count"] <= g["nodes"]
                    and f["evidence"]["edge_count"] <= g["edges"]):
                return f"a finding's counts are past its graph's ({g['nodes']} nodes)"
            measured = (g.get("what_if_measured") or {}).get("one_stream_ns") or 0.0
            whole = max(g.get("span_ns") or 0.0, measured)
        else:
            whole = max(between.get("max_gap_ns") or 0.0, between.get("median_gap_ns") or 0.0)
        for key in ("saving_ns", "low_ns", "high_ns", "predicted_ns", "measured_ns"):
            v = f.get(key)
            if v is not None and v > whole * (1 + 1e-9) + 1e-6:
                return f"a finding's {key} {v:g} is past the {whole:g} ns it is a share of"
    return None
