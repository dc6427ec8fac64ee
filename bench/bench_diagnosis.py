"""Diagnosis cost: the analysis of a synthetic 100,000-node graph, on the CPU (critical path,
replays, stream order, the contention-aware what-if and the ranked findings).

The graph looks like a captured training step: a main stream whose nodes each read their
predecessor's output (every seventh: the output before that one, so that its captured edge
is stream order only) and a weight and write their own output (every fifth also writes a
shared cuBLAS-style workspace), a two-node side chain forked off and joined back every 10
nodes (cross-stream edges), 5% of the nodes without op information (no reads/writes), and
three replays of events laid out from the DAG (each node starts 300 ns after its last
predecessor), with a launch record per replay. Timed: ``diagnose(bundle)`` only (the bundle
is built in memory; reading one is `bench_html`'s and the loaders' business), best and median
of REPEATS runs in one process, as wall and as CPU time (the process's own: on a shared machine
the wall time also holds the time other processes had the cores; the 1-minute load average is
reported beside them).

Two layouts of the weights, both timed: ``step`` (the headline) keeps the 500 weights in an
address range of their own, as a training step's parameters are; ``overlapping`` puts them
where the activations of nodes 32,767-36,863 are later written (the layout this benchmark had
until 2026-12-03, by accident: activations at 8 KiB steps from ``buf`` run into the weights at
``buf`` + 256 MiB), so that every node's weight read meets 8 writes: ~6 data edges per node
where the captured graphs recorded on the H200 have 1-1.7. It stays as the dense case.
Usage: bench_diagnosis.py [OUT.json] [NODES]
"""

import os
import platform
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _measure import write_json  # noqa: E402

from graphscope.analysis.diagnosis import diagnose  # noqa: E402
from graphscope.model.bundle import Bundle  # noqa: E402
from graphscope.model.graph import CapturedGraph, Node  # noqa: E402

REPEATS = 5
REPLAYS = 3
KEPT = 3
GID = 1 << 32


WEIGHTS = {"step": 1 << 36, "overlapping": (1 << 30) + (1 << 28)}  # where the weights start


def build(n: int, seed: int = 0, layout: str = "step") -> Bundle:
    rnd = random.Random(seed)
    nodes, edges, stream = [], [], []
    durs = []
    ws = (1 << 40, (1 << 40) + (1 << 22))
    main_prev = None
    i = 0
    buf = 1 << 30

    def add(reads, writes, s, hard=False):
        nonlocal i
        d = rnd.randint(1_000, 20_000)
        nodes.append(Node(graph="step", local_id=i, exec_node_id=GID + i, type="kernel",
                          kernel=f"k{i % 50}", durations_ns=(d,) * REPLAYS,
                          annotation={"module_name": f"m.blocks.{(i // 1000) % 24}"},
                          reads=None if hard else tuple(reads),
                          writes=None if hard else tuple(writes)))
        durs.append(d)
        stream.append(s)
        i += 1
        return i - 1

    out_of: dict = {}
    back = None
    while i < n:
        hard = rnd.random() < 0.05
        # every 7th node reads the output of the node before its predecessor, not its
        # predecessor's: that captured edge is stream order only
        src = out_of.get(back if i % 7 == 0 else main_prev, (buf, buf + 4096))
        back = main_prev
        w = (WEIGHTS[layout] + (i % 500) * 65536, WEIGHTS[layout] + (i % 500) * 65536 + 65536)
        out = (buf + 8192 * (i + 1), buf + 8192 * (i + 1) + 4096)
        writes = [out] + ([ws] if i % 5 == 0 else [])
        u = add([src, w], writes, 7, hard)
        out_of[u] = out
        if main_prev is not None:
            edges.append((main_prev, u))
        main_prev = u
        if i % 10 == 0 and i + 3 < n:  # a side chain: fork, two nodes, join
            a = add([out], [(out[1] + 64, out[1] + 2048)], 9)
            b = add([(out[1] + 64, out[1] + 2048)], [(out[1] + 2048, out[1] + 4000)], 9)
            edges += [(u, a), (a, b)]
            j = add([out, (out[1] + 2048, out[1] + 4000)], [(out[0], out[0] + 64)], 7)
            edges += [(u, j), (b, j)]
            out_of[j] = out
            main_prev = j
    g = CapturedGraph("step", 1, 1, tuple(nodes), tuple(edges))
    pred = [[] for _ in range(len(nodes))]
    for a, b in edges:
        pred[b].append(a)
    events, launches = [], []
    t = 0
    for r in range(KEPT):
        launches.append({"graph": "step", "replay": r, "start_ns": t, "end_ns": t + 2_000})
        t += 4_000
        end = [0] * len(nodes)
        for k in range(len(nodes)):  # ids are in topological order
            st = max((end[p] for p in pred[k]), default=t) + 300
            end[k] = st + durs[k]
            events.append({"graph": "step", "replay": r, "exec_node_id": GID + k, "start_ns": st,
                           "dur_ns": durs[k], "stream": stream[k], "kind": "kernel"})
        t = max(end) + 50_000
    return Bundle("/synthetic", {}, (g,), REPLAYS, events=tuple(events),
                  launches=tuple(launches))


def timed(b: Bundle) -> dict:
    """diagnose(b) REPEATS times: the times and what it found."""
    times, cpu = [], []
    for _ in range(REPEATS):
        b.__dict__.pop("work", None)  # cached properties: measured as a fresh bundle has them
        b.__dict__.pop("durations", None)
        t0, c0 = time.perf_counter(), time.process_time()
        d = diagnose(b)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    o = d.graphs[0]
    s = o.stream_order
    wi = o.what_if
    return {
        "nodes": len(b.graphs[0].nodes), "edges": len(b.graphs[0].edges),
        "events": len(b.events), "best_s": min(times), "median_s": statistics.median(times),
        "runs_s": times, "best_cpu_s": min(cpu), "median_cpu_s": statistics.median(cpu),
        "load_avg_1min": os.getloadavg()[0], "critical_path_ns": o.critical_path.length_ns,
        "critical_path_nodes": len(o.critical_path.nodes),
        "what_if_edges": s.what_if_edges,
        "stream_order_only_edges": s.stream_order_only_edges,
        "nodes_without_op_info": s.nodes_without_op_info,
        "no_contention_ns": wi.no_contention_ns if wi else None,
        "predicted_span_ns": wi.predicted_span_ns if wi else None,
        "findings": [(f.kind, f.saving_ns) for f in d.findings.findings],
    }


def main() -> None:
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    res = timed(build(n))
    res["overlapping"] = timed(build(n, layout="overlapping"))
    res.update(python=platform.python_version(), machine=platform.machine(),
               cpus=os.cpu_count())
    write_json(out_path, res)


if __name__ == "__main__":
    main()
