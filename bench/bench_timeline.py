"""Timeline cost: graphscope's traced replays vs torch.profiler on the same replays (issue 4).

One process, side by side: N plain replays; N replays under graphscope's CUPTI tracer (+ join);
then N replays under torch.profiler (CUDA activities). graphscope runs first: torch.profiler
would otherwise hold CUPTI. Writes JSON to argv[1].
"""

import json
import os
import sys
import time

import torch

from graphscope.capture import run_capture, trace_replays
from graphscope.config import CaptureConfig

N = 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "/tmp/gs-bench"
    rows = []
    for model in ("mlp", "gpt"):
        cfg = CaptureConfig(model=os.path.join(ROOT, "sample_models", f"{model}.py"), replays=0,
                            output=os.path.join(out_dir, model), force=True).validate()
        res = run_capture(cfg, timing=False)
        rows.append({"model": model, "phases_s": res.phases_s,
                     "work_nodes": res.summary["work_nodes"]})
    # the step graph of the last capture is not kept by run_capture: capture gpt again here
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpt", os.path.join(ROOT, "sample_models/gpt.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = mod.graphscope_model()
    model, (idx,), loss = d["model"].cuda(), d["args"], d["loss"]
    idx = idx.cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            loss(model(idx)).backward()
    torch.cuda.current_stream().wait_stream(s)
    for p in model.parameters():
        p.grad = None
    g = torch.cuda.CUDAGraph(keep_graph=True)
    import graphscope
    from graphscope import native
    from graphscope.capture import _node_table

    with graphscope.graph(g, enable_annotations=True) as cap:
        loss(model(idx)).backward()
    ins = native.inspect_graph(g.raw_cuda_graph())
    g.instantiate()
    graphs = [_node_table("step", ins, cap.records, native.exec_id(g.raw_cuda_graph_exec()))]
    g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(N):
        g.replay()
    torch.cuda.synchronize()
    plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    jr = trace_replays(g.replay, graphs, N, 3)
    traced = time.perf_counter() - t0
    from torch.profiler import ProfilerActivity, profile

    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(N):
            g.replay()
        torch.cuda.synchronize()
    n_prof = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    profiled = time.perf_counter() - t0
    result = {
        "bench": "timeline",
        "replays": N,
        "graph_work_nodes": sum(1 for n in graphs[0].nodes if n.is_work),
        "plain_s": plain,
        "graphscope_traced_s": traced,
        "graphscope_joined_records": jr.joined_records,
        "graphscope_unjoined": jr.unjoined_records,
        "torch_profiler_s": profiled,
        "torch_profiler_gpu_events": n_prof,
        "overhead_graphscope_s": traced - plain,
        "overhead_profiler_s": profiled - plain,
        "speedup_total": profiled / traced,
        "speedup_overhead": (profiled - plain) / max(traced - plain, 1e-9),
        "capture_phases": rows,
    }
    text = json.dumps(result, indent=1)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
