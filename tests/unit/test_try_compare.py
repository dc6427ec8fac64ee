"""How --try-streams and --try-compile compare what two graphs computed
(graphscope/capture/compare.py), on CPU tensors: bitwise first, else within the stated
tolerance of each dtype; and the snapshot that lets two steps start from the same state."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from graphscope.capture.compare import (  # noqa: E402
    TOLERANCES,
    StateSnapshot,
    compare_named,
    compare_values,
    grad_pairs,
    summary,
)


def test_identical_tensors_are_bitwise_equal_nan_included():
    a = torch.tensor([1.0, float("nan"), -0.0, 3.0])
    got = compare_named([("x", a.clone(), a)], "reordered")
    assert got == {"tensors": 1, "bitwise_equal": True, "max_abs_diff": 0.0, "nonfinite": 0,
                   "within_tolerance": True, "max_tolerance_ratio": 0.0, "mismatched": [],
                   "own_max_abs_diff": None}


def test_a_reordered_sum_is_not_bitwise_but_within_the_float32_tolerance():
    # GIVEN a float32 sum taken in two orders (float addition is not associative)
    torch.manual_seed(0)
    x = torch.randn(4096, dtype=torch.float32) * 1000
    a, b = x.sum().reshape(1), x.flip(0).cumsum(0)[-1].reshape(1)
    assert not torch.equal(a, b)
    got = compare_named([("sum", a, b)], "reordered")
    # THEN it is not bitwise equal, but within |a - b| <= atol + rtol * |b|
    atol, rtol = TOLERANCES["reordered"]["float32"]
    assert not got["bitwise_equal"] and got["within_tolerance"]
    assert got["max_abs_diff"] == pytest.approx(float((a.double() - b.double()).abs()))
    assert got["max_tolerance_ratio"] == pytest.approx(
        got["max_abs_diff"] / (atol + rtol * abs(float(b))))
    assert got["mismatched"] == ["sum"]


def test_a_difference_beyond_the_tolerance_is_named_worst_first():
    a = torch.zeros(3)
    pairs = [("small", a + 1e-7, a), ("big", a + 1.0, a), ("same", a.clone(), a)]
    got = compare_named(pairs, "reordered")
    assert not got["within_tolerance"] and got["mismatched"] == ["big", "small"]
    assert got["max_abs_diff"] == 1.0
    atol, _ = TOLERANCES["reordered"]["float32"]
    assert got["max_tolerance_ratio"] == pytest.approx(1.0 / atol)


def test_compiled_code_gets_the_wider_tolerance():
    a = torch.ones(4, dtype=torch.float32)
    b = a + 5e-4  # 5e-4 relative: outside "reordered" (1e-4), inside "compiled" (1e-3)
    assert not compare_named([("y", b, a)], "reordered")["within_tolerance"]
    assert compare_named([("y", b, a)], "compiled")["within_tolerance"]
    h = torch.ones(4, dtype=torch.bfloat16)
    assert compare_named([("h", h * 1.0078125, h)], "compiled")["within_tolerance"]


def test_nan_against_a_number_is_never_within_tolerance():
    a = torch.tensor([1.0, 2.0])
    b = torch.tensor([1.0, float("nan")])
    got = compare_named([("x", b, a)], "compiled")
    assert got["nonfinite"] == 1 and not got["within_tolerance"]
    assert math.isfinite(got["max_abs_diff"])  # the finite differences only: JSON-safe


def test_integers_and_booleans_compare_exactly():
    i = torch.arange(5)
    assert compare_named([("i", i.clone(), i)], "compiled")["bitwise_equal"]
    got = compare_named([("i", i + 1, i)], "compiled")
    assert not got["within_tolerance"] and got["max_tolerance_ratio"] is None


def test_structure_differences_are_named():
    a = torch.zeros(2, 3)
    got = compare_named([("x", torch.zeros(3, 2), a)], "reordered", missing=["L.w"])
    assert got["max_abs_diff"] is None and not got["within_tolerance"]
    assert got["structure"] == "x: float32[3, 2] against float32[2, 3]"
    assert got["mismatched"] == ["x", "L.w"]
    got = compare_values((a, a), (a,), "reordered")
    assert got["structure"] == "2 tensors against 1" and not got["bitwise_equal"]


def test_outputs_are_compared_through_nested_structures():
    a = {"logits": torch.ones(2), "past": [(torch.zeros(1), torch.ones(1))]}
    b = {"logits": torch.ones(2), "past": [(torch.zeros(1), torch.ones(1) * 2)]}
    got = compare_values(b, a, "reordered")
    assert got["tensors"] == 3 and got["mismatched"] == ["output[2]"]


def test_grad_pairs_match_by_name_and_name_the_missing():
    g = torch.ones(2)
    pairs, missing = grad_pairs({"L.a": g, "L.b": None, "L.c": g},
                                {"L.a": g, "L.b": g, "L.c": None, "L.d": None})
    assert [p[0] for p in pairs] == ["L.a"] and missing == ["L.b", "L.c"]


def test_the_summary_keeps_forward_modes_keys_and_each_part():
    a = torch.ones(2)
    parts = {"outputs": compare_named([("o", a, a)], "reordered"),
             "gradients": compare_named([("L.w", a + 2.0**-20, a)], "reordered")}
    s = summary(parts, "reordered")
    assert s["outputs_equal"] is False and s["within_tolerance"] is True
    assert s["max_abs_diff"] == 2.0**-20
    assert s["tolerance"]["atol_rtol"]["float32"] == [1e-5, 1e-4]
    assert s["tolerance"]["rule"] == "|a - b| <= atol + rtol * |b|"
    assert set(s["compared"]) == {"outputs", "gradients"}


def test_a_snapshot_puts_back_the_storages_and_the_generator():
    # GIVEN a parameter, a view of a buffer and the CPU generator
    w = torch.nn.Parameter(torch.ones(3))
    buf = torch.zeros(4)
    view = buf[1:3]
    snap = StateSnapshot([w, view, w], device="cpu")
    assert len(snap.storages) == 2 and snap.nbytes == 3 * 4 + 4 * 4  # each storage once
    drawn = torch.rand(2)
    # WHEN a step writes them in place and draws random numbers
    with torch.no_grad():
        w.add_(1.0)
        buf.fill_(7.0)
    torch.rand(5)
    snap.restore()
    # THEN every byte is back (the whole storage behind the view too) and the draw repeats
    assert torch.equal(w.detach(), torch.ones(3)) and torch.equal(buf, torch.zeros(4))
    assert torch.equal(torch.rand(2), drawn)


class _Step:
    """A stand-in for a captured step graph on CPU: each replay writes its static output
    and gradient, draws dropout from the generator and updates a parameter and an
    optimizer state in place (the state the step does not make)."""

    def __init__(self, w, m, scale=1.0):
        self.w, self.m, self.scale = w, m, scale
        self.out = torch.zeros(4)
        self.grad = torch.zeros(4)

    def replay(self):
        mask = (torch.rand(4) > 0.5).float()
        self.out.copy_(self.w * mask * self.scale)
        self.grad.copy_(mask * self.scale)
        self.m.mul_(0.9).add_(self.grad)
        self.w.sub_(0.1 * self.m)


def test_two_steps_compared_from_the_same_state_draw_the_same_masks():
    from graphscope.capture.compare import Ran, compare_replays

    # GIVEN two graphs of the same step over the same parameter and optimizer state
    w, m = torch.ones(4), torch.zeros(4)
    a, b = _Step(w, m), _Step(w, m)
    names = {w.untyped_storage().data_ptr(): "L.w"}
    torch.manual_seed(0)
    # WHEN each runs one step from the saved state
    parts = compare_replays(Ran(a, a.out, {"L.w": a.grad}), Ran(b, b.out, {"L.w": b.grad}),
                            [w, m], names, "reordered", device="cpu")
    # THEN outputs, gradients and the state written are bitwise equal (same dropout masks)
    assert all(p["bitwise_equal"] for p in parts.values()), parts
    assert parts["state"]["tensors"] == 2 and parts["gradients"]["tensors"] == 1
    # AND the state is as it was before either step
    assert torch.equal(w, torch.ones(4)) and torch.equal(m, torch.zeros(4))


def test_a_step_that_computes_otherwise_is_named_in_each_part():
    from graphscope.capture.compare import Ran, compare_replays

    w, m = torch.ones(4), torch.zeros(4)
    a, b = _Step(w, m), _Step(w, m, scale=2.0)
    parts = compare_replays(Ran(a, a.out, {"L.w": a.grad}), Ran(b, b.out, {"L.w": b.grad}),
                            [w, m], {w.untyped_storage().data_ptr(): "L.w"}, "reordered",
                            device="cpu")
    assert parts["gradients"]["mismatched"] == ["L.w"]
    assert set(parts["state"]["mismatched"]) == {"L.w", "state[1] float32[4]"}
    assert not parts["outputs"]["within_tolerance"]


def test_a_graph_that_differs_from_itself_allows_that_much_more():
    from graphscope.capture.compare import OWN_FACTOR

    # GIVEN a captured gradient whose two runs differ by 1e-3 (a nondeterministic kernel)
    b = torch.ones(8)
    again = b + 1e-3
    tried = b + 2e-3  # 20x what "reordered" allows at 1.0
    # THEN the tried graph's difference is within its own run-to-run spread, said so
    got = compare_named([("g", tried, b)], "reordered", again=[again])
    assert got["within_tolerance"] and got["own_max_abs_diff"] == pytest.approx(1e-3, rel=1e-4)
    atol, rtol = TOLERANCES["reordered"]["float32"]
    assert got["max_tolerance_ratio"] == pytest.approx(
        2e-3 / (atol + rtol + OWN_FACTOR * 1e-3), rel=1e-4)
    # AND a captured graph that repeats itself bitwise allows nothing more
    same = compare_named([("g", tried, b)], "reordered", again=[b.clone()])
    assert not same["within_tolerance"] and same["own_max_abs_diff"] == 0.0


class _Noisy(_Step):
    """A step whose gradient carries a different rounding error at each replay."""

    def __init__(self, w, m, noise):
        super().__init__(w, m)
        self.noise, self.n = noise, 0

    def replay(self):
        super().replay()
        self.n += 1
        self.grad.add_(self.noise * (self.n % 2))


def test_a_step_is_judged_against_the_captured_graphs_own_repeatability():
    from graphscope.capture.compare import Ran, compare_replays

    # GIVEN a captured step that differs from itself by 1e-3 from one replay to the next,
    # and a tried step 1e-3 away from its first run
    w, m = torch.ones(4), torch.zeros(4)
    a, b = _Noisy(w, m, 1e-3), _Noisy(w, m, 2e-3)
    parts = compare_replays(Ran(a, a.out, {"L.w": a.grad}), Ran(b, b.out, {"L.w": b.grad}),
                            [w, m], {w.untyped_storage().data_ptr(): "L.w"}, "reordered",
                            device="cpu")
    # THEN the captured graph was run twice, and the gradients are within its own spread
    g = parts["gradients"]
    assert g["own_max_abs_diff"] == pytest.approx(1e-3, rel=1e-4) and g["within_tolerance"], g
    assert not g["bitwise_equal"]
    # AND the same difference from a captured graph that repeats itself is a mismatch
    a2, b2 = _Step(w, m), _Noisy(w, m, 1e-3)
    parts = compare_replays(Ran(a2, a2.out, {"L.w": a2.grad}), Ran(b2, b2.out, {"L.w": b2.grad}),
                            [w, m], {w.untyped_storage().data_ptr(): "L.w"}, "reordered",
                            device="cpu")
    assert parts["gradients"]["own_max_abs_diff"] == 0.0
    assert not parts["gradients"]["within_tolerance"]
