"""Each node's memory ranges (the false-serialization analysis's input) recorded at capture,
by the native op observer and by the dispatch mode alike."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

MODEL = '''
import torch
from torch import nn


class M(nn.Module):
    def forward(self, x):
        y = x * 2          # reads x, writes y (a fresh output)
        y.add_(1)          # y is a (a!) argument: written
        return y.relu()    # reads y, writes z


def graphscope_model():
    return M(), (torch.randn(1024),)
'''


def _capture(tmp_path, observer):
    model = tmp_path / "m.py"
    model.write_text(MODEL)
    out = tmp_path / f"b-{observer}"
    env = {**os.environ, "GRAPHSCOPE_OP_OBSERVER": observer}
    subprocess.run([sys.executable, "-m", "graphscope", "capture", str(model), "--mode",
                    "forward", "--replays", "1", "-o", str(out), "--force"],
                   check=True, env=env, capture_output=True)
    with open(out / "graph.json") as f:
        nodes = json.load(f)["graphs"][0]["nodes"]
    return {n["op"]: n for n in nodes if n.get("op")}


@pytest.mark.parametrize("observer", ["native", "python"])
def test_reads_and_writes_follow_the_ops_schema(tmp_path, observer):
    # GIVEN a forward of mul, in-place add_ and relu on a 4 KiB tensor
    # WHEN captured with either op recorder
    ops = _capture(tmp_path, observer)
    def op(prefix):
        (hit,) = [n for name, n in ops.items() if name.startswith(prefix)]
        return hit

    mul, add, relu = op("aten::mul"), op("aten::add_"), op("aten::relu")
    # THEN mul reads x (4 KiB) and writes y; add_ writes y (its (a!) argument); relu reads y
    (x,), (y,) = mul["reads"], mul["writes"]
    assert x[1] - x[0] == 4096 and y[1] - y[0] == 4096 and x != y
    assert add["writes"] == [y] and add["reads"] == []
    assert relu["reads"] == [y]
    (z,) = relu["writes"]
    assert z[1] <= y[0] or z[0] >= y[1]  # a fresh output, disjoint from y


def test_ranges_off_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHSCOPE_MEMORY_RANGES", "0")
    ops = _capture(tmp_path, "native")
    assert all("reads" not in n and "writes" not in n for n in ops.values())
