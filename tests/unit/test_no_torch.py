"""A pip install without PyTorch: lint and doctor say first that lint needs torch, rather than
blaming the model (\"exited with code 1\") or listing lint among the commands that work."""

import json
import os
import subprocess
import sys

import pytest

from graphscope.cli.main import main
from tests.conftest import ROOT, SAMPLES


@pytest.fixture
def no_torch(tmp_path):
    """A directory that, first on PYTHONPATH, makes ``import torch`` fail as on a machine
    without it (the test's own interpreter keeps its torch)."""
    pkg = tmp_path / "shadow" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    return str(tmp_path / "shadow")


def _one_line(err):
    lines = [x for x in err.strip().splitlines() if x]
    assert len(lines) == 1, err
    return lines[0]


def test_lint_without_torch_says_so_first(no_torch, monkeypatch, capsys):
    # GIVEN a child interpreter in which torch cannot be imported
    monkeypatch.setenv("PYTHONPATH", no_torch)
    # WHEN lint runs a model there
    rc = main(["lint", os.path.join(SAMPLES, "mlp.py")])
    out, err = capsys.readouterr()
    # THEN one line says lint needs torch; the model is not said to have exited
    assert rc == 2
    line = _one_line(err)
    assert line.startswith("graphscope: error: graphscope lint needs PyTorch"), line
    assert "pip install torch" in line and "exited" not in out + err


def test_lint_without_torch_installed_starts_no_child(monkeypatch, capsys):
    # GIVEN no torch to find on sys.path
    import importlib.util
    import subprocess as sp

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    monkeypatch.setattr(sp, "run", lambda *a, **k: pytest.fail("a child was started"))
    # WHEN lint is asked, THEN it says so before running anything
    assert main(["lint", os.path.join(SAMPLES, "mlp.py")]) == 2
    assert "needs PyTorch (No module named 'torch')" in _one_line(capsys.readouterr().err)


def test_doctor_without_torch_does_not_list_lint_as_working(no_torch):
    env = {**os.environ, "PYTHONPATH": no_torch}
    # WHEN doctor runs where torch cannot be imported
    text = subprocess.run([sys.executable, "-m", "graphscope", "doctor", "--no-subscribe"],
                          capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    js = subprocess.run([sys.executable, "-m", "graphscope", "doctor", "--no-subscribe",
                         "--json"], capture_output=True, text=True, cwd=ROOT, env=env,
                        check=False)
    # THEN lint is named as needing torch, and is not among the commands that work
    assert "graphscope lint needs PyTorch" in text.stdout, text.stdout + text.stderr
    works = [x for x in text.stdout.splitlines() if x.startswith("Commands that work here")]
    assert works and "lint" not in works[0], text.stdout
    data = json.loads(js.stdout)
    assert "lint" not in data["bundle_commands"] and data["needs_torch"] == ["lint"]
