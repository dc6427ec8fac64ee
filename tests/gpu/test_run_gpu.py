"""``graphscope run`` on unmodified programs (sample_models/programs/), on the GPU: every
capture observed, graphs named by site/ordinal/shapes, 100% of work nodes tagged, replay
counts exact, the program's output and exit code its own."""

import json
import os
import subprocess
import sys

import pytest

from graphscope.model.graph import WORK_KINDS
from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.gpu
PROGRAMS = os.path.join(SAMPLES, "programs")


def graphscope_run(tmp_path, program, *opts, name="b"):
    out = tmp_path / name
    p = subprocess.run(
        [sys.executable, "-m", "graphscope", "run", "-o", str(out), *opts,
         os.path.join(PROGRAMS, program) if not program.startswith("-") else program],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    return p, out


def load(out):
    graph = json.loads((out / "graph.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    return graph["graphs"], manifest


def work(g):
    return [n for n in g["nodes"] if n["type"] in WORK_KINDS]


def test_decode_loop_two_buckets_named_by_site_and_shape(tmp_path):
    # GIVEN a decode loop that captures one graph per batch bucket (1 and 8), 40 replays each
    p, out = graphscope_run(tmp_path, "decode.py")
    # THEN the program ran as usual and both graphs are in the bundle, named by site and shape
    assert p.returncode == 0, p.stderr
    assert "decoded" in p.stdout
    graphs, manifest = load(out)
    names = [g["name"] for g in graphs]
    assert len(graphs) == 2, names
    # the static inputs: token ids [bucket, 1] and the position [1]
    assert names[0].startswith("decode.py:") and names[0].endswith("#0 [1,1] [1]"), names
    assert names[1].endswith("#1 [8,1] [1]"), names
    for g in graphs:
        assert g["info"]["replays"] == 40 and g["info"]["traced_replays"] == 20
        assert g["info"]["pool_bytes"] > 0
        w = work(g)
        tagged = [n for n in w if "module_name" in n.get("annotation", {})]
        assert len(tagged) == len(w), [n.get("op") for n in w if n not in tagged]
        mods = {n["annotation"]["module_name"] for n in w}
        assert "L.blocks.0.attn.qkv" in mods and "L.head" in mods
        assert all(n.get("source", "").startswith(os.path.join(PROGRAMS, "decode.py"))
                   for n in w if n.get("source"))
    assert manifest["mode"] == "run"
    # AND the tracing windows are in the manifest: CUPTI detached once the program was quiet,
    # or (a loop this short) still due when it ended
    tw = manifest["tracing_windows"]
    assert tw["windows"] >= 1 and (tw["cupti_detached"] >= 1 or tw["attached_at_end"]), tw
    assert "not_detached" not in tw, tw


def test_cupti_detached_after_each_window_and_the_program_captures_again(tmp_path):
    """A program replays its graph (3 traced: CUPTI detached as the window closes, since an
    attached CUPTI whose activity records were on slows later captures and eager launches),
    pauses, replays again, then captures a second graph and replays it (its own tracing
    window, CUPTI attached again, and detached after it): both graphs bundled, every traced
    replay joined."""
    prog = tmp_path / "pause.py"
    prog.write_text(
        "import time, torch\n"
        "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).cuda()\n"
        "x = torch.randn(8, 64, device='cuda')\n"
        "with torch.inference_mode():\n"
        "    m(x); torch.cuda.synchronize()\n"
        "    g = torch.cuda.CUDAGraph()\n"
        "    with torch.cuda.graph(g):\n"
        "        y = m(x)\n"
        "    for _ in range(4):\n"
        "        g.replay()\n"
        "    torch.cuda.synchronize(); time.sleep(0.8)\n"
        "    g.replay()\n"
        "    g2 = torch.cuda.CUDAGraph()\n"
        "    with torch.cuda.graph(g2):\n"
        "        z = m(y)\n"
        "    for _ in range(3):\n"
        "        g2.replay()\n"
        "    torch.cuda.synchronize()\n"
        "    print('done', torch.allclose(z, m(m(x)), atol=1e-4))\n")
    p, out = graphscope_run(tmp_path, str(prog), "--replays", "3")
    assert p.returncode == 0, p.stderr
    assert "done True" in p.stdout
    graphs, manifest = load(out)
    assert [g["info"]["traced_replays"] for g in graphs] == [3, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unjoined_records"] == 0 and summary["untraced_graphs"] == 0, summary
    assert all(g["median_ns"] for g in summary["graphs"]), summary["graphs"]
    tw = manifest["tracing_windows"]
    assert tw["windows"] == 2 and tw["cupti_detached"] == 2 and not tw.get("attached_at_end"), tw


def test_cupti_detached_while_the_program_replays_back_to_back(tmp_path):
    """A serving loop: 3 traced replays, then untraced replays launched back to back for a
    second, never synchronized: CUPTI is detached at one of them, with earlier ones still
    running on the GPU. Before the detach synchronized, the next launch crashed (SIGSEGV, the
    67-bucket ladder of bench/bench_ladder.py); the program's results are right."""
    prog = tmp_path / "serve.py"
    prog.write_text(
        "import time, torch\n"
        "m = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).cuda()\n"
        "x = torch.randn(256, 512, device='cuda')\n"
        "with torch.inference_mode():\n"
        "    m(x); torch.cuda.synchronize()\n"
        "    g = torch.cuda.CUDAGraph()\n"
        "    with torch.cuda.graph(g):\n"
        "        y = m(x)\n"
        "    t = time.perf_counter()\n"
        "    n = 0\n"
        "    while time.perf_counter() - t < 1.2:\n"
        "        g.replay(); n += 1\n"
        "    torch.cuda.synchronize()\n"
        "    print('done', n > 3, torch.allclose(y, m(x), atol=1e-3))\n")
    p, out = graphscope_run(tmp_path, str(prog), "--replays", "3")
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    assert "done True True" in p.stdout
    graphs, manifest = load(out)
    assert [g["info"]["traced_replays"] for g in graphs] == [3]
    tw = manifest["tracing_windows"]
    assert tw["windows"] == 1 and tw["cupti_detached"] == 1 and not tw.get("attached_at_end"), tw


def test_whole_training_step_optimizer_is_its_own_scope(tmp_path):
    p, out = graphscope_run(tmp_path, "whole_network.py")
    assert p.returncode == 0, p.stderr
    (g,) = load(out)[0]
    assert g["info"]["replays"] == 30
    w = work(g)
    phases = {n["annotation"].get("autograd_phase", "forward") for n in w if n.get("annotation")}
    assert phases == {"forward", "backward", "optimizer"}, phases
    opt = [n for n in w if n["annotation"].get("module_name") == "(optimizer)"]
    assert opt and all(n["annotation"]["autograd_phase"] == "optimizer" for n in opt)
    assert all("module_name" in n.get("annotation", {}) for n in w), \
        [(n.get("op"), n.get("source")) for n in w if "module_name" not in n.get("annotation", {})]


def test_amp_adamw_step(tmp_path):
    p, out = graphscope_run(tmp_path, "train_step_amp.py")
    assert p.returncode == 0, p.stderr
    (g,) = load(out)[0]
    w = work(g)
    mods = {n["annotation"].get("module_name") for n in w if n.get("annotation")}
    assert "(optimizer)" in mods and "(CrossEntropyLoss)" in mods and "L.0" in mods
    untagged = [(n.get("op"), n.get("source")) for n in w
                if "module_name" not in n.get("annotation", {})]
    assert not untagged, untagged  # zero_grad fills: (optimizer); .grad accumulation: owner
    acc = [n for n in w if n["annotation"].get("accumulate_grad")]
    assert acc and all(n["annotation"]["autograd_phase"] == "backward" for n in acc)


def test_graphed_callables_four_graphs(tmp_path):
    p, out = graphscope_run(tmp_path, "partial_network.py")
    assert p.returncode == 0, p.stderr
    graphs, _ = load(out)
    assert len(graphs) == 6  # forward + backward graph of each of the three modules
    assert sum(g["info"]["replays"] for g in graphs) == 30 * 2 * 2
    for g in graphs:
        w = work(g)
        assert all("module_name" in n.get("annotation", {}) for n in w), g["name"]


def test_torch_compile_reduce_overhead_inductor_provenance(tmp_path):
    p, out = graphscope_run(tmp_path, "compiled.py")
    assert p.returncode == 0, p.stderr
    graphs, _ = load(out)
    assert graphs, p.stderr
    w = [n for g in graphs for n in work(g)]
    placed = [n for n in w if n.get("annotation", {}).get("module_source") == "inductor"]
    assert placed, [(n.get("op"), n.get("source")) for n in w]
    mods = {n["annotation"]["module_name"] for n in placed}
    assert any(m.startswith("L.fc") for m in mods), mods
    for n in w:  # nothing unplaced without saying why
        a = n.get("annotation", {})
        assert "module_name" in a or "unplaced_reason" in a, n


def test_exit_code_and_exception_still_write(tmp_path):
    prog = tmp_path / "boom.py"
    prog.write_text(
        "import sys, torch\n"
        "x = torch.ones(4, device='cuda')\n"
        "g = torch.cuda.CUDAGraph()\n"
        "with torch.cuda.graph(g):\n    y = x * 2\n"
        "g.replay()\n"
        "print('argv', sys.argv[1:])\n"
        "raise SystemExit(3)\n")
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(tmp_path / "b"),
                        str(prog), "--flag", "v"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr
    assert "argv ['--flag', 'v']" in p.stdout
    graphs, _ = load(tmp_path / "b")
    assert len(graphs) == 1 and graphs[0]["info"]["replays"] == 1


def test_no_graph_one_line_and_no_bundle(tmp_path):
    prog = tmp_path / "eager.py"
    prog.write_text("import torch\nprint((torch.ones(3, device='cuda') * 2).sum().item())\n")
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(tmp_path / "b"),
                        str(prog)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0
    assert "captured no CUDA graph" in p.stderr
    assert not (tmp_path / "b").exists()


def test_profile_context_manager_and_next_capture_works(tmp_path):
    code = f"""
import torch, graphscope
m = torch.nn.Linear(64, 64).cuda()
x = torch.randn(8, 64, device='cuda')
with graphscope.profile(output={str(tmp_path / 'p')!r}, replays=5) as prof:
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        m(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        y = m(x)
    for _ in range(7):
        g.replay()
print('BUNDLE', prof.bundle_path)
# afterwards: torch untouched, torch.profiler still records GPU work
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as p:
    m(x); torch.cuda.synchronize()
print('GPU_EVENTS', sum(1 for e in p.events() if e.device_type.name == 'CUDA'))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "BUNDLE" in p.stdout
    gpu = int(p.stdout.split("GPU_EVENTS")[1].split()[0])
    assert gpu > 0
    (g,) = load(tmp_path / "p")[0]
    assert g["info"]["replays"] == 7 and g["info"]["traced_replays"] == 5
    assert {n["annotation"]["module_name"] for n in work(g)} == {"L"}


def test_report_lists_graphs_and_takes_graph(tmp_path):
    p, out = graphscope_run(tmp_path, "decode.py")
    assert p.returncode == 0, p.stderr
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", str(out), "--graph",
                        "#1", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert len(s["graphs"]) == 1 and "[8,1]" in s["graphs"][0]["name"]


def test_a_program_that_profiles_itself_gets_its_trace_annotated(tmp_path):
    """The user's flow for traces: a program captures a training step, replays it under its own
    torch.profiler on a schedule and exports the trace. `graphscope run` bundles the graph,
    traces the replays before the profiler starts and leaves the whole profiler session alone,
    its wait and warm-up steps included (the program runs on; the trace keeps its GPU
    kernels); `graphscope annotate-trace` then joins the bundle onto that trace (torch 2.11's
    traces carry no graph node ids: each launch is matched to the bundle by its kernel
    sequence)."""
    trace = tmp_path / "trace.json"
    p = subprocess.run(
        [sys.executable, "-m", "graphscope", "run", "-o", str(tmp_path / "b"),
         os.path.join(PROGRAMS, "profiled.py"), str(trace)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "profiled 5 replays" in p.stdout
    assert "some replays not traced (torch.profiler is active" in p.stderr, p.stderr
    graphs, _ = load(tmp_path / "b")
    assert len(graphs) == 1
    g = graphs[0]
    # 3 replays before the profiler, traced; 8 in its session (wait, warm-up, 5 recorded, one
    # more), none traced: graphscope stays off CUPTI for the whole session
    assert g["info"]["replays"] == 11 and g["info"]["traced_replays"] == 3
    graph_kernels = [n for n in work(g) if n["type"] == "kernel"]
    with_module = [n for n in graph_kernels if "module_name" in n.get("annotation", {})]
    assert {n["annotation"]["module_name"] for n in with_module} >= {
        "L.0", "L.2", "(optimizer)"}
    kernels = [e for e in json.loads(trace.read_text())["traceEvents"]
               if e.get("cat") == "kernel"]
    assert len(kernels) == 5 * len(graph_kernels)  # the profiler saw every replayed kernel
    out = tmp_path / "annotated.json"
    a = subprocess.run([sys.executable, "-m", "graphscope", "annotate-trace", str(trace), "-a",
                        str(tmp_path / "b"), "-o", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert a.returncode == 0, a.stderr
    assert "(100.0%)" in a.stdout, a.stdout
    got = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert len(got) == len(kernels)
    assert sum("module_name" in e["args"] for e in got) == 5 * len(with_module)
    assert all(e["args"].get("op", "").startswith("aten::") for e in got)
