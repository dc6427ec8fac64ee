"""The native op observer (csrc/opwatch.cpp) records what the Python dispatch mode records.

Both run over the same CPU workloads; the op, the shapes string and the source line must agree
op by op. Where the two legitimately differ the difference is the dispatch mode's own doing
(with a Python mode active, torch takes its subclass-safe paths and creates tensor literals below
the mode); those ops create no graph nodes and are listed in ``MODE_ONLY``.
"""

from __future__ import annotations

import functools
import math
import random
import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from graphscope import annotate as A
from graphscope import native
from graphscope.annotate import ops as O

from ._fake import fake_session

OBS = native.op_observer()
pytestmark = pytest.mark.skipif(
    OBS is None, reason=f"no native op observer: {native.op_observer_why()}")

# Seen only under the dispatch mode (detach of saved outputs, tensor-literal lifting, profiler
# range ops), or only without it (a tensor literal's own allocation, `aten::empty`, which the
# mode does not see): none launches a kernel, so none names a graph node.
MODE_ONLY = {"aten::detach", "aten::detach_", "aten::lift_fresh", "aten::alias",
             "aten::empty.memory_format"}


@pytest.fixture(autouse=True)
def _no_streams_or_ddp(monkeypatch):
    """mark_stream tags left by earlier tests in this process (a sample model's side stream)
    or a DDP watch would send ops to the dispatch mode: not what these tests look at."""
    from graphscope.annotate import TABLES

    saved = dict(TABLES.streams)
    TABLES.streams.clear()
    yield
    TABLES.streams.update(saved)


def _filtered(recs):
    return [r for r in recs if r.op not in MODE_ONLY and not r.op.startswith("profiler::")]


def _with_mode(fn):
    session = A.Session(record_ops=True)
    session.record_memory = True  # call ids (with memory ranges) resolve to the same records
    mode = O.op_mode_class()(session)
    log = []

    def set_op(i):
        if i != -1:
            r = A.TABLES.ops[i]
            log.append(O.OpRecord(r.op, r.shapes, r.source))
        return -1

    mode.recorder.set_op = set_op
    with mode:
        fn()
    return log


def _with_observer(fn):
    OBS.set_logging(True)
    OBS.enable(native.extension().set_op_address(), threading.get_ident(),
               list(O.default_skip_dirs()), True)
    try:
        fn()
    finally:
        OBS.disable()
    ids = OBS.log()
    OBS.set_logging(False)
    return [A.TABLES.ops[i] for i in ids]


def _compare(fn, params=()):
    runs = []
    for run in (_with_mode, _with_observer):
        for p in params:
            p.grad = None
        torch.manual_seed(0)
        runs.append(_filtered(run(fn)))
    mode, obs = runs
    assert len(mode) > 10
    assert mode == obs
    return obs


def test_mlp_training_step_matches_the_dispatch_mode():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.1),
                        nn.Linear(32, 4))
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step():
        F.cross_entropy(mlp(x), y).backward()

    recs = _compare(step, list(mlp.parameters()))
    ln = next(r for r in recs if r.op == "aten::native_layer_norm")
    assert ln.shapes == "float32[8,32], float32[32], float32[32], 1e-05"
    assert ln.source.endswith("(step)") and __file__ in ln.source
    # backward ops run on autograd's thread here too, or on this one: no source off the main one
    assert any(r.op == "aten::_log_softmax_backward_data" for r in recs)


def test_cnn_with_batchnorm_matches_the_dispatch_mode():
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    x = torch.randn(2, 3, 8, 8)
    recs = _compare(lambda: cnn(x).sum().backward(), list(cnn.parameters()))
    # num_batches_tracked.add_(1): the arg parser wraps 1 in a tensor; the mode sees the int
    assert any(r.op == "aten::add_.Tensor" and r.shapes == "int64[], 1" for r in recs)


def test_foreach_adamw_matches_the_dispatch_mode():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(8, 16)

    def step():
        mlp(x).square().mean().backward()
        opt.step()
        opt.zero_grad()

    step()
    recs = _compare(step)
    assert any(r.op.startswith("aten::_foreach_") and r.shapes.startswith("[") for r in recs)


def test_python_float_repr_is_reproduced():
    rng = random.Random(0)
    values = [0.0, -0.0, 1.0, 0.5, 1e-05, 1e16, 1e15, 123456789012345678.0, 0.0001, 1.5e-07,
              3.141592653589793, -2.5e-300, 1.7976931348623157e308, 5e-324, math.inf, -math.inf,
              math.nan, 100.0, 12345.678, 9999999999999998.0]
    values += [rng.uniform(-1e6, 1e6) for _ in range(200)]
    values += [10 ** rng.uniform(-30, 30) for _ in range(200)]
    for v in values:
        assert OBS.float_repr(v) == repr(v)


