"""`graphscope capture` end to end on the GPU."""

import json
import os
import pickle
import subprocess
import sys

import pytest

from graphscope.analysis.summary import module_rows
from graphscope.capture import run_capture
from graphscope.capture.config import CaptureConfig
from graphscope.model.bundle_io import read_bundle
from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("mode", ["step", "callables"])
def test_capture_mlp_both_modes_joins_everything(tmp_path, mode):
    out = str(tmp_path / f"mlp-{mode}")
    cfg = CaptureConfig(model=os.path.join(SAMPLES, "mlp.py"), mode=mode, replays=5,
                        output=out).validate()
    res = run_capture(cfg)
    jr = res.join
    assert jr is not None and jr.replays == 5
    assert jr.unjoined_records == 0 and jr.joined_records > 0  # every graph record joins
    b = read_bundle(out)
    work = list(b.work_nodes())
    assert all(len(n.durations_ns) == 5 for n in work)
    # per-module totals add up to the replay's kernel time, replay by replay
    top = [r for r in module_rows(b) if r["level"] == 0]
    for i in range(5):
        assert sum(r["per_replay_ns"][i] for r in top) == b.replay_kernel_ns[i]
    # the pickle is PyTorch's shape and its keys are exec node ids of this bundle
    with open(os.path.join(out, "annotations.pkl"), "rb") as f:
        amap = pickle.load(f)
    assert amap and all(isinstance(k, int) and isinstance(v, list) and isinstance(v[0], dict)
                        for k, v in amap.items())
    assert set(amap) <= {n.exec_node_id for n in work}
    mods = {n.module for n in work}
    assert "L.fc1" in mods and "L.head" in mods
    phases = {n.phase for n in work if n.annotation}
    assert phases == {"forward", "backward"}
    if mode == "step":
        assert any(n.op and n.source and "mlp.py" in n.source for n in work)
        assert os.path.exists(os.path.join(out, "raw", "step.dot"))
    else:
        assert {g.name for g in b.graphs} == {"forward", "backward"}


@pytest.mark.parametrize("name", ["cnn", "gpt", "marked", "sidestream"])
def test_capture_each_sample_model(tmp_path, name):
    out = str(tmp_path / name)
    cfg = CaptureConfig(model=os.path.join(SAMPLES, f"{name}.py"), replays=3,
                        output=out).validate()
    res = run_capture(cfg)
    assert res.join.unjoined_records == 0
    b = read_bundle(out)
    work = list(b.work_nodes())
    fwd = [n for n in work if n.phase == "forward" and n.annotation]
    assert fwd
    if name == "cnn":  # cuDNN's backward zeroes a workspace: a memset node, annotated too
        memsets = [n for n in b.nodes() if n.type == "memset"]
        assert memsets and all(n.annotation.get("module_name") for n in memsets)
    if name == "marked":
        names = {n.annotation.get("name") for n in work}
        assert {"prologue", "expert", "forward_only"} <= names
        assert any(n.annotation.get("recompute") for n in work), "checkpoint recompute tagged"
        assert not any(n.annotation.get("name") == "forward_only" and n.phase == "backward"
                       for n in work)
    if name == "sidestream":
        assert any(n.annotation.get("stream") == "side" for n in work)


def test_cli_capture_json_subprocess(tmp_path):
    out = str(tmp_path / "gpt")
    r = subprocess.run([sys.executable, "-m", "graphscope", "capture",
                        os.path.join(SAMPLES, "gpt.py"), "--replays", "3", "-o", out, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["bundle"] == out and s["replays"] == 3 and s["unjoined_records"] == 0
    assert s["coverage"]["forward"]["pct"] == 100.0
    r2 = subprocess.run([sys.executable, "-m", "graphscope", "capture",
                         os.path.join(SAMPLES, "gpt.py"), "-o", out], capture_output=True,
                        text=True, cwd=ROOT, timeout=600)
    assert r2.returncode == 2 and "already exists" in r2.stderr


def test_check_end_to_end_with_junit(tmp_path):
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text("capture: {replays: 3}\nmin_coverage: {forward: 100, backward: 99.5}\n"
                       "total: {max_kernels: 1000, max_time_us: 100000}\n"
                       "modules:\n  'L.fc*': {max_kernels: 2}\n")
    junit = tmp_path / "out.xml"
    r = subprocess.run([sys.executable, "-m", "graphscope", "check",
                        os.path.join(SAMPLES, "mlp.py"), "--budget", str(budgets),
                        "--junit", str(junit)], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr  # L.fc1/L.fc2 have 4 and 6 kernels
    import xml.etree.ElementTree as ET

    root = ET.fromstring(junit.read_text())
    failed = {tc.get("name") for tc in root.iter("testcase") if tc.find("failure") is not None}
    assert failed == {"modules[L.fc1].kernels", "modules[L.fc2].kernels"}


def test_annotate_cli_writes_pytorch_pickle(tmp_path):
    out = str(tmp_path / "ann")
    r = subprocess.run([sys.executable, "-m", "graphscope", "annotate",
                        os.path.join(SAMPLES, "gpt.py"), "-o", out, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["annotated_nodes"] == s["work_nodes"] > 0
    with open(s["annotations_pkl"], "rb") as f:
        amap = pickle.load(f)
    assert all(isinstance(k, int) and v[0].get("module_name") for k, v in amap.items())
    assert {v[0].get("autograd_phase") for v in amap.values()} == {None, "backward"}
