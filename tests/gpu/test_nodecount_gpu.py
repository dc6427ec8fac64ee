"""Node counting on the GPU: ``graphscope run`` records captures by the capture graph's node
count at each scope and op change (no CUPTI subscription, graphscope/nodecount.py): a site's
first counted capture walks the graph at every note and compares the capture stream's
dependencies, its later ones read the dependencies alone where the two agreed. By default
every capture begun with grad off is counted, ops included: against CUPTI in every capture
(``GRAPHSCOPE_NODE_COUNTS=0``), bundle against bundle, node for node, scope, op, shapes and
source line. ``=learned`` counts a site's captures past its first ``--op-captures``: captured
again at the same shapes, a counted graph must carry exactly the scopes CUPTI's callbacks gave
the site's first captures. Programs: a real transformer (transformers' GPT-2, random weights)
and a module with a side stream and a mark_kernels region."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from graphscope.model.graph import WORK_KINDS
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

PROGRAM = """
import sys
import torch
from torch import nn
import graphscope

which = sys.argv[1]
if which == "gpt2":
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config(n_layer=3, n_embd=128, n_head=4, vocab_size=1000,
                                       n_positions=64)).cuda().eval()
    x = torch.randint(0, 1000, (4, 32), device="cuda")
    fwd = lambda: model(input_ids=x).logits
else:
    SIDE = torch.cuda.Stream()

    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

        def forward(self, x):
            SIDE.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(SIDE):
                y = self.b(x)
            z = self.a(x)
            torch.cuda.current_stream().wait_stream(SIDE)
            with graphscope.mark_kernels("mix"):
                return torch.relu(z * y)

    model = nn.Sequential(nn.Linear(64, 64), Branches(), nn.LayerNorm(64)).cuda()
    x = torch.randn(8, 64, device="cuda")
    fwd = lambda: model(x)
graphs = []
with torch.inference_mode():
    fwd()
    torch.cuda.synchronize()
    for _ in range(4):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fwd()
        graphs.append(g)
for g in graphs:
    g.replay()
torch.cuda.synchronize()
print("ok")
"""


def run(tmp_path, which, module, counts=None, name="b"):
    pytest.importorskip(module)
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(PROGRAM))
    out = tmp_path / name
    env = dict(os.environ)
    if counts is not None:
        env["GRAPHSCOPE_NODE_COUNTS"] = counts
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(out), str(prog),
                        which], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((out / "graph.json").read_text())["graphs"]


def scopes(g):
    return [(n["type"], n.get("annotation", {})) for n in g["nodes"]]


@pytest.mark.parametrize("which,module", [("gpt2", "transformers"), ("branches", "torch")])
def test_counted_captures_carry_cuptis_scopes_node_for_node(tmp_path, which, module):
    graphs = run(tmp_path, which, module, counts="learned")
    assert len(graphs) == 4
    # GIVEN the site's first 2 captures recorded by CUPTI (ops too), the next 2 counted
    assert [g["info"].get("scopes_from") for g in graphs] == [None, None, "node_counts",
                                                                "node_counts"]
    assert [g["info"].get("ops_recorded", True) for g in graphs] == [True, True, False, False]
    # THEN every node of a counted capture has the scope CUPTI gave the same node of the first
    ref = scopes(graphs[0])
    assert scopes(graphs[1]) == ref
    work = [a for t, a in ref if t in WORK_KINDS]
    assert work and all("module_name" in a for a in work), work
    for g in graphs[2:]:
        assert scopes(g) == ref
    if which == "branches":  # the side stream's kernels and the mark_kernels region
        names = {a.get("module_name") for a in work}
        assert {"L.1.a", "L.1.b", "L.2"} <= names, names
        assert any(a.get("name") == "mix" for a in work), work


def full(g):
    return [(n["type"], n.get("annotation", {}), n.get("op"), n.get("shapes"), n.get("source"))
            for n in g["nodes"]]


@pytest.mark.parametrize("which,module", [("gpt2", "transformers"), ("branches", "torch")])
def test_counting_every_capture_gives_cuptis_scopes_and_ops(tmp_path, which, module):
    # GIVEN the same inference program run with CUPTI in every capture and as graphscope run
    # records it by default: node counts in every capture (ops in the first 2, by op marks)
    cupti = run(tmp_path, which, module, counts="0", name="cupti")
    counted = run(tmp_path, which, module, name="counted")
    assert [g["info"].get("scopes_from") for g in cupti] == [None] * 4
    assert [g["info"].get("scopes_from") for g in counted] == ["node_counts"] * 4
    # AND the first counted capture walked the graph at every note and compared the capture
    # stream's dependencies; on one stream they agree and the later captures use them alone
    by = [g["info"].get("node_counts_by") for g in counted]
    assert by[0] == "walk_verified", by
    if which == "gpt2":
        assert by[1:] == ["stream_deps"] * 3, by
    assert set(by[1:]) <= {"stream_deps", "walk"}, by
    # THEN graph for graph, node for node: the same scope, aten op, shapes and source line
    for a, b in zip(cupti, counted):
        assert full(b) == full(a)
    assert any(op for _, _, op, _, _ in full(counted[0])), "no ops in the first capture"
