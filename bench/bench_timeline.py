"""Timeline cost: graphscope's traced replays vs torch.profiler on the same replays (issue 4).

Each tool runs in a fresh process (each pays its own first-use cost, as a user would) on the
same step graph of a sample model: N plain replays, then N replays under the tool, twice
(cold = first use in the process, warm = second). graphscope's time includes joining every
record onto the captured nodes; torch.profiler's includes building its event list.
Usage: bench_timeline.py OUT.json [MODEL ...]
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
    from graphscope import native
    from graphscope.capture import _node_table, _to_cuda, default_loss
    from graphscope.loader import load_model_file

    spec = load_model_file(os.path.join(ROOT, "sample_models", f"{model_name}.py"))
    model, args = spec.model.cuda(), _to_cuda(spec.args)
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
    ins = native.inspect_graph(g.raw_cuda_graph())
    g.instantiate()
    table = _node_table("step", ins, cap.records, native.exec_id(g.raw_cuda_graph_exec()))
    return g, [table]


def worker(tool, model_name):
    import torch

    g, graphs = _graph(model_name)
    g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(N):
        g.replay()
    torch.cuda.synchronize()
    res = {"tool": tool, "model": model_name, "plain_s": time.perf_counter() - t0,
           "work_nodes": sum(1 for n in graphs[0].nodes if n.is_work)}
    for run in ("cold", "warm"):
        t0 = time.perf_counter()
        if tool == "graphscope":
            from graphscope import native
            from graphscope.graphs.join import join

            ext = native.ensure_loaded()
            t_a = time.perf_counter()
            ext.tracer_start()
            t_b = time.perf_counter()
            for _ in range(N):
                g.replay()
            torch.cuda.synchronize()
            t_c = time.perf_counter()
            raw = ext.tracer_stop()
            t_d = time.perf_counter()
            gn = native._col(raw["graph_node_id"], "<u8")
            ids = {n.exec_node_id: "step" for n in graphs[0].nodes if n.is_work}
            jr = join(gn, native._col(raw["correlation"], "<u4"), native._col(raw["start"], "<u8"),
                      native._col(raw["end"], "<u8"), native._col(raw["stream"], "<u4"),
                      native._col(raw["kind"], "<i4"), ids, 3)
            t_e = time.perf_counter()
            res[f"{run}_breakdown_ms"] = {"tracer_start": (t_b - t_a) * 1e3,
                                          "replays": (t_c - t_b) * 1e3,
                                          "tracer_stop_decode": (t_d - t_c) * 1e3,
                                          "join": (t_e - t_d) * 1e3}
            res[f"{run}_records"] = jr.joined_records
            res[f"{run}_unjoined"] = jr.unjoined_records
        else:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(N):
                    g.replay()
                torch.cuda.synchronize()
            res[f"{run}_records"] = sum(
                1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        res[f"{run}_s"] = time.perf_counter() - t0
    print("RESULT " + json.dumps(res), flush=True)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    models = sys.argv[2:] or ["mlp", "gpt"]
    rows = []
    for m in models:
        pair = {}
        for tool in ("graphscope", "profiler"):
            r = subprocess.run([sys.executable, __file__, "--worker", tool, m],
                               capture_output=True, text=True, timeout=300)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
            if r.returncode != 0 or not line:
                raise SystemExit(f"{tool} worker failed: {r.stderr[-2000:]}")
            pair[tool] = json.loads(line[0][7:])
        gs, pr = pair["graphscope"], pair["profiler"]
        rows.append({
            "model": m, "replays": N, "work_nodes": gs["work_nodes"],
            "graphscope": gs, "profiler": pr,
            "speedup_cold": pr["cold_s"] / gs["cold_s"],
            "speedup_warm": pr["warm_s"] / gs["warm_s"],
        })
    write_json(out, {"bench": "timeline", "rows": rows})


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
