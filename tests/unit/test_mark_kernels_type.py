"""mark_kernels as a C type (csrc/markscope.cpp): its content-keyed scope cache must give the
same scope as the Python resolver for every annotation, and never mix up annotations whose
pickles differ (the interning key of annotate/scopes.py)."""

import contextlib
import math
import uuid

import pytest

import graphscope
from graphscope import annotate as A
from graphscope import native
from graphscope._errors import AnnotationError

from ._fake import current, fake_session

pytestmark = pytest.mark.skipif(
    native.maybe_extension() is None, reason="graphscope's extension is not built")


@pytest.fixture(autouse=True, params=["native", "python"])
def _path(request, monkeypatch):
    monkeypatch.setenv(native.OP_OBSERVER_ENV, request.param)
    if request.param == "native" and native.op_observer() is None:
        pytest.skip(f"no native op observer: {native.op_observer_why()}")
    yield
    assert native.current_scope() == -1


@contextlib.contextmanager
def counting_resolver():
    """Count the calls the C type makes into the running session's resolver."""
    calls = []
    session = native.active_session()
    real = session.resolve

    def resolve(a, parent, backward):
        calls.append(a)
        return real(a, parent, backward)

    session.resolve = resolve
    try:
        yield calls
    finally:
        del session.resolve


def seen_inside(ann, **kw):
    with graphscope.mark_kernels(ann, **kw):
        return current()


def test_it_is_the_c_type_with_the_reference_signature():
    import inspect

    assert graphscope.mark_kernels is native.extension().mark_kernels
    assert str(inspect.signature(graphscope.mark_kernels)) == "(annotation, *, backward=True)"
    m = graphscope.mark_kernels({"a": 1}, backward=False)
    assert m.annotation == {"a": 1} and m.backward is False
    assert graphscope.mark_kernels(annotation="x").annotation == "x"
    with pytest.raises(TypeError, match="unexpected keyword argument 'back'"):
        graphscope.mark_kernels("x", back=True)
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        graphscope.mark_kernels("x", True)
    with pytest.raises(TypeError, match="missing 1 required"):
        graphscope.mark_kernels()


def test_a_scope_seen_before_runs_no_python():
    token = uuid.uuid4().hex  # a scope this process has not seen
    with fake_session(), counting_resolver() as calls:
        for _ in range(50):
            with graphscope.mark_kernels({"name": "blk", "i": token}):
                with graphscope.mark_kernels("inner"):
                    assert current() == {"name": "inner", "i": token}
    assert len(calls) == 2


def test_values_equal_in_python_but_pickled_apart_stay_apart():
    anns = [{"v": 1}, {"v": True}, {"v": 1.0}, {"v": 0.0}, {"v": -0.0}, {"v": "1"},
            {"v": None}, {"v": False}, {"v": 0}, {"v": 2**70}, {"v": float(2**70)}]
    with fake_session():
        for _ in range(2):  # the second round is answered from the cache
            for a in anns:
                got = seen_inside(a)["v"]
                assert type(got) is type(a["v"]) and got == a["v"]
                if isinstance(got, float):
                    assert math.copysign(1, got) == math.copysign(1, a["v"])


def test_key_order_is_kept():
    with fake_session():
        for _ in range(2):
            assert list(seen_inside({"a": 1, "b": 2})) == ["a", "b"]
            assert list(seen_inside({"b": 2, "a": 1})) == ["b", "a"]


def test_the_same_dict_changed_between_entries():
    d = {"name": "x", "n": 1}
    with fake_session():
        assert seen_inside(d) == {"name": "x", "n": 1}
        d["n"] = 2
        assert seen_inside(d) == {"name": "x", "n": 2}
        d["extra"] = "e"
        assert seen_inside(d) == {"name": "x", "n": 2, "extra": "e"}


def test_the_parent_is_part_of_the_key():
    with fake_session():
        for _ in range(2):
            with graphscope.mark_kernels({"outer": 1}):
                assert seen_inside("blk") == {"outer": 1, "name": "blk"}
            with graphscope.mark_kernels({"outer": 2}):
                assert seen_inside("blk") == {"outer": 2, "name": "blk"}
            assert seen_inside("blk") == {"name": "blk"}


def test_backward_flag_is_part_of_the_key():
    import torch

    from .test_annotations_cpu import Spy

    x = torch.randn(3, requires_grad=True)
    Spy.seen = []
    with fake_session():
        with graphscope.mark_kernels("f"):
            y = Spy.apply(x)
        with graphscope.mark_kernels("f", backward=False):
            z = Spy.apply(y)
        z.sum().backward()
    assert Spy.seen == [{}, {"name": "f", "autograd_phase": "backward"}]


