"""One module-naming rule on the GPU: the same sample model, captured from its model file
(`graphscope capture`) and from an unmodified program (`graphscope run`), names the same
modules (annotate/modules.py: the root ``L``, ``L.<path>`` below it)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.gpu

PROGRAM = """
import sys
import torch
sys.path.insert(0, {samples!r})
from decode_kv import graphscope_model

spec = graphscope_model()
model = spec["model"].cuda().eval()
pos = spec["kwargs"]["pos"].cuda()
for (ids,) in spec["buckets"]:
    ids = ids.cuda()
    with torch.inference_mode():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(ids, pos=pos)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(ids, pos=pos)
    for _ in range(5):
        g.replay()
torch.cuda.synchronize()
"""


def _modules(bundle):
    graphs = json.loads((bundle / "graph.json").read_text())["graphs"]
    return {n["annotation"]["module_name"] for g in graphs for n in g["nodes"]
            if n["type"] in ("kernel", "memcpy", "memset")
            and "module_name" in n.get("annotation", {})}


def test_capture_and_run_of_one_model_name_the_same_modules(tmp_path):
    # GIVEN the decode model captured from its model file, one graph per bucket
    cap = tmp_path / "cap"
    p = subprocess.run([sys.executable, "-m", "graphscope", "capture", "--mode", "forward",
                        "--replays", "3", "-o", str(cap),
                        os.path.join(SAMPLES, "decode_kv.py")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    # AND the same model captured by an unmodified program under graphscope run
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(PROGRAM.format(samples=SAMPLES)))
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "--replays", "3", "-o",
                        str(run), str(prog)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    # THEN both bundles name the same modules, by the one rule
    captured, ran = _modules(cap), _modules(run)
    assert captured == ran, (sorted(captured ^ ran))
    assert "L.blocks.0.attn.qkv" in ran and "L.head" in ran
