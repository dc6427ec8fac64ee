"""``graphscope run`` of a function compiled with torch.compile(mode="reduce-overhead") outside
any module: its graph's kernels are scoped by the function's name, ``(scale)``."""

import json
import subprocess
import sys

import pytest

from graphscope.model.graph import WORK_KINDS
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

PROGRAM = '''import torch


@torch.compile(mode="reduce-overhead")
def scale(x):
    return torch.relu(x * 2 + 1).sum(dim=1)


x = torch.randn(256, 256, device="cuda")
for _ in range(12):
    y = scale(x)
torch.cuda.synchronize()
print("ok", tuple(y.shape))
'''


def test_a_compiled_function_outside_modules_is_scoped_by_its_name(tmp_path):
    # GIVEN an unmodified program whose only compiled code is a plain function
    prog = tmp_path / "fn.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "b"
    # WHEN graphscope runs it
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(out), str(prog)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert p.returncode == 0 and "ok (256,)" in p.stdout, p.stderr
    graphs = json.loads((out / "graph.json").read_text())["graphs"]
    compiled = [g for g in graphs if g["info"].get("kind") == "compiled"]
    assert compiled, [g["name"] for g in graphs]
    # THEN every kernel of its graph is in the function's scope, said to come from it
    for g in compiled:
        assert "(scale)" in g["name"], g["name"]
        work = [n for n in g["nodes"] if n["type"] in WORK_KINDS]
        assert work, g["name"]
        for n in work:
            a = n.get("annotation", {})
            assert a.get("module_name") == "(scale)", (g["name"], a, n.get("source"))
            assert a.get("module_source") == "compiled function", a
    report = subprocess.run([sys.executable, "-m", "graphscope", "report", str(out)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert report.returncode == 0 and "(scale)" in report.stdout, report.stderr
    assert "(unattributed)" not in report.stdout, report.stdout
