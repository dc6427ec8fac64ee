"""Chrome / Perfetto trace-event JSON of a bundle's recorded replays, annotated.

Every kernel/memcpy/memset event carries its annotation, op, shapes and source in ``args``;
a "modules" track holds, per graph replay and module depth, one slice per run of consecutive
work (in start order, all streams) of one module, as the HTML timeline draws them: a module's
forward and backward are two slices, sibling modules never nest, and no slice spans two graphs
(``analysis.replays.module_runs``); stream lanes are compacted to the streams actually used.
Times: the bundle's event times are ns relative to the first recorded event; trace-event
``ts``/``dur`` are µs.
"""

from __future__ import annotations

from typing import Any

from ..analysis.replays import module_runs
from ..model.bundle import Bundle
from ..model.graph import NodeKind

PID_GPU = 1
PID_MODULES = 2


def build_trace(bundle: Bundle) -> dict[str, Any]:
    nodes = {n.exec_node_id: n for n in bundle.nodes()}
    # an event without a stream (a bundle edited or written by another tool) gets a lane of
    # its own, "stream ?", rather than none
    streams = sorted({_stream(e) for e in bundle.events})
    lane = {s: i for i, s in enumerate(streams)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": PID_GPU, "name": "process_name",
         "args": {"name": "GPU (graph replays)"}},
        {"ph": "M", "pid": PID_MODULES, "name": "process_name", "args": {"name": "modules"}},
    ]
    events += [
        {"ph": "M", "pid": PID_GPU, "tid": lane[s], "name": "thread_name",
         "args": {"name": f"stream {s}" if s >= 0 else "stream ?"}}
        for s in streams
    ]
    for e in bundle.events:
        n = nodes.get(int(e["exec_node_id"]))
        ts = e["start_ns"] / 1000.0
        dur = e["dur_ns"] / 1000.0
        args: dict[str, Any] = {"replay": e["replay"], "graph": e["graph"],
                                "graph node id": e["exec_node_id"]}
        name = e["kind"]
        if n is not None:
            name = n.short_name
            args.update(n.annotation)
            for k in ("demangled", "op", "shapes", "source"):
                v = getattr(n, k)
                if v:
                    args[k] = v
            if n.type == NodeKind.KERNEL:
                args["grid"] = list(n.grid)
                args["block"] = list(n.block)
        events.append({"ph": "X", "pid": PID_GPU, "tid": lane[_stream(e)], "ts": ts,
                       "dur": dur, "name": name, "cat": e["kind"], "args": args})
    runs = module_runs(bundle.events, nodes)
    for graph, replay, module, t0, t1, kernels in runs:
        events.append({"ph": "X", "pid": PID_MODULES, "tid": module.count("."), "ts": t0 / 1000.0,
                       "dur": (t1 - t0) / 1000.0, "name": module.rsplit(".", 1)[-1],
                       "cat": "module", "args": {"module_name": module, "replay": replay,
                                                 "graph": graph, "nodes": kernels}})
    levels = sorted({r[2].count(".") for r in runs})
    events += [
        {"ph": "M", "pid": PID_MODULES, "tid": lv, "name": "thread_name",
         "args": {"name": f"module depth {lv}"}}
        for lv in levels
    ]
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"graphscope_bundle": bundle.path, "replays_kept": len(
                {e["replay"] for e in bundle.events})}}


def build_multirank_trace(ranks: list[tuple[int, Bundle]]) -> dict[str, Any]:
    """One trace with one GPU process and one modules process per rank."""
    events: list[dict[str, Any]] = []
    for r, b in ranks:
        for e in build_trace(b)["traceEvents"]:
            e = dict(e)
            e["pid"] = 100 * (r + 1) + int(e["pid"])
            if e.get("ph") == "M" and e.get("name") == "process_name":
                e["args"] = {"name": f"rank {r}: {e['args']['name']}"}
            events.append(e)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"ranks": [r for r, _ in ranks]}}


def _stream(e: Any) -> int:
    s = e.get("stream")
    return int(s) if isinstance(s, int) and not isinstance(s, bool) and s >= 0 else -1
