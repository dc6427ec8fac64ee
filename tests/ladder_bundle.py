"""Grow a recorded bucket ladder (tests/data/run_ladder: a `graphscope run` of a serving loop
that captures one graph per batch size) into a ladder of more buckets, sized as vLLM's default
decode batch sizes (1, 2, 4, then 8 to 512 by 8: 67 buckets), for CPU tests of how
`graphscope report` reads a big ladder that no machine without a GPU can record.

Each new bucket is a copy of one recorded graph. The largest buckets copy the recorded graphs
that were never replayed (as many as the recording has); the others cycle through the graphs
that were replayed while traced, from the smallest bucket up (so the buckets of a size that
was recorded, 1 to 32, copy that recorded bucket), and every time in the grown bundle was
measured. A copy gets
its bucket's name, ordinal and shapes, a fresh exec id numbered as the recording numbers them
(so fresh exec node ids, ``exec_id << 32 | local_id``, in graph.json, the annotations,
durations.npy, the timeline's events and launches) and its own raw DOT. The rest of its info
(memory, capture times, replay counts, the pool every bucket shares) is its source's. The traced
copies are laid out on the timeline one after another, last captured first, as the recording
replays them. summary.json and diagnosis.json are made as `graphscope run` makes them
(capture/finish.py), and the bundle is written by graphscope's own writer, so it validates on
read.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from graphscope.analysis.report import report_diagnosis
from graphscope.analysis.summary import summarize
from graphscope.model.bundle import Bundle
from graphscope.model.bundle_io import has_raw_dot, raw_dot, read_bundle, write_bundle
from graphscope.model.graph import CapturedGraph

LOCAL_BITS = 32  # exec node id = exec id << 32 | local id


def decode_sizes(buckets: int = 67) -> list[int]:
    """The first ``buckets`` of vLLM's default decode batch sizes: 1, 2, 4, 8, 16, 24, ..."""
    return ([1, 2, 4] + [8 * i for i in range(1, buckets + 1)])[:buckets]


def grow_ladder(src: str, dst: str, buckets: int = 67) -> str:
    """Write at ``dst`` the ladder of ``src`` grown to ``buckets`` buckets; returns its path."""
    b = read_bundle(src)
    sources = _sources(b.graphs, buckets)
    sizes = sorted(decode_sizes(buckets), reverse=True)  # captured largest first, as recorded
    first, step = b.graphs[0].exec_id, _exec_step(b.graphs)
    graphs = [_copy(g, i, size, first + step * i)
              for i, (g, size) in enumerate(zip(sources, sizes))]
    pairs = list(zip(graphs, sources))
    events, launches = _timeline_events(b, pairs)
    kernel_ns, span_ns = _totals(graphs, events, b.replays)
    manifest = {**{k: v for k, v in b.manifest.items() if k != "files"},
                "graphs": [g.name for g in graphs], "observed_captures": len(graphs)}
    bundle = Bundle("", manifest, tuple(graphs), b.replays, tuple(kernel_ns), tuple(span_ns),
                    tuple(events), b.unjoined_records, tuple(launches))
    with open(os.path.join(b.path, "timeline.json"), encoding="utf-8") as f:
        recorded = json.load(f)
    timeline = {
        "replays": b.replays,
        "durations_ns": {str(n.exec_node_id): list(n.durations_ns)
                         for g in graphs for n in g.nodes if n.durations_ns},
        "replay_kernel_ns": kernel_ns,
        "replay_span_ns": span_ns,
        "events": events,
        "joined_records": sum(len(n.durations_ns) for g in graphs for n in g.nodes),
        "unjoined_records": b.unjoined_records,
        "outside_graph_records": recorded.get("outside_graph_records", 0),
        "outside_graph_ns": recorded.get("outside_graph_ns", 0),
        **({"launches": launches} if launches else {}),
    }
    dots = {new.name: _renumber_dot(raw_dot(b, old.name), old, new)
            for new, old in pairs if has_raw_dot(b, old.name)}
    return write_bundle(dst, manifest=manifest, graphs=list(bundle.graphs), timeline=timeline,
                        summary=summarize(bundle), raw_dot=dots,
                        diagnosis=report_diagnosis(bundle))


def _traced(g: CapturedGraph) -> bool:
    return any(n.durations_ns for n in g.nodes)


def _sources(graphs: Sequence[CapturedGraph], buckets: int) -> list[CapturedGraph]:
    """The recorded graph each new bucket copies, largest bucket first: the never replayed
    ones, then the traced ones over and over, counted from the smallest bucket up, so that the
    smallest buckets copy the recorded buckets of their size."""
    traced = [g for g in graphs if _traced(g)]
    if buckets < 1 or not traced:
        raise ValueError(f"cannot grow {len(graphs)} graphs ({len(traced)} traced) into "
                         f"{buckets} buckets: need at least one bucket and one traced graph")
    never = [g for g in graphs if not _traced(g)][:buckets]
    up = itertools.islice(itertools.cycle(reversed(traced)), buckets - len(never))
    return never + list(up)[::-1]


