"""Reference semantics that need no GPU: the scope table, normalisation and the backward
attribution machinery on CPU autograd (SPEC MK3-MK12)."""

import inspect
import pickle
import threading

import pytest
import torch

import graphscope
from graphscope import annotate as A
from graphscope import native
from graphscope._errors import AnnotationError

from ._fake import current, fake_session

ATT = A.TABLES  # the attribution tables these tests read


class Spy(torch.autograd.Function):
    """Identity whose backward records the annotation a kernel launched there would get."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        Spy.seen.append(current())
        return g * 1


@pytest.fixture(autouse=True, params=["native", "python"])
def _reset(request, monkeypatch):
    """Every test twice: backward attributed by the native observer's RecordFunction callbacks
    and by the Python pre-hooks (GRAPHSCOPE_OP_OBSERVER=python)."""
    monkeypatch.setenv(native.OP_OBSERVER_ENV, request.param)
    if request.param == "native" and native.op_observer() is None:
        pytest.skip(f"no native op observer: {native.op_observer_why()}")
    Spy.seen = []
    yield
    assert native.current_scope() == -1


def test_mk3_noop_outside_capture():  # MK3
    with graphscope.mark_kernels("eager"):
        assert native.current_scope() == -1
        torch.ones(2) * 2


def test_mk10_backward_keyword_is_the_feature_probe():  # MK10
    assert "backward" in inspect.signature(graphscope.mark_kernels).parameters


def test_mk12_str_becomes_name_and_values_must_pickle():  # MK12
    with fake_session():
        with graphscope.mark_kernels("attn"):
            assert current() == {"name": "attn"}
    with pytest.raises(AnnotationError, match="'fn'.*cannot be pickled"):
        with graphscope.mark_kernels({"fn": lambda: 1}):
            pass
    with pytest.raises(AnnotationError, match="str or a dict"):
        with graphscope.mark_kernels(3):
            pass
    with pytest.raises(AnnotationError, match="key 1 is not a str"):
        with graphscope.mark_kernels({1: threading.Lock()}):
            pass


def test_mk4_nested_merge_inner_wins():  # MK4
    with fake_session():
        with graphscope.mark_kernels({"name": "outer", "a": 1, "b": 1}):
            with graphscope.mark_kernels({"name": "inner", "b": 2}):
                assert current() == {"name": "inner", "a": 1, "b": 2}
            assert current() == {"name": "outer", "a": 1, "b": 1}


def test_scope_ids_are_interned_and_depth_does_not_grow_the_table():
    with fake_session():
        with graphscope.mark_kernels("x"):
            a = native.current_scope()
        n = len(ATT.scopes)
        for _ in range(100):
            with graphscope.mark_kernels("x"):
                assert native.current_scope() == a
        assert len(ATT.scopes) == n


def test_mk5_mk6_backward_bracketed_with_phase():  # MK5, MK6
    x = torch.randn(3, requires_grad=True)
    with fake_session():
        with graphscope.mark_kernels({"name": "f", "autograd_phase": "user"}):
            assert current()["autograd_phase"] == "user"
            y = Spy.apply(x)
        z = Spy.apply(y)  # outside any scope
        z.sum().backward()
    assert Spy.seen == [{}, {"name": "f", "autograd_phase": "backward"}]


def test_mk5_backward_in_a_later_session():  # MK5
    x = torch.randn(3, requires_grad=True)
    with fake_session():
        with graphscope.mark_kernels("layer"):
            y = Spy.apply(x)
    with fake_session():
        y.sum().backward()
    assert Spy.seen == [{"name": "layer", "autograd_phase": "backward"}]


def test_mk7_backward_outside_session_does_nothing():  # MK7
    x = torch.randn(3, requires_grad=True)
    with fake_session():
        with graphscope.mark_kernels("f"):
            y = Spy.apply(x)
        h = y * 2
    h.sum().backward()
    assert Spy.seen == [{}]


def test_mk8_higher_order_gradients_inherit():  # MK8
    x = torch.randn(3, requires_grad=True)
    seen = []
    with fake_session():
        with graphscope.mark_kernels("f"):
            y = torch.tanh(x).sum()
        (gx,) = torch.autograd.grad(y, x, create_graph=True)
        owners = {type(n).__name__: dict(ATT.scopes.annotation(s))
                  for n, s in ATT.ownership.explicit.items()}
        assert owners["TanhBackwardBackward0"] == {"name": "f", "autograd_phase": "backward"}
        gx.grad_fn.register_prehook(lambda g: None)
        node = gx.grad_fn  # made by the first backward while the hooked node ran
        node.register_hook(lambda gi, go: seen.append(current()))
        gx.pow(2).sum().backward()
    assert seen == [{"name": "f", "autograd_phase": "backward"}]


def test_mk8_checkpoint_recompute_gets_module_scope_and_recompute_flag():  # MK8
    from torch.utils.checkpoint import checkpoint

    class Inner(torch.nn.Module):
        def forward(self, x):
            Spy.seen.append(("fwd", current()))
            return Spy.apply(torch.sin(x))  # sin saves x: backward must recompute

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return checkpoint(self.inner, x, use_reentrant=False)

    m = Outer()
    x = torch.randn(3, requires_grad=True)
    with A.register_module_annotations(m), fake_session():
        m(x).sum().backward()
    fwd = [a for tag, a in [s for s in Spy.seen if isinstance(s, tuple)]]
    assert fwd[0] == {"module_name": "L.inner"}
    assert fwd[1]["recompute"] is True and fwd[1]["module_name"] == "L.inner"
    assert fwd[1]["autograd_phase"] == "backward"


def test_mk9_accumulate_grad_gets_no_scope():  # MK9
    w = torch.randn(3, requires_grad=True)
    seen = []
    with fake_session():
        with graphscope.mark_kernels("f"):
            y = w * 2
        acc = y.grad_fn.next_functions[0][0]
        assert type(acc).__name__ == "AccumulateGrad"
        acc.register_hook(lambda gi, go: seen.append(current()))  # runs after graphscope's
        y.sum().backward()
    assert seen == [{}]


def _slot_annotation():
    """current(), with the native observer's accumulation encoding (-(scope + 2)) resolved."""
    from graphscope.annotate.backward import accumulation_scope

    s = native.current_scope()
    return dict(ATT.scopes.annotation(accumulation_scope(ATT.scopes, -s - 2) if s <= -2 else s))