def test_a_guessed_successor_is_taken_only_when_everything_matches():
    """After a step, each scope's cache slot guesses the scope entered next. A later entry that
    equals the guess in annotation but not in parent or backward flag, or differs from it only
    in its last byte, its size or its type, must get its own scope, not the guess's."""
    import torch

    from .test_annotations_cpu import Spy

    token = uuid.uuid4().hex
    a, b = {"name": "a", "t": token, "in_a": True}, {"name": "blk", "t": token, "i": 1}
    variants = [  # entered right after `a`, where the guess is b-inside-nothing
        ({"name": "blk", "t": token, "i": 2}, None),  # differs in its last byte
        ({"name": "blk", "t": token}, None),  # a prefix of b's items
        ({"name": "blk", "t": token, "i": 1, "j": 0}, None),  # b and one more
        ({"name": "blk", "t": token, "i": 1.0}, None),  # equal in Python, another type
        (b, "a"),  # b itself, inside a (the guess is b outside it)
    ]
    with fake_session():
        for v, outer in variants:
            for _ in range(2):  # teach the guess: a, then b
                seen_inside(a)
                assert seen_inside(b) == b
            seen_inside(a)
            if outer is None:
                got = seen_inside(v)
            else:
                with graphscope.mark_kernels(a):
                    got = seen_inside(v)
                v = {**a, **v}
            assert got == v and type(got.get("i")) is type(v.get("i"))
        # b itself with backward=False right after a: same dict, another backward scope
        x = torch.randn(3, requires_grad=True)
        Spy.seen = []
        for _ in range(2):
            seen_inside(a)
            seen_inside(b)
        seen_inside(a)
        with graphscope.mark_kernels(b, backward=False):
            y = Spy.apply(x)
        y.sum().backward()
    assert Spy.seen == [{}]


def test_ownership_is_kept_past_the_logs_first_growth():
    """Every scope entry and exit notes (autograd sequence number, scope); the native log grows
    past its first 4,096 entries while backward reads it. Each node keeps its own scope."""
    import torch

    from .test_annotations_cpu import Spy

    n = 4500  # one entry per node made (an exit and the next entry share a sequence number)
    x = torch.randn(2, requires_grad=True)
    Spy.seen = []
    with fake_session():
        y = x
        for i in range(n):
            with graphscope.mark_kernels({"s": i}):
                y = Spy.apply(y)
        y.sum().backward()
    assert Spy.seen == [{"s": i, "autograd_phase": "backward"} for i in reversed(range(n))]


def test_many_long_and_wide_annotations_are_cached_exactly():
    """Enough scopes for the cache's table to grow several times, annotations longer than a
    slot holds inline (differing only past that point), strings of each storage kind, and
    ints past 64 bits (not cached): every scope is the resolver's, and a second pass over the
    same entries, in the same order, runs no Python for the cacheable ones."""
    token = uuid.uuid4().hex
    long_a = {"name": "x" * 100 + "a", "t": token}
    long_b = {"name": "x" * 100 + "b", "t": token}
    wide = [{"name": s, "t": token} for s in ("caf\u00e9", "\u20ac", "\U0001f600", "cafe")]
    many = [{"name": f"blk{i}", "i": i, "t": token} for i in range(3000)]
    big = {"v": 2**64 + 1, "t": token}
    anns = [long_a, long_b, *wide, *many]
    with fake_session(), counting_resolver() as calls:
        for round_ in range(2):
            for a in anns:
                with graphscope.mark_kernels({"outer": token}):
                    assert seen_inside(a) == {"outer": token, **a}
            assert seen_inside(big) == big
            if round_ == 0:
                first = len(calls)
    assert first == 1 + len(anns) + 1  # the outer scope, each annotation, the big int
    # (this process has not seen these: the token is new)
    assert len(calls) == first + 1  # the second pass: only the big int (not cached)
    assert native.extension().mark_kernels_cache_size() >= len(anns)


def test_annotations_the_cache_does_not_take_are_resolved_in_python():
    class D(dict):
        pass

    anns = [D(name="sub"), {"t": (1, 2)}, {"l": [1]}, {1: "int key"}]
    with fake_session(), counting_resolver() as calls:
        for _ in range(2):
            assert seen_inside(anns[0]) == {"name": "sub"}
            assert seen_inside(anns[1]) == {"t": (1, 2)}
            assert seen_inside(anns[2]) == {"l": [1]}
            with pytest.raises(AnnotationError, match="key 1 is not a str"):
                seen_inside(anns[3])
            assert math.isnan(seen_inside({"n": float("nan")})["n"])  # cached by its bits
    assert len([c for c in calls if "n" not in c]) == 2 * len(anns)
    assert sum("n" in c for c in calls) <= 1


def test_bad_annotations_raise_outside_a_capture_too():  # MK3 + MK12
    with pytest.raises(AnnotationError, match="'f'.*cannot be pickled"):
        seen_inside({"f": lambda: 0})
    with pytest.raises(AnnotationError, match="must be a str or a dict"):
        seen_inside(3)
    assert seen_inside({"ok": 1.5}) == {}
    assert native.current_scope() == -1


def test_reentering_one_object_nests():
    m = graphscope.mark_kernels("m")
    with fake_session():
        with m:
            with m:
                assert current() == {"name": "m"}
            assert current() == {"name": "m"}
        assert native.current_scope() == -1


def test_the_python_class_gives_the_same_scopes():
    def run(cls):
        out = []
        with fake_session():
            for ann in ({"name": "a", "k": 1}, "b", {"name": "a", "k": 1.0}, {"x": None}):
                with cls(ann):
                    with cls({"inner": True}, backward=False):
                        out.append((native.current_scope(), current()))
        return out

    assert run(graphscope.mark_kernels) == run(A._PyMarkKernels)
