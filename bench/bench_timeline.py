"""Timeline cost: graphscope's traced replays vs torch.profiler on the same replays.

Each tool runs in a fresh process (each pays its own first-use cost, as a user would) on the
same step graph of a sample model: N plain replays, then N replays under the tool, twice
(cold = first use in the process, warm = second). graphscope's time includes joining every
record onto the captured nodes; torch.profiler's includes building its event list.
Reported: totals, and overheads (traced - plain wall of the same N replays, measured right
before). A third tool, "cupti", is the floor: the same activity kinds enabled, the replays, the
flush, and the buffers handed back undecoded: what CUPTI's collection costs by itself, so that
graphscope's own cost is its overhead minus this one.
Usage: bench_timeline.py OUT.json [MODEL ...] (default: mlp gpt transformer_encoder)
"""

import json
import os
import subprocess
import sys
import time

from _measure import write_json

N = 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _graph(model_name):
    import torch

    import graphscope
    from graphscope.capture import build_graphs, default_loss, to_cuda
    from graphscope.capture.loader import load_model_file
    from graphscope.capture.source import RawCapture, inspect_template, set_exec_id

    spec = load_model_file(os.path.join(ROOT, "sample_models", f"{model_name}.py"))
    model, args = spec.model.cuda(), to_cuda(spec.args)
    loss = spec.loss or default_loss
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            loss(model(*args)).backward()
    torch.cuda.current_stream().wait_stream(s)
    for p in model.parameters():
        p.grad = None
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with graphscope.graph(g, enable_annotations=True) as cap:
        loss(model(*args)).backward()
    raw = inspect_template(g, "step", cap.records, dot=False)
    g.instantiate()
    set_exec_id(raw, g)
    return g, build_graphs(RawCapture([raw]))


def _plain(g, torch):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(N):
        g.replay()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def worker(tool, model_name):
    import torch

    g, graphs = _graph(model_name)
    g.replay()
    torch.cuda.synchronize()
    res = {"tool": tool, "model": model_name,
           "work_nodes": sum(1 for n in graphs[0].nodes if n.is_work)}
    for run in ("cold", "warm"):
        # plain replays right before each traced run: the overhead is traced - plain
        res[f"{run}_plain_s"] = _plain(g, torch)
        t0 = time.perf_counter()
        if tool == "graphscope":
            from graphscope import native
            from graphscope.model.join import join

            t_a = time.perf_counter()
            with native.tracing() as out:
                t_b = time.perf_counter()
                for _ in range(N):
                    g.replay()
                torch.cuda.synchronize()
                t_c = time.perf_counter()
            t_d = time.perf_counter()
            recs = out[0]
            ids = {n.exec_node_id: "step" for n in graphs[0].nodes if n.is_work}
            jr = join(recs.graph_node_id, recs.correlation, recs.start_ns, recs.end_ns,
                      recs.stream, recs.kind, ids, 3,
                      join_records=native.extension().join_records)
            t_e = time.perf_counter()
            res[f"{run}_breakdown_ms"] = {"tracer_start": (t_b - t_a) * 1e3,
                                          "replays": (t_c - t_b) * 1e3,
                                          "tracer_stop_decode": (t_d - t_c) * 1e3,
                                          "cupti_flush": recs.flush_ns / 1e6,
                                          "decode_in_flush": recs.tail_decode_ns / 1e6,
                                          "decode_total": recs.decode_ns / 1e6,
                                          "join": (t_e - t_d) * 1e3}
            res[f"{run}_records"] = jr.joined_records
            res[f"{run}_unjoined"] = jr.unjoined_records
            t_f = time.perf_counter()
            n_events = len(jr.events)  # made on first use, when a bundle or trace is written
            res[f"{run}_events_ms"] = (time.perf_counter() - t_f) * 1e3
            res[f"{run}_events"] = n_events
        elif tool == "cupti":
            from graphscope import native

            ext = native.ensure_loaded()
            ext.tracer_start(False)  # buffers counted and handed back, nothing decoded
            for _ in range(N):
                g.replay()
            torch.cuda.synchronize()
            d = ext.tracer_stop()
            res[f"{run}_records"] = int(d["records"])
            res[f"{run}_breakdown_ms"] = {"cupti_flush": d["flush_ns"] / 1e6}
        else:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(N):
                    g.replay()
                torch.cuda.synchronize()
            res[f"{run}_records"] = sum(
                1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        res[f"{run}_s"] = time.perf_counter() - t0
        if tool == "graphscope":
            res[f"{run}_s"] -= res[f"{run}_events_ms"] / 1e3  # not part of tracing
        res[f"{run}_overhead_s"] = res[f"{run}_s"] - res[f"{run}_plain_s"]
    print("RESULT " + json.dumps(res), flush=True)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    models = sys.argv[2:] or ["mlp", "gpt", "transformer_encoder"]
    rows = []
    for m in models:
        pair = {}
        for tool in ("graphscope", "cupti", "profiler"):
            r = subprocess.run([sys.executable, __file__, "--worker", tool, m],
                               capture_output=True, text=True, timeout=300)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
            if r.returncode != 0 or not line:
                raise SystemExit(f"{tool} worker failed: {r.stderr[-2000:]}")
            pair[tool] = json.loads(line[0][7:])
        gs, pr, cu = pair["graphscope"], pair["profiler"], pair["cupti"]
        rows.append({
            "model": m, "replays": N, "work_nodes": gs["work_nodes"],
            "graphscope": gs, "cupti": cu, "profiler": pr,
            "speedup_cold": pr["cold_s"] / gs["cold_s"],
            "speedup_warm": pr["warm_s"] / gs["warm_s"],
            # the timeline target: overhead = traced - plain wall, profiler's over graphscope's
            "overhead_ms": {t: {r: pair[t][f"{r}_overhead_s"] * 1e3 for r in ("cold", "warm")}
                            for t in ("graphscope", "cupti", "profiler")},
            # graphscope's own cost: its overhead over CUPTI's floor (target: about 2 ms)
            "graphscope_over_cupti_ms": {r: (gs[f"{r}_overhead_s"] - cu[f"{r}_overhead_s"]) * 1e3
                                         for r in ("cold", "warm")},
            "overhead_ratio_cold": pr["cold_overhead_s"] / max(gs["cold_overhead_s"], 1e-6),
            "overhead_ratio_warm": pr["warm_overhead_s"] / max(gs["warm_overhead_s"], 1e-6),
        })
    write_json(out, {"bench": "timeline", "rows": rows})


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
