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
