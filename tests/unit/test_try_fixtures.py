"""Bundles recorded on the H200 by bench/record_try_fixtures.py, read on any machine: a
training step tried over two streams (forward and backward planned, gradients compared) and
compiled-module comparisons (compile.json). Each test skips, naming the command that records
its fixture, while the fixture is absent."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from graphscope.analysis.diagnosis import diagnose_json
from graphscope.model.bundle_files import COMPILE_FILE, read_compile
from graphscope.model.bundle_io import read_bundle
from tests.conftest import DATA, ROOT

RECORD = "python bench/record_try_fixtures.py tests/data (on a GPU)"


def _fixture(name):
    path = os.path.join(DATA, name)
    if not os.path.isfile(os.path.join(path, "manifest.json")):
        pytest.skip(f"tests/data/{name} is not recorded yet: {RECORD}")
    return path


def test_a_step_over_two_streams_plans_backward_and_compares_gradients():
    # GIVEN sample_models/branches.py (small) captured with --mode step --try-streams 2
    b = read_bundle(_fixture("try_streams_step"))
    g = b.graphs[0]
    wi = g.info["what_if_streams"]
    # THEN the step (forward, loss, backward) was planned over both streams, joined by waits
    assert b.manifest["mode"] == "step" and g.name == "step"
    assert wi["max_streams"] == 2 and wi["streams"] == 2 and wi["cross_stream_waits"] >= 1
    # and the plan holds every op of the step, backward included: more than the forward's
    # 16 ops (8 layers: a GEMM and an activation each)
    assert wi["ops"] > 2 * 16
    # AND both graphs were traced alternately, each as many replays as asked
    assert len(wi["span_ns"]) == len(wi["one_stream_span_ns"]) == wi["replays"] >= 3
    # AND from the same state they computed the same output, loss and gradients of all 16
    # parameters (8 layers: weight and bias)
    parts = wi["compared"]
    assert parts["outputs"]["tensors"] == 2  # the model's output and the loss
    assert parts["gradients"]["tensors"] == 16
    assert wi["within_tolerance"] and wi["tolerance"]["kind"] == "reordered"
    assert wi["outputs_equal"] == all(p["bitwise_equal"] for p in parts.values())


def test_the_report_reads_step_mode_s_measurement_as_forward_mode_s():
    path = _fixture("try_streams_step")
    m = diagnose_json(read_bundle(path))["graphs"][0]["what_if_measured"]
    wi = read_bundle(path).graphs[0].info["what_if_streams"]
    assert m["streams"] == 2 and m["span_ns"] == wi["median_ns"]
    assert m["one_stream_ns"] == wi["median_one_stream_ns"]
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", path],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def _consistent(g):
    """Per version: the modules' kernels add up to the graph's; a module's busy time lies
    within its span; its top kernels are its own."""
    for v in ("eager", "compiled"):
        rows = [m[v] for m in g["modules"]]
        assert sum(r["kernels"] for r in rows) == g[v]["kernels"]
        assert sum(r["nodes"] for r in rows) == g[v]["nodes"]
        for r in rows:
            if r["busy_ns"] is not None:
                assert 0 < r["busy_ns"] <= r["span_ns"] <= g[v]["median_span_ns"] * 1.5
            assert sum(k["count"] for k in r["top_kernels"]) <= r["kernels"]
        assert len(g[v]["span_ns"]) == g["replays"]


def test_a_compiled_latency_bound_chain_has_fewer_kernels_and_a_shorter_span():
    # GIVEN 128 tiny elementwise kernels (tiny_kernels.py short_chain), --try-compile L
    doc = read_compile(_fixture("try_compile_chain"))
    assert doc["backend"] == "inductor" and doc["options"] == {"triton.cudagraphs": False}
    assert [m["module"] for m in doc["modules"]] == ["L"]
    g = doc["graphs"][0]
    _consistent(g)
    chain = g["modules"][0]
    # THEN eagerly the module is the graph's 128 kernels, compiled a handful
    assert chain["module"] == "L" and chain["eager"]["kernels"] == 128
    assert chain["compiled"]["kernels"] <= 16
    # AND its span shrank with them, and so did the graph's
    assert chain["compiled"]["span_ns"] < chain["eager"]["span_ns"]
    assert g["gain_pct"] > 0
    assert g["gain_pct"] == pytest.approx(
        100 * (1 - g["compiled"]["median_span_ns"] / g["eager"]["median_span_ns"]))
    # AND its output agrees within compiled code's stated tolerance
    assert g["within_tolerance"] and g["tolerance"]["kind"] == "compiled"
    assert g["compared"]["outputs"]["tensors"] == 1


def test_compiled_transformer_blocks_are_measured_per_block():
    # GIVEN sample_models/gpt.py's forward with --try-compile 'L.blocks.*'
    path = _fixture("try_compile_gpt")
    doc = read_compile(path)
    assert [m["module"] for m in doc["modules"]] == ["L.blocks.0", "L.blocks.1"]
    assert "L.blocks.0.attn" in doc["nested"]
    g = doc["graphs"][0]
    _consistent(g)
    for m in g["modules"][:2]:  # on the H200 inductor kept the blocks' 10 kernels, each faster
        assert m["eager"]["kernels"] >= m["compiled"]["kernels"] > 0, m
        assert m["compiled"]["busy_ns"] < m["eager"]["busy_ns"], m
    rest = g["modules"][-1]  # embeddings, final norm and head: not compiled, the same kernels
    assert rest["module"] == "(outside compiled modules)"
    assert rest["eager"]["kernels"] == rest["compiled"]["kernels"]
    assert g["within_tolerance"]
    # AND the bundle lists compile.json among its files
    assert COMPILE_FILE in read_bundle(path).manifest["files"]
