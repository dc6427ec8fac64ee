"""Chrome / Perfetto trace-event JSON of a bundle's recorded replays, annotated.

Every kernel/memcpy/memset event carries its annotation, op, shapes and source in ``args``;
a "modules" track per replay holds nested slices from the first start to the last end of each
module's work; stream lanes are compacted to the streams actually used. Times: the bundle's
event times are ns relative to the first recorded event; trace-event ``ts``/``dur`` are µs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..model.graph import UNATTRIBUTED, Bundle, NodeKind

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
    spans: dict[tuple[int, str], list[float]] = defaultdict(lambda: [float("inf"), 0.0])
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
            module = n.module
            if module != UNATTRIBUTED:
                parts = module.split(".")
                for i in range(len(parts)):
                    sp = spans[(e["replay"], ".".join(parts[: i + 1]))]
                    sp[0] = min(sp[0], ts)
                    sp[1] = max(sp[1], ts + dur)
        events.append({"ph": "X", "pid": PID_GPU, "tid": lane[_stream(e)], "ts": ts,
                       "dur": dur, "name": name, "cat": e["kind"], "args": args})
    for (replay, module), (t0, t1) in sorted(spans.items(), key=lambda kv: (kv[0][0], kv[1][0])):
        level = module.count(".")
        events.append({"ph": "X", "pid": PID_MODULES, "tid": level, "ts": t0, "dur": t1 - t0,
                       "name": module.rsplit(".", 1)[-1], "cat": "module",
                       "args": {"module_name": module, "replay": replay}})
    levels = sorted({module.count(".") for (_, module) in spans})
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