def test_engine_accumulation_adds_get_the_producers_scope():
    """A tensor used twice: the engine adds the second gradient into the first (InputBuffer)
    right after the second consumer's backward; that add is grad_accumulation in the scope of
    the consumer, and nothing else in backward is."""
    from torch.utils._python_dispatch import TorchDispatchMode

    lin = torch.nn.Linear(3, 3)
    x = torch.randn(2, 3)
    log = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            log.append((func.name(), _slot_annotation()))
            return func(*args, **(kwargs or {}))

    with fake_session():
        with graphscope.mark_kernels("use"):
            h = lin(x)
            y = (h * 2) + (h * 3)
        with Log():
            y.sum().backward()
    adds = [a for op, a in log if op.startswith("aten::add")]
    assert adds == [{"name": "use", "autograd_phase": "backward", "grad_accumulation": True}]
    assert all("grad_accumulation" not in a for op, a in log if not op.startswith("aten::add"))
    assert ("aten::mul.Tensor", {"name": "use", "autograd_phase": "backward"}) in log


def test_mk10_backward_false_forward_only():  # MK10
    x = torch.randn(3, requires_grad=True)
    with fake_session():
        with graphscope.mark_kernels("outer"):
            with graphscope.mark_kernels("fo", backward=False):
                assert current() == {"name": "fo"}
                y = Spy.apply(x)
        with graphscope.mark_kernels("alone", backward=False):
            z = Spy.apply(y)
        z.sum().backward()
    # "alone" has no enclosing backward scope; "fo" falls back to its enclosing "outer"
    assert Spy.seen == [{}, {"name": "outer", "autograd_phase": "backward"}]


def test_module_annotations_fqn_depth_and_removal():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.ReLU()))
    got = []
    h = m[1][0].register_forward_pre_hook(lambda *a: got.append(current()))
    x = torch.randn(1, 2)
    with A.register_module_annotations(m), fake_session():
        m(x)
    with A.register_module_annotations(m, depth=1), fake_session():
        m(x)
    with fake_session():
        m(x)
    h.remove()
    assert got == [{"module_name": "L.1.0"}, {"module_name": "L.1"}, {}]
    assert not ATT.modules.handles  # global hooks removed when no module is registered


def test_stream_annotation_is_the_outermost_layer():
    sid = ATT.scopes.child(-1, {"name": "x", "stream": "inner"})
    merged = ATT.scopes.with_base(sid, {"stream": "side", "other": 1})
    assert dict(ATT.scopes.annotation(merged)) == {"stream": "inner", "other": 1, "name": "x"}


def test_op_recording_notes_aten_op_shapes_and_user_line():
    x = torch.randn(4, 3)
    with fake_session(record_ops=True):
        prev = native.set_current_op(-1)
        torch.mm(x, x.t())
        native.set_current_op(prev)
    recs = ATT.ops.records()
    mm = [r for r in recs if r.op == "aten::mm" and r.source and r.source.endswith(
        "(test_op_recording_notes_aten_op_shapes_and_user_line)")]
    assert mm and mm[-1].shapes == "float32[4,3], float32[3,4]"
    assert "test_annotations_cpu.py:" in mm[-1].source


