"""DOT + report of a synthetic 100,000-node bundle: wall time and peak RSS.

Usage: bench_dot_report.py OUT.json [--nodes 100000] [--replays 20]
Writes a bundle with a transformer-like module tree (48 layers x ~2,000 nodes), a chain of
edges plus skips, and per-replay durations, then runs `graphscope dump --dot` (collapsed
automatically above 2,000 nodes) and `graphscope report` in fresh processes.
"""

import argparse
import json
import os
import sys
import tempfile

from _measure import measure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_bundle(path, n, replays, events=0):
    """``events``: replays kept as timeline events (what `report --html` draws)."""
    sys.path.insert(0, ROOT)
    from graphscope.model.bundle_io import write_bundle
    from graphscope.model.graph import CapturedGraph, Node

    exec_id = 3
    subs = ["attn.qkv", "attn.proj", "attn.core", "mlp.fc", "mlp.act", "mlp.proj", "ln1", "ln2"]
    nodes = []
    durations = {}
    layers = 48
    for i in range(n):
        layer = i * layers // n
        phase = {"autograd_phase": "backward"} if i >= n // 2 else {}
        ann = {"module_name": f"L.blocks.{layer}.{subs[i % len(subs)]}", **phase}
        nid = (exec_id << 32) | i
        nodes.append(Node("step", i, nid, "kernel", kernel=f"_Z6kernel{i % 50}v",
                          demangled=f"kernel{i % 50}()", grid=(128, 1, 1), block=(256, 1, 1),
                          annotation=ann, op="aten::mm", shapes="bf16[4096,4096]"))
        durations[str(nid)] = [1000 + (i * 7919 + r) % 3000 for r in range(replays)]
    edges = tuple((i, i + 1) for i in range(n - 1))
    edges += tuple((i, i + 17) for i in range(0, n - 17, 50))
    g = CapturedGraph("step", 1, exec_id, tuple(nodes), edges)
    totals = [sum(v[r] for v in durations.values()) for r in range(replays)]
    from graphscope.analysis.summary import summarize
    from graphscope.model.bundle import Bundle

    nodes_with_times = tuple(
        Node(**{**n.__dict__, "durations_ns": tuple(durations[str(n.exec_node_id)])})
        for n in nodes)
    g2 = CapturedGraph("step", 1, exec_id, nodes_with_times, edges)
    summary = summarize(Bundle(path, {}, (g2,), replays, tuple(totals), tuple(totals)))
    write_bundle(path, manifest={"tool": "graphscope", "synthetic": True}, graphs=[g],
                 timeline={"replays": replays, "durations_ns": durations,
                           "replay_kernel_ns": totals, "replay_span_ns": totals,
                           "events": _events(nodes, durations, events)},
                 summary=summary, force=True)  # as `graphscope capture` writes it


def _events(nodes, durations, keep):
    out = []
    for r in range(keep):
        t = 0
        for i, n in enumerate(nodes):
            d = durations[str(n.exec_node_id)][r]
            out.append({"replay": r, "graph": "step", "exec_node_id": n.exec_node_id,
                        "start_ns": t, "dur_ns": d, "stream": 7 if i % 5 else 8, "kind": 10})
            t += d if i % 5 else 0  # every fifth kernel overlaps on a side stream
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--replays", type=int, default=20)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="gs-dot-bench-")
    bundle = os.path.join(tmp, "big")
    make_bundle(bundle, a.nodes, a.replays)
    cli = os.path.join(ROOT, "graphscope", "__main__.py")
    res = {
        "bench": "dot_report", "nodes": a.nodes, "replays": a.replays, "cpus": os.cpu_count(),
        "dump_dot": measure([cli, "dump", bundle, "--dot", "-o", os.path.join(tmp, "g.dot"), "-f"]),
        "report": measure([cli, "report", bundle]),
        "report_recompute": measure([cli, "report", bundle, "--recompute"]),
        "dump_dot_full": measure([cli, "dump", bundle, "--dot", "--no-collapse", "-o",
                              os.path.join(tmp, "full.dot"), "-f"]),
    }
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
