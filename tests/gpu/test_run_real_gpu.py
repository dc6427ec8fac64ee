"""``graphscope run`` on programs built from real model libraries (torchvision, timm,
transformers; random weights, no downloads), each capturing its own graph."""

import json
import subprocess
import sys
import textwrap

import pytest

from graphscope.model.graph import WORK_KINDS
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

TRAIN = """
import torch
{build}
opt = torch.optim.SGD(model.parameters(), lr=0.01)
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss = {loss}
        loss.backward(); opt.step()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g):
    loss = {loss}
    loss.backward(); opt.step()
for _ in range(25):
    g.replay()
torch.cuda.synchronize()
print("ok", float(loss))
"""

PROGRAMS = {
    "resnet18": dict(
        build="import torchvision\nmodel = torchvision.models.resnet18(num_classes=10).cuda()\n"
              "x = torch.randn(16, 3, 64, 64, device='cuda')\n"
              "y = torch.randint(0, 10, (16,), device='cuda')\n"
              "crit = torch.nn.CrossEntropyLoss()",
        loss="crit(model(x), y)", module="torchvision"),
    "vit_tiny": dict(
        build="import timm\nmodel = timm.create_model('vit_tiny_patch16_224', pretrained=False,"
              " num_classes=10, img_size=64).cuda()\n"
              "x = torch.randn(8, 3, 64, 64, device='cuda')\n"
              "y = torch.randint(0, 10, (8,), device='cuda')\n"
              "crit = torch.nn.CrossEntropyLoss()",
        loss="crit(model(x), y)", module="timm"),
    "gpt2": dict(
        build="from transformers import GPT2Config, GPT2LMHeadModel\n"
              "model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4,"
              " vocab_size=1000, n_positions=64)).cuda()\n"
              "ids = torch.randint(0, 1000, (4, 32), device='cuda')",
        loss="model(input_ids=ids, labels=ids).loss", module="transformers"),
}


def run_real_model(tmp_path, name):
    """``graphscope run`` of the training step of real model ``name``; the bundle's path."""
    spec = PROGRAMS[name]
    pytest.importorskip(spec["module"])
    prog = tmp_path / f"{name}.py"
    prog.write_text(textwrap.dedent(TRAIN.format(build=spec["build"], loss=spec["loss"])))
    out = tmp_path / "b"
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(out), str(prog)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_real_model_training_step(tmp_path, name):
    out = run_real_model(tmp_path, name)
    (g,) = json.loads((out / "graph.json").read_text())["graphs"]
    w = [n for n in g["nodes"] if n["type"] in WORK_KINDS]
    tagged = [n for n in w if "module_name" in n.get("annotation", {})]
    phases = {n["annotation"].get("autograd_phase", "forward") for n in tagged}
    untagged = [(n.get("op"), n.get("source")) for n in w if n not in tagged]
    print(f"{name}: {len(w)} work nodes, {len(tagged)} tagged, phases {sorted(phases)}, "
          f"untagged {untagged[:5]}")
    assert {"forward", "backward", "optimizer"} <= phases
    assert len(tagged) >= 0.97 * len(w), untagged[:10]
    assert all("unplaced_reason" in n.get("annotation", {}) for n in w if n not in tagged)
    assert g["info"]["replays"] == 25


# A serving ladder of a real model: one graph per batch bucket in one shared pool, largest
# first, as vLLM and SGLang capture theirs; each replayed bucket's output checked against eager
LADDER = """
import json, torch
{build}
model.eval()
SIZES = [1, 2, 4, 8, 12, 16, 24, 32]
pool = torch.cuda.graph_pool_handle()
graphs, outs = {{}}, {{}}
with torch.inference_mode():
    for bs in SIZES:
        fwd(bs)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    for bs in reversed(SIZES):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            outs[bs] = fwd(bs)
        graphs[bs] = g
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved() - before
    segs = [s for s in torch.cuda.memory_snapshot()
            if tuple(s.get("segment_pool_id", ())) == tuple(pool)]
    worst = 0.0
    for bs in SIZES[:-1]:  # the largest bucket is never replayed
        for _ in range(3):
            graphs[bs].replay()
        torch.cuda.synchronize()  # a bucket's output is read before the next one's replay
        worst = max(worst, float((outs[bs] - fwd(bs)).abs().max()))
print("FACTS", json.dumps({{"reserved": reserved, "worst": worst, "sizes": SIZES,
                           "allocated": sum(s["allocated_size"] for s in segs),
                           "pool_reserved": sum(s["total_size"] for s in segs)}}))
"""