@pytest.mark.parametrize("native_loop", [True, False])
def test_each_exec_node_gets_its_own_dict(monkeypatch, native_loop):
    if not native_loop:
        monkeypatch.setattr(native.loader, "_ext", None)
    graphscope.clear_kernel_annotations()
    shared = {"name": "a", "k": [1]}
    ATT.store.add_template(6, {0: shared, 1: shared, 3: {}, 4: {"name": "b"}})
    try:
        assert ATT.store.rekey(6, 2) == 3
        live = graphscope.get_kernel_annotations()
        assert dict(live) == {2 << 32: [shared], (2 << 32) | 1: [shared],
                              (2 << 32) | 4: [{"name": "b"}]}
        live[2 << 32][0]["name"] = "changed"
        assert live[(2 << 32) | 1][0]["name"] == "a" and shared["name"] == "a"
        assert type(live[2 << 32]) is list and type(live[2 << 32][0]) is dict
    finally:
        graphscope.clear_kernel_annotations()


def test_live_map_makes_each_nodes_dict_once_and_keeps_it(tmp_path):
    """Publishing shares one dict per scope; a node's own [dict] is made when first read, then
    the same objects every time (a change to it stays, and only there), until the node is
    keyed again."""
    graphscope.clear_kernel_annotations()
    shared = {"name": "a"}
    ATT.store.add_template(6, {0: shared, 1: shared, 2: shared})
    try:
        ATT.store.rekey(6, 2)
        live = graphscope.get_kernel_annotations()
        k0, k1, k2 = 2 << 32, (2 << 32) | 1, (2 << 32) | 2
        assert len(live) == 3 and k0 in live and 5 not in live and set(live) == {k0, k1, k2}
        first = live[k0]
        assert live[k0] is first and first[0] is live[k0][0]
        first[0]["mine"] = True
        assert live[k0] == [{"name": "a", "mine": True}] and live[k1] == [{"name": "a"}]
        assert shared == {"name": "a"}
        with pytest.raises(KeyError):
            live[5]
        with pytest.raises(TypeError):
            live[5] = []  # read-only
        saved = graphscope.save_kernel_annotations(tmp_path / "m.pkl")
        with open(saved, "rb") as f:  # as read: k0's change kept; k2, never read, copied
            assert pickle.load(f) == {k0: [{"name": "a", "mine": True}], k1: [{"name": "a"}],
                                      k2: [{"name": "a"}]}
        assert set(ATT.store.own) == {k0, k1}  # saving made no node's own copy
        ATT.store.rekey(6, 3)  # graph 6 instantiated again: its old keys go, new ones are fresh
        assert set(live) == {3 << 32, (3 << 32) | 1, (3 << 32) | 2}
        assert live[3 << 32] == [{"name": "a"}]
        live[3 << 32][0]["mine"] = True
        ATT.store.add_template(11, {0: {"name": "z"}})
        ATT.store.rekey(11, 3)  # another graph's node keyed as 3 << 32: its dict, not the copy
        assert live[3 << 32] == [{"name": "z"}]
    finally:
        graphscope.clear_kernel_annotations()


def test_saved_map_is_pytorch_shape(tmp_path):
    graphscope.clear_kernel_annotations()  # earlier captures in this process (GPU tests)
    ATT.store.add_template(7, {0: {"name": "a"}, 2: {"name": "b"}})
    ATT.store.rekey(7, 9)
    try:
        p = graphscope.save_kernel_annotations(tmp_path / "a.pkl")
        with open(p, "rb") as f:
            assert pickle.load(f) == {9 << 32: [{"name": "a"}], (9 << 32) | 2: [{"name": "b"}]}
        ATT.store.rekey(7, 10)  # a new instantiate: old keys go
        assert set(graphscope.get_kernel_annotations()) == {10 << 32, (10 << 32) | 2}
    finally:
        graphscope.clear_kernel_annotations()


def test_clone_map_keys_only_exec_nodes():
    graphscope.clear_kernel_annotations()
    ATT.store.add_template(3, {1: {"name": "a"}, 5: {"name": "b"}})
    try:
        clones = {(4 << 32) | 1: (3 << 32) | 1, (8 << 32) | 5: (3 << 32) | 5, (4 << 32) | 7: 7}
        cid, lid = A.store.clone_pairs(list(clones), list(clones.values()), 4, 3)
        # another exec's clone, another graph's node: out
        assert (cid.tolist(), lid.tolist()) == ([(4 << 32) | 1], [1])
        n = ATT.store.rekey(3, 4, (cid, lid))
        assert n == 1 and dict(graphscope.get_kernel_annotations()) == {
            (4 << 32) | 1: [{"name": "a"}]}
        assert ATT.store.rekey(3, 5, ([(5 << 32) | 9, (5 << 32) | 8], [5, 6])) == 1  # 6: untagged
        assert dict(graphscope.get_kernel_annotations()) == {(5 << 32) | 9: [{"name": "b"}]}
    finally:
        graphscope.clear_kernel_annotations()


def test_user_source_names_the_callers_line():
    from graphscope.annotate.ops import default_skip_dirs, user_source

    def inner():
        return user_source(default_skip_dirs())

    got = inner()
    assert got == f"{__file__}:{inner.__code__.co_firstlineno + 1} (inner)"
