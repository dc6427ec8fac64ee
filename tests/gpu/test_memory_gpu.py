"""On the GPU: a program's bucket ladder in one shared pool reports the pool once with
the right total, memory by module adds up to the pool's allocated bytes, every graph has its
capture and instantiate time, and the ladder view lists every bucket; model-file captures
(step, forward, callables) record the same facts."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96]

PROGRAM = textwrap.dedent('''
    import json, torch
    from torch import nn

    SIZES = %r


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(512)
            self.up = nn.Linear(512, 2048)
            self.down = nn.Linear(2048, 512)

        def forward(self, x):
            return x + self.down(torch.relu(self.up(self.ln(x))))


    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(1000, 512)
            self.blocks = nn.ModuleList(Block() for _ in range(4))
            self.head = nn.Linear(512, 1000)

        def forward(self, tok):
            x = self.embed(tok)
            for b in self.blocks:
                x = b(x)
            return self.head(x)


    model = Decoder().cuda().eval()
    tok = torch.zeros(max(SIZES), dtype=torch.long, device="cuda")
    pool = torch.cuda.graph_pool_handle()
    graphs, outs = {}, {}
    with torch.inference_mode():
        for bs in SIZES:
            model(tok[:bs])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # as torch.cuda.graph does on entry: only the pool grows
        before = torch.cuda.memory_reserved()
        for bs in reversed(SIZES):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                outs[bs] = model(tok[:bs])
            graphs[bs] = g
        torch.cuda.synchronize()
        reserved = torch.cuda.memory_reserved() - before
        segs = [s for s in torch.cuda.memory_snapshot()
                if tuple(s.get("segment_pool_id", ())) == tuple(pool)]
        allocated = sum(s["allocated_size"] for s in segs)
        pool_reserved = sum(s["total_size"] for s in segs)
        others = {}  # segments of other pools, by pool (what the captures reserved outside)
        for s in torch.cuda.memory_snapshot():
            if tuple(s.get("segment_pool_id", ())) != tuple(pool):
                k = str(tuple(s.get("segment_pool_id", ()))) + " " + str(s.get("stream"))
                others[k] = others.get(k, 0) + s["total_size"]
    for bs in SIZES[:-2]:  # the two largest buckets are never replayed
        for _ in range(3):
            graphs[bs].replay()
    torch.cuda.synchronize()
    print("FACTS", json.dumps({"reserved": reserved, "allocated": allocated,
                               "pool_reserved": pool_reserved, "other_segments": others}))
''') % (SIZES,)


def _graphscope_run(tmp_path, source, tag):
    """``graphscope run`` of the program ``source``: its bundle and the JSON it printed on
    its line starting with ``tag``."""
    prog = tmp_path / "prog.py"
    prog.write_text(source)
    out = tmp_path / "b"
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(out), str(prog)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return out, json.loads(next(ln for ln in p.stdout.splitlines()
                                if ln.startswith(tag)).split(" ", 1)[1])


def _run(tmp_path):
    out, facts = _graphscope_run(tmp_path, PROGRAM, "FACTS")
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", str(out), "--json",
                        "--no-diagnosis"], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out, facts, json.loads(r.stdout)


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    out, facts, s = _run(tmp_path_factory.mktemp("ladder"))
    keep = os.environ.get("GRAPHSCOPE_KEEP_LADDER")  # to record it as tests/data/run_ladder
    if keep:
        import shutil

        shutil.copytree(out, keep, dirs_exist_ok=True)
        Path(keep.rstrip("/") + ".facts.json").write_text(json.dumps(facts))
    return out, facts, s


def test_shared_pool_once_with_the_reserved_total(ladder_run):
    _, facts, s = ladder_run
    mem = s["memory"]
    assert len(s["graphs"]) == len(SIZES)
    (pool,) = mem["pools"]  # ten graphs, one pool, shown once
    assert len(pool["graphs"]) == len(SIZES)
    print(facts, {k: v for k, v in mem.items() if k not in ("graphs", "by_module")})
    # the pool's reserved bytes: its segments, as torch's own snapshot lists them
    assert pool["reserved_bytes"] == facts["pool_reserved"]
    assert mem["total_reserved_bytes"] == facts["pool_reserved"]
    assert pool["allocated_bytes"] == facts["allocated"]
    assert sum(g["capture_segment_bytes"] for g in mem["graphs"]) == facts["pool_reserved"]
    # and pools plus what the captures reserved outside them: all that
    # torch.cuda.memory_reserved grew by during the capture loop
    assert mem["total_reserved_bytes"] + (mem["outside_pools_bytes"] or 0) == facts["reserved"]


def test_memory_by_module_sums_to_the_pools_allocated_bytes(ladder_run):
    _, facts, s = ladder_run
    top = [r for r in s["memory"]["by_module"] if r["level"] == 0]
    held = sum(r["held_bytes"] for r in top)
    assert held == pytest.approx(facts["allocated"], rel=0.05)
    rows = {r["module"]: r for r in s["memory"]["by_module"]}
    # the blocks' activations are attributed to them, not lumped outside every module
    assert rows["L.blocks"]["alloc_bytes"] > rows.get("(outside modules)",
                                                      {"alloc_bytes": 0})["alloc_bytes"]


def test_capture_and_instantiate_times_for_every_graph(ladder_run):
    _, _, s = ladder_run
    for g in s["memory"]["graphs"]:
        assert g["capture_s"] > 0 and g["instantiate_s"] > 0, g
    assert s["memory"]["capture_s"] > 0
    assert any(r["capture_s"] > 0 for r in s["memory"]["by_module"] if r["module"] == "L")


def test_static_inputs_and_outputs_per_bucket(ladder_run):
    _, _, s = ladder_run
    rows = {g["name"]: g for g in s["memory"]["graphs"]}
    seen = 0
    for bs in SIZES:
        (row,) = [r for n, r in rows.items() if n.endswith(f" [{bs}]")]
        print(bs, row.get("static_input_bytes"), row.get("static_output_bytes"))
        assert row["static_input_bytes"] == bs * 8  # tok[:bs], int64
        assert row["static_output_bytes"] == bs * 1000 * 4  # the head's fp32 logits
        seen += 1
    assert seen == len(SIZES)


def test_ladder_view(ladder_run):
    out, _, s = ladder_run
    (site,) = s["ladder"]
    assert [b["batch"] for b in site["buckets"]] == SIZES
    assert len(site["never_replayed"]) == 2
    assert all(b["ns_per_row"] for b in site["buckets"] if b["replays"])
    t = subprocess.run([sys.executable, "-m", "graphscope", "report", str(out),
                        "--no-diagnosis"], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert "Bucket ladder" in t.stdout and "Memory pools" in t.stdout
    assert "1 pool(s)" in t.stdout


@pytest.mark.parametrize("mode,model", [("forward", "sample_models/decode_kv.py"),
                                        ("step", "sample_models/mlp.py"),
                                        ("callables", "sample_models/mlp.py")])
def test_model_file_captures_record_cost_and_pools(tmp_path, mode, model):
    out = tmp_path / mode
    p = subprocess.run([sys.executable, "-m", "graphscope", "capture", "--mode", mode,
                        "-o", str(out), os.path.join(ROOT, model)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    s = json.loads(subprocess.run([sys.executable, "-m", "graphscope", "report", str(out),
                                   "--json", "--no-diagnosis"], capture_output=True,
                                  text=True, timeout=300, cwd=ROOT).stdout)
    mem = s["memory"]
    assert mem["total_reserved_bytes"] > 0
    for g in mem["graphs"]:
        assert "pool" in g
        if mode != "callables":  # make_graphed_callables is timed as one window
            assert g["capture_s"] > 0 and g["instantiate_s"] > 0
            assert g["static_input_bytes"] > 0 and g["static_output_bytes"] > 0, g
    if mode == "callables":
        assert len(mem["pools"]) == 1 and mem["capture_s"] > 0  # fwd and bwd share a pool
    else:
        assert mem["by_module"]


OWN_HISTORY = textwrap.dedent('''
    import json, torch
    from torch import nn

    torch.cuda.memory._record_memory_history("all", context=None, stacks="python")
    m = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256)).cuda().eval()
    x = torch.zeros(8, 256, device="cuda")
    with torch.inference_mode():
        m(x)
        torch.cuda.synchronize()
        graphs = []
        for bs in (8, 4):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = m(x[:bs])
            graphs.append((g, y))
        for g, _ in graphs:
            g.replay()
        torch.cuda.synchronize()
        late = torch.empty(12345, device="cuda")  # after the captures and the first replay
    traces = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    seen = any(e["action"] == "alloc" and e["size"] >= late.nbytes for e in traces)
    print("OWN", json.dumps({"late_recorded": seen}))
''')


def test_the_tracker_leaves_a_programs_own_allocator_history_on(tmp_path):
    """Where graphscope.native._alloctrace is built (the GPU machine's build), memory by module
    comes
    from it and not from torch's allocator history: a program's own history session runs on
    through its captures under graphscope run (the history, graphscope's fallback, ends it),
    and the graphs still have their memory by module."""
    from graphscope import native

    assert native.alloc_tracker() is not None, native.alloc_tracker_why()
    out, own = _graphscope_run(tmp_path, OWN_HISTORY, "OWN")
    assert own["late_recorded"], "graphscope ended the program's own allocator history"
    s = json.loads(subprocess.run([sys.executable, "-m", "graphscope", "report", str(out),
                                   "--json", "--no-diagnosis"], capture_output=True,
                                  text=True, timeout=300, cwd=ROOT).stdout)
    names = {r["module"] for r in s["memory"]["by_module"]}
    assert any(n.startswith("L") for n in names), names
    assert all(g.get("capture_alloc_bytes", 0) > 0 for g in s["memory"]["graphs"])
