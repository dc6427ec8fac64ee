"""``capture --try-streams N`` beyond forward (a training step: forward, backward and
optimizer; make_graphed_callables' forward and backward graphs) and ``capture --try-compile
GLOB``, on the GPU, on sample models and on models nobody here wrote (transformers' GPT-2
built from its config, torchvision's ResNet-18). Each test keeps under a minute on an H200."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from graphscope.analysis.diagnosis import diagnose_json
from graphscope.model.bundle_files import read_compile
from graphscope.model.bundle_io import read_bundle
from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.gpu


def _capture(tmp_path, model, mode, replays=5, entry="graphscope_model", **kw):
    from graphscope.capture import run_capture
    from graphscope.capture.config import CaptureConfig

    out = str(tmp_path / f"{os.path.basename(model)[:-3]}-{mode}")
    cfg = CaptureConfig(model=model, mode=mode, replays=replays, output=out, entry=entry,
                        **kw).validate()
    res = run_capture(cfg)
    assert res.join.unjoined_records == 0
    return read_bundle(out)


def _what_if(b, graph):
    g = next(g for g in b.graphs if g.name == graph)
    wi = g.info["what_if_streams"]
    print(graph, {k: wi.get(k) for k in ("streams", "ops", "cross_stream_waits",
                                         "median_one_stream_ns", "median_ns", "outputs_equal",
                                         "within_tolerance", "max_abs_diff",
                                         "max_tolerance_ratio", "error")})
    for part, c in (wi.get("compared") or {}).items():
        print("  ", part, c)
    assert "error" not in wi, wi["error"]
    return wi


def _measured(wi, replays):
    assert len(wi["one_stream_span_ns"]) == replays and len(wi["span_ns"]) == replays
    assert wi["median_ns"] > 0 and wi["median_one_stream_ns"] > 0


GPT2_STEP = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def graphscope_model():
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000,
                                       n_positions=64, use_cache=False))
    ids = torch.randint(0, 1000, (4, 32))
    return {"model": model, "args": (ids,), "kwargs": {"labels": ids}}
'''

RESNET18_STEP = '''
import torch
import torchvision


def graphscope_model():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    x, y = torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,))
    dev = {}

    def loss(out):
        if "y" not in dev:
            dev["y"] = y.to(out.device)
        return torch.nn.functional.cross_entropy(out, dev["y"])

    return {"model": model, "args": (x,), "loss": loss}
'''


@pytest.mark.parametrize("name, lib, src, params, state", [
    ("gpt2", "transformers", GPT2_STEP, 28, None),  # 2 blocks of 12, embeddings, final norm
    ("resnet18", "torchvision", RESNET18_STEP, 62, 60),  # 20 BatchNorms: mean, var, count
])
def test_step_try_streams_on_real_training_steps(tmp_path, name, lib, src, params, state):
    # GIVEN a real model's training step (GPT-2 with its dropout; ResNet-18 with BatchNorm,
    # whose running statistics the step writes in place) captured with --try-streams 4
    pytest.importorskip(lib)
    f = tmp_path / f"{name}.py"
    f.write_text(src)
    b = _capture(tmp_path, str(f), "step", try_streams=4)
    wi = _what_if(b, "step")
    # THEN the step was captured over more streams (the backward's weight and input
    # gradients are independent) and timed beside the graph
    assert wi["streams"] >= 2 and wi["cross_stream_waits"] >= 1
    _measured(wi, 5)
    # AND from the same state (dropout masks included) it computed the same loss, every
    # parameter's gradient and the same running statistics: bitwise, or within float32's
    # reordering tolerance where a kernel's reduction order is not fixed
    parts = wi["compared"]
    assert parts["gradients"]["tensors"] == params and "structure" not in parts["gradients"]
    if state is not None:
        assert parts["state"]["tensors"] == state
    assert wi["within_tolerance"], parts
    # AND the report reads it as it reads forward mode's
    m = diagnose_json(b)["graphs"][0]["what_if_measured"]
    assert m["streams"] == wi["streams"] and m["span_ns"] == wi["median_ns"]


def test_user_step_with_optimizer_try_streams(tmp_path):
    # GIVEN the model file's own step: bf16 autocast, two micro-batches accumulated into
    # .grad kept between steps, AdamW(capturable=True)
    b = _capture(tmp_path, os.path.join(SAMPLES, "train_step_bf16.py"), "step",
                 try_streams=3)
    wi = _what_if(b, "step")
    _measured(wi, 5)
    parts = wi["compared"]
    # THEN the optimizer's state, the parameters and the kept gradients were put back
    # before each graph's step and compared after it
    # (14 parameters: each with its exp_avg, exp_avg_sq, step count and kept .grad)
    assert parts["state"]["tensors"] >= 4 * 14
    assert parts["gradients"]["tensors"] == 14
    assert wi["within_tolerance"], parts


def test_callables_try_streams_forward_and_backward(tmp_path):
    # GIVEN two independent branches graphed by make_graphed_callables with --try-streams 4
    b = _capture(tmp_path, os.path.join(SAMPLES, "branches.py"), "callables",
                 try_streams=4, entry="small")
    fwd, bwd = _what_if(b, "forward"), _what_if(b, "backward")
    # THEN the forward graph took two streams, and so did the backward graph
    assert fwd["streams"] == 2 and bwd["streams"] >= 2
    _measured(fwd, 5)
    _measured(bwd, 5)
    # AND torch's graphs and the re-captured pair agree on outputs and on the gradients of
    # every parameter for the same output gradient
    assert fwd["compared"]["outputs"]["tensors"] == 1
    assert bwd["compared"]["gradients"]["tensors"] == 16  # 8 layers: weight and bias
    assert fwd["within_tolerance"] and bwd["within_tolerance"], (fwd, bwd)


def _compile_doc(b):
    doc = read_compile(b.path)
    assert doc is not None
    for g in doc["graphs"]:
        print(g["graph"], {k: g.get(k) for k in ("gain_pct", "outputs_equal",
                                                 "within_tolerance", "max_abs_diff",
                                                 "max_tolerance_ratio", "warmup_s", "error")})
        for m in g.get("modules", []):
            e, c = m["eager"], m["compiled"]
            print("  ", m["module"], e["kernels"], "->", c["kernels"], "kernels;",
                  e["span_ns"], "->", c["span_ns"], "ns span;", c["top_kernels"][:2])
        assert "error" not in g, g["error"]
    return doc


def test_try_compile_fuses_a_latency_bound_chain(tmp_path):
    # GIVEN 800 tiny elementwise kernels, the whole model compiled (--try-compile L)
    b = _capture(tmp_path, os.path.join(SAMPLES, "tiny_kernels.py"), "forward",
                 try_compile="L")
    doc = _compile_doc(b)
    assert [m["module"] for m in doc["modules"]] == ["L"]
    g = doc["graphs"][0]
    row = g["modules"][0]
    # THEN the eager version has the graph's 800 kernels, and inductor fused them into a few
    assert row["eager"]["kernels"] == 800 == g["eager"]["kernels"]
    assert row["compiled"]["kernels"] <= 800 // 8
    # AND the span fell (the chain's time is per-kernel latency), with the same outputs
    # within compiled code's tolerance
    assert g["gain_pct"] > 50, g["gain_pct"]
    assert g["within_tolerance"], g["compared"]
    assert len(g["eager"]["span_ns"]) == 5 == len(g["compiled"]["span_ns"])
    # AND the bundle reads back: the report runs on it
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", b.path],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_try_compile_compiles_with_a_stream_marked(tmp_path):
    # GIVEN a stream marked in this process (mark_stream puts the capture's ops through a
    # TorchDispatchMode, under which dynamo runs frames eagerly)
    import torch

    import graphscope

    side = torch.cuda.Stream()
    graphscope.mark_stream(side, "side")
    try:
        # WHEN the short chain is captured with the whole model compiled
        b = _capture(tmp_path, os.path.join(SAMPLES, "tiny_kernels.py"), "forward",
                     entry="short_chain", try_compile="L")
    finally:
        graphscope.mark_stream(side, None)
    g = _compile_doc(b)["graphs"][0]
    # THEN inductor fused its 128 kernels: the compiled version is not the eager one again
    assert g["eager"]["kernels"] == 128
    assert g["compiled"]["kernels"] <= 128 // 8 and not g.get("same_kernels")


GPT2_FORWARD = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def graphscope_model():
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000,
                                       n_positions=64, use_cache=False))
    return {"model": model, "args": (torch.randint(0, 1000, (4, 32)),)}
'''


def test_try_compile_gpt2_blocks_per_module(tmp_path):
    # GIVEN GPT-2's forward with its transformer blocks compiled
    pytest.importorskip("transformers")
    f = tmp_path / "gpt2.py"
    f.write_text(GPT2_FORWARD)
    p = subprocess.run([sys.executable, "-m", "graphscope", "capture", str(f), "--mode",
                        "forward", "--try-compile", "L.transformer.h.*", "--replays", "5",
                        "-o", str(tmp_path / "b")],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    print(p.stdout[-1500:])
    doc = _compile_doc(read_bundle(str(tmp_path / "b")))
    # THEN each block was compiled (its submodules with it) and measured before and after
    assert [m["module"] for m in doc["modules"]] == ["L.transformer.h.0", "L.transformer.h.1"]
    assert "L.transformer.h.0.attn" in doc["nested"]
    g = doc["graphs"][0]
    blocks = [m for m in g["modules"] if m["module"].startswith("L.transformer.h.")]
    for m in blocks:
        assert m["eager"]["kernels"] > m["compiled"]["kernels"] > 0, m
        assert m["eager"]["span_ns"] and m["compiled"]["span_ns"]
    # AND the rest of the graph is the same kernels in both versions
    rest = next(m for m in g["modules"] if m["module"].startswith("(outside"))
    assert rest["eager"]["kernels"] == rest["compiled"]["kernels"]
    assert g["within_tolerance"], g["compared"]
    assert "try-compile L.transformer.h.*: forward: span " in p.stdout


def test_try_compile_a_training_step(tmp_path):
    # GIVEN the sample MLP's training step with the whole model compiled (forward and
    # backward through AOTAutograd)
    b = _capture(tmp_path, os.path.join(SAMPLES, "mlp.py"), "step", try_compile="L")
    doc = _compile_doc(b)
    g = doc["graphs"][0]
    row = next(m for m in g["modules"] if m["module"] == "L")
    # THEN the module's forward and backward kernels were attributed in both versions, and
    # the gradients compared within compiled code's tolerance
    assert row["eager"]["kernels"] > 0 and row["compiled"]["kernels"] > 0
    assert g["compared"]["gradients"]["tensors"] == 6
    assert g["within_tolerance"], g["compared"]