def test_session_uses_the_observer_and_restores_the_thread_op(monkeypatch):
    monkeypatch.delenv(native.OP_OBSERVER_ENV, raising=False)
    x = torch.randn(4, 3)
    with fake_session(record_ops=True) as s:
        assert s._observer is OBS and not s._modes  # no dispatch mode
        assert OBS.enabled() and OBS.backward_enabled()
        torch.mm(x, x.t())
        assert native.extension().current_op() == -1  # restored after the op
    assert not OBS.enabled() and not OBS.backward_enabled()
    mm = [r for r in A.TABLES.ops.records() if r.op == "aten::mm"]
    assert mm[-1].shapes == "float32[4,3], float32[3,4]"


def test_observer_is_disabled_when_the_session_body_raises(monkeypatch):
    monkeypatch.delenv(native.OP_OBSERVER_ENV, raising=False)
    with pytest.raises(ValueError), fake_session(record_ops=True):
        assert OBS.enabled()
        raise ValueError("boom")
    assert not OBS.enabled()


def test_dispatch_mode_is_kept_where_the_observer_cannot_do_the_job(monkeypatch):
    monkeypatch.setenv(native.OP_OBSERVER_ENV, "python")
    with fake_session(record_ops=True) as s:
        assert s._observer is None and s._modes  # the dispatch mode and Python hooks
    assert native.op_observer_why() == f"{native.OP_OBSERVER_ENV}=python"
    monkeypatch.delenv(native.OP_OBSERVER_ENV)
    O.mark_stream(12345, "side")  # mark_stream needs the mode's per-op stream check
    try:
        with fake_session(record_ops=True) as s:
            assert s._modes  # the dispatch mode records ops; backward stays native
            assert OBS.backward_enabled() and not OBS.enabled()
    finally:
        O.mark_stream(12345, None)


def test_observer_built_for_another_torch_is_not_used(monkeypatch):
    native.observers.load_opwatch.cache_clear()
    monkeypatch.setattr(native.observers, "load_opwatch", functools.cache(
        native.observers.load_opwatch.__wrapped__))
    monkeypatch.setattr(torch, "__version__", "0.0.1+other")
    monkeypatch.delenv(native.OP_OBSERVER_ENV, raising=False)
    assert native.op_observer() is None
    assert "built for torch" in native.op_observer_why()
    assert "running torch 0.0.1+other" in native.op_observer_why()


def test_engine_is_watched_only_while_backward_runs(monkeypatch):
    monkeypatch.delenv(native.OP_OBSERVER_ENV, raising=False)
    seen = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(("forward", OBS.backward_watching()))
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(("backward", OBS.backward_watching()))
            return g * 2

    x = torch.ones(3, requires_grad=True)
    with fake_session():
        Probe.apply(x).sum().backward()
        seen.append(("after", OBS.backward_watching()))
    assert seen == [("forward", False), ("backward", True), ("after", False)]
    assert not OBS.backward_watching()


def test_observer_that_was_never_built_says_how_to_get_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    native.observers.load_opwatch.cache_clear()
    monkeypatch.setattr(native.observers, "load_opwatch", functools.cache(
        native.observers.load_opwatch.__wrapped__))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.endswith("._opwatch") else real(name, *a))
    monkeypatch.delenv(native.OP_OBSERVER_ENV, raising=False)
    assert native.op_observer() is None
    assert "--no-build-isolation" in native.op_observer_why()


def test_add_in_a_leaf_post_hook_keeps_the_leaf_scope(monkeypatch):
    """AccumulateGrad's scope comes from a Python pre-hook (parameter owners known); an add a
    post-hook of that node runs afterwards is not an accumulation of an owned node and must
    not reset the slot (DDP's reducer runs there)."""
    from graphscope import annotate as A

    from ._fake import current

    monkeypatch.delenv(native.OP_OBSERVER_ENV, raising=False)
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.zeros(3)
    acc = p.view_as(p).grad_fn.next_functions[0][0]
    seen = []

    def post(grad_inputs, grad_outputs):
        p.grad.add_(1.0)  # an aten::add_ after the node's apply
        seen.append(current())

    acc.register_hook(post)
    with fake_session() as s:
        leaf = A.TABLES.scopes.backward({"module_name": "L.w", "autograd_phase": "backward"})
        s.leaf_scope = lambda node: leaf
        (p * 2).sum().backward()
    assert seen == [{"module_name": "L.w", "autograd_phase": "backward"}]