def _exec_step(graphs: Sequence[CapturedGraph]) -> int:
    """How far apart the recording's exec ids are (the driver numbers templates and execs
    from one counter)."""
    return max(graphs[1].exec_id - graphs[0].exec_id, 1) if len(graphs) > 1 else 1


def _copy(g: CapturedGraph, ordinal: int, size: int, exec_id: int) -> CapturedGraph:
    shapes = re.sub(r"\[\d+", f"[{size}", str(g.info.get("shapes", "")), count=1)
    name = f"{g.info['site']} #{ordinal} {shapes}"
    nodes = tuple(dataclasses.replace(n, graph=name, exec_node_id=exec_id << LOCAL_BITS
                                      | n.local_id) for n in g.nodes)
    return dataclasses.replace(
        g, name=name, exec_id=exec_id, template_graph_id=exec_id - (g.exec_id
                                                                    - g.template_graph_id),
        nodes=nodes, info={**g.info, "ordinal": ordinal, "shapes": shapes})


def _new_id(exec_node_id: int, new: CapturedGraph) -> int:
    return new.exec_id << LOCAL_BITS | (exec_node_id & ((1 << LOCAL_BITS) - 1))


def _blocks(items: Sequence[Any], end: str) -> tuple[dict[str, tuple[int, int]], int]:
    """Per graph, the first start and the last end of its events or launches (``end``: how
    one ends), and the shortest gap between one graph's block and the next one's."""
    spans: dict[str, tuple[int, int]] = {}
    for x in items:
        stop = x["start_ns"] + x["dur_ns"] if end == "dur_ns" else x["end_ns"]
        lo, hi = spans.get(x["graph"], (x["start_ns"], stop))
        spans[x["graph"]] = (min(lo, x["start_ns"]), max(hi, stop))
    order = sorted(spans.values())
    gap = min((max(nxt[0] - cur[1], 0) for cur, nxt in zip(order, order[1:])), default=0)
    return spans, gap


def _timeline_events(b: Bundle, pairs: list[tuple[CapturedGraph, CapturedGraph]]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The copies' events and launches: each traced copy's its source's, shifted so that the
    copies run one after another (last captured first) on the GPU, apart by the recording's
    shortest gap between two graphs, and are launched one after another on the host, apart
    by its shortest gap between two graphs' launches (a graph's launches take less time than
    its replays, so the host runs further and further ahead of the GPU, as it did)."""
    gpu, gpu_gap = _blocks(b.events, "dur_ns")
    host, host_gap = _blocks(b.launches, "end_ns")
    events: list[dict[str, Any]] = []
    launches: list[dict[str, Any]] = []
    at = host_at = 0
    for new, old in reversed(pairs):
        if old.name not in gpu:
            continue
        lo, hi = gpu[old.name]
        shift = at - lo
        events += [{**e, "graph": new.name, "exec_node_id": _new_id(e["exec_node_id"], new),
                    "start_ns": e["start_ns"] + shift} for e in b.events if e["graph"] == old.name]
        at = hi + shift + gpu_gap
        if old.name not in host:
            continue
        if not launches:  # the first launch keeps its lead over its events
            host_at = host[old.name][0] + shift
        lead = host_at - host[old.name][0]
        launches += [{**x, "graph": new.name, "start_ns": x["start_ns"] + lead,
                      "end_ns": x["end_ns"] + lead} for x in b.launches if x["graph"] == old.name]
        host_at = host[old.name][1] + lead + host_gap
    return events, launches


def _totals(graphs: list[CapturedGraph], events: list[dict[str, Any]], replays: int
            ) -> tuple[list[int], list[int]]:
    """Per replay, as the join computes them: the sum of every node's duration, and the
    first start to the last end of the events."""
    kernel = [0] * replays
    for g in graphs:
        for n in g.nodes:
            for r, d in enumerate(n.durations_ns[:replays]):
                kernel[r] += d
    span = []
    for r in range(replays):
        ends = [(e["start_ns"], e["start_ns"] + e["dur_ns"]) for e in events if e["replay"] == r]
        span.append(max(b for _, b in ends) - min(a for a, _ in ends) if ends else 0)
    return kernel, span


def _renumber_dot(text: str, old: CapturedGraph, new: CapturedGraph) -> str:
    """The driver's DOT of ``old`` naming the copy's template graph id instead."""
    return re.sub(rf"\b(cluster|graph)_{old.template_graph_id}(?!\d)",
                  rf"\g<1>_{new.template_graph_id}", text)