LADDERS = {
    "gpt2": dict(
        build="from transformers import GPT2Config, GPT2LMHeadModel\n"
              "model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=4,"
              " vocab_size=1000, n_positions=64)).cuda()\n"
              "ids = torch.randint(0, 1000, (32, 16), device='cuda')\n"
              "def fwd(bs):\n"
              "    return model(input_ids=ids[:bs], use_cache=False).logits",
        # per batch row: input_ids (16 int64), the logits (16 x 1000 fp32)
        module="transformers", inside="transformer.h", row_in=16 * 8, row_out=16 * 1000 * 4),
    "resnet18": dict(
        build="import torchvision\nmodel = torchvision.models.resnet18(num_classes=10).cuda()\n"
              "x = torch.randn(32, 3, 64, 64, device='cuda')\n"
              "def fwd(bs):\n"
              "    return model(x[:bs])",
        module="torchvision", inside="layer1", row_in=3 * 64 * 64 * 4, row_out=10 * 4),
}


@pytest.mark.parametrize("name", sorted(LADDERS))
def test_real_model_bucket_ladder(tmp_path, name):
    """A real model's serving ladder under ``graphscope run``: every bucket in the ladder view
    at its batch size, the shared pool once with the bytes torch's own snapshot gives it,
    memory by module adding up to the pool's allocated bytes inside the model's own modules,
    and the program's outputs unchanged."""
    spec = LADDERS[name]
    pytest.importorskip(spec["module"])
    prog = tmp_path / f"{name}_ladder.py"
    prog.write_text(textwrap.dedent(LADDER.format(build=spec["build"])))
    out = tmp_path / "b"
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(out), str(prog)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    facts = json.loads(next(ln for ln in p.stdout.splitlines()
                            if ln.startswith("FACTS")).split(" ", 1)[1])
    assert facts["worst"] <= 1e-3, facts  # graphscope changed nothing the graphs compute
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", str(out), "--json",
                        "--no-diagnosis"], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    (site,) = s["ladder"]
    print(name, [(b["batch"], b["replays"], b["kernels"], b["structure"], b["scopes_from"])
                 for b in site["buckets"]], site["structures"])
    assert [b["batch"] for b in site["buckets"]] == facts["sizes"]
    assert site["never_replayed"] == [b["name"] for b in site["buckets"]
                                      if b["batch"] == max(facts["sizes"])]
    assert all(b["ns_per_row"] and b["capture_s"] and b["instantiate_s"]
               for b in site["buckets"] if b["replays"])
    mem = s["memory"]
    (pool,) = mem["pools"]
    assert len(pool["graphs"]) == len(facts["sizes"])
    assert pool["reserved_bytes"] == facts["pool_reserved"]
    assert pool["allocated_bytes"] == facts["allocated"]
    assert mem["total_reserved_bytes"] + (mem["outside_pools_bytes"] or 0) == facts["reserved"]
    top = [m for m in mem["by_module"] if m["level"] == 0]
    assert sum(m["held_bytes"] for m in top) == pytest.approx(facts["allocated"], rel=0.05)
    inside = sum(m["alloc_bytes"] for m in mem["by_module"] if spec["inside"] in m["module"])
    assert inside > 0, [m["module"] for m in mem["by_module"]][:20]
    # each bucket's static inputs and outputs, at its batch size
    for g in mem["graphs"]:
        bs = next(b["batch"] for b in site["buckets"] if b["name"] == g["name"])
        assert (g["static_input_bytes"], g["static_output_bytes"]) == (
            bs * spec["row_in"], bs * spec["row_out"]), g
