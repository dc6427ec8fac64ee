"""The CLI on the GPU: outputs refused before any model code or GPU
work runs, `run` as python runs a program, `check`'s baseline warnings and stdout."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import DATA, ROOT, SAMPLES

pytestmark = pytest.mark.gpu

PROGRAM = """
import sys
import torch

x = torch.zeros(4, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = x * 2 + 1
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x * 2 + 1
for _ in range(3):
    g.replay()
torch.cuda.synchronize()
with open("argv0.txt", "w") as f:
    f.write(sys.argv[0])
"""


def gs(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "graphscope", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


@pytest.mark.parametrize("cmd", ["capture", "annotate"])
def test_existing_output_refused_before_the_model_runs(tmp_path, cmd):
    model = tmp_path / "m.py"
    model.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n"
                     + open(os.path.join(SAMPLES, "mlp.py")).read())
    out = tmp_path / "b"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    r = gs(cmd, str(model), "-o", str(out))
    assert r.returncode == 2 and "already exists: pass --force" in r.stderr, r.stderr
    assert not (tmp_path / "ran").exists(), "the model ran before the output was checked"


def test_run_module_of_the_current_directory_and_argv0_as_typed(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(PROGRAM)
    r = gs("run", "-o", "out_m", "-m", "pkg.mod", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out_m" / "manifest.json").exists()
    (tmp_path / "prog.py").write_text(PROGRAM)
    r = gs("run", "-o", "out_p", "prog.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "argv0.txt").read_text() == "prog.py"


def test_check_baseline_of_another_model_warns_and_junit_to_stdout(tmp_path):
    base = os.path.join(DATA, "cnn_step")
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text("capture: {replays: 3}\ntotal: {max_kernels: 1000}\n"
                       "regression: {max_pct: 1000}\n")
    r = gs("check", os.path.join(SAMPLES, "mlp.py"), "--budget", str(budgets),
           "--baseline", base, "--junit", "-")
    assert r.returncode in (0, 1), r.stderr
    assert f"warning: --baseline {base}: the bundles come from different model files" \
        in r.stderr, r.stderr
    root = ET.fromstring(r.stdout)  # stdout holds the XML only; the table went to stderr
    assert root.tag == "testsuite" and "graphscope check" in r.stderr
