"""What two graphs computed, compared: ``--try-streams`` (the same ops over more streams) and
``--try-compile`` (modules compiled) check that the graph they tried computes what the
captured graph computes.

A comparison is bitwise first: the same ops over more streams give the same bits unless a
kernel's reduction order is not fixed (atomics in some backward kernels, cuDNN's
nondeterministic algorithms). Where the bits differ, each element must lie within a stated
tolerance, ``|a - b| <= atol + rtol * |b|`` (``torch.allclose``'s rule; ``b`` is the captured
graph's value), with ``atol`` and ``rtol`` per dtype from :data:`TOLERANCES`: one table for
the same math in another order, a wider one for compiled code (fused kernels round
intermediate values differently). NaN equals NaN here (both graphs produced it); a NaN
against a number is an infinite difference.

A graph whose kernels are not deterministic (cuDNN's weight-gradient algorithms, atomics)
differs from itself: the captured graph is replayed twice from the same state, and the
largest difference between those two runs of a tensor, times :data:`OWN_FACTOR`, is allowed
on top of the tolerance (``own_max_abs_diff`` in the record). A captured graph that repeats
itself bitwise allows nothing more, so a difference there is the tried graph's own.

:class:`StateSnapshot` keeps the bytes of the storages a step writes in place (parameters,
optimizer state, running statistics) and the CUDA generator's state, so that two graphs can
each run one step from the same state (dropout then draws the same masks: a graph takes its
Philox offsets from the generator at replay).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..annotate.tensors import storage_key, tensors_in

# (atol, rtol) per dtype name; a dtype not listed compares bitwise only
TOLERANCES: dict[str, dict[str, tuple[float, float]]] = {
    # the same ops, another reduction order (accumulation in another order, atomics)
    "reordered": {"float64": (1e-10, 1e-7), "float32": (1e-5, 1e-4),
                  "float16": (1e-3, 1e-2), "bfloat16": (1e-2, 2e-2)},
    # compiled code: fused kernels keep intermediates in registers and round them otherwise
    "compiled": {"float64": (1e-8, 1e-6), "float32": (1e-4, 1e-3),
                 "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)},
}
MAX_NAMED = 5  # mismatching tensors named in a comparison
OWN_FACTOR = 4.0  # times the captured graph's own run-to-run difference, allowed on top


def dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def tolerance_table(kind: str) -> dict[str, list[float]]:
    """The tolerances of ``kind`` as a comparison records them: {dtype: [atol, rtol]}."""
    return {k: [a, r] for k, (a, r) in sorted(TOLERANCES[kind].items())}


def _own(b: Any, again: Any) -> float:
    """The largest finite difference between two runs of the captured graph of a tensor."""
    if again is None or again.shape != b.shape or again.dtype != b.dtype:
        return 0.0
    if not b.is_floating_point() and not b.is_complex():
        return 0.0
    if b.is_complex():
        import torch

        b, again = torch.view_as_real(b), torch.view_as_real(again)
    d = (b.detach().double() - again.detach().double()).abs()
    d = d.masked_fill(~d.isfinite(), 0.0)
    return float(d.max()) if d.numel() else 0.0


def _pair(name: str, a: Any, b: Any, kind: str, again: Any = None) -> dict[str, Any]:
    """One tensor pair: bitwise equal, the largest finite |a - b|, the elements where only
    one side is NaN or infinite, and the largest ratio of a difference to what the tolerance
    allows there (<= 1: within it; None: the dtype has no tolerance). ``again``: the
    captured graph's second run of ``b`` (module docstring)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return {"name": name, "structure": f"{dtype_name(a)}{list(a.shape)} against "
                                           f"{dtype_name(b)}{list(b.shape)}"}
    if not a.is_floating_point() and not a.is_complex():
        eq = bool(torch.equal(a, b))
        return {"name": name, "equal": eq, "max_abs_diff": 0.0, "nonfinite": 0,
                "ratio": 0.0 if eq else None}
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    x, y = a.detach().double(), b.detach().double()
    same = (x == y) | (x.isnan() & y.isnan())
    diff = (x - y).abs().masked_fill(same, 0.0)
    finite = diff.isfinite()
    nonfinite = int((~finite).sum())
    equal = bool(same.all())
    top = float(diff.masked_fill(~finite, 0.0).max()) if diff.numel() else 0.0
    tol = TOLERANCES[kind].get(dtype_name(a))
    own = _own(b, again)
    ratio: Optional[float] = 0.0
    if not equal:
        if tol is None:
            ratio = None
        else:
            allowed = (tol[0] + tol[1] * y.abs().nan_to_num(nan=0.0, posinf=0.0)
                       + OWN_FACTOR * own)
            ratio = float((diff.masked_fill(~finite, 0.0) / allowed).max())
    return {"name": name, "equal": equal, "max_abs_diff": top, "nonfinite": nonfinite,
            "ratio": ratio, "own": own}


def compare_named(pairs: Sequence[tuple[str, Any, Any]], kind: str,
                  missing: Sequence[str] = (), again: Optional[Sequence[Any]] = None
                  ) -> dict[str, Any]:
    """Compare ``(name, tried, captured)`` tensor pairs; the record a bundle keeps:
    ``tensors``, ``bitwise_equal``, ``max_abs_diff`` (finite differences; None: a pair's
    shape or dtype differs), ``nonfinite`` (elements NaN or infinite on one side only),
    ``within_tolerance``, ``max_tolerance_ratio`` (the largest difference over what the
    tolerance allows there; None where no tolerance applies) and up to :data:`MAX_NAMED`
    ``mismatched`` names, the worst first. ``missing``: names that one side has (a
    gradient) and the other does not. ``again``: the captured graph's second run of each
    pair's captured tensor, in order: ``own_max_abs_diff`` (None: not run twice)."""
    rows = [_pair(n, a, b, kind, again[i] if again is not None else None)
            for i, (n, a, b) in enumerate(pairs)]
    rows += [{"name": n, "structure": "present on one side only"} for n in missing]
    broken = [r for r in rows if "structure" in r]
    whole = [r for r in rows if "structure" not in r]
    bad = broken + sorted((r for r in whole if not r["equal"]),
                          key=lambda r: -(r["ratio"] if r["ratio"] is not None else 1e300))
    nonfinite = sum(r["nonfinite"] for r in whole)
    unknown = any(r["ratio"] is None for r in whole)
    ratio = max((r["ratio"] for r in whole if r["ratio"] is not None), default=0.0)
    out: dict[str, Any] = {
        "tensors": len(rows),
        "bitwise_equal": not bad,
        "max_abs_diff": None if broken else max((r["max_abs_diff"] for r in whole),
                                                default=0.0),
        "nonfinite": nonfinite,
        "within_tolerance": not broken and not unknown and not nonfinite and ratio <= 1.0,
        "max_tolerance_ratio": None if broken or unknown else ratio,
        "mismatched": [r["name"] for r in bad][:MAX_NAMED],
        "own_max_abs_diff": None if again is None else max(
            (r.get("own", 0.0) for r in whole), default=0.0),
    }
    if broken:
        out["structure"] = f"{broken[0]['name']}: {broken[0]['structure']}"
    return out


def compare_values(tried: Any, captured: Any, kind: str, prefix: str = "output",
                   again: Any = None) -> dict[str, Any]:
    """:func:`compare_named` over the tensors in two values (model outputs), in order;
    ``again``: the captured graph's second run of ``captured``."""
    ta, tb = tensors_in(tried), tensors_in(captured)
    if len(ta) != len(tb):
        return {**compare_named([], kind), "bitwise_equal": False, "within_tolerance": False,
                "max_abs_diff": None, "max_tolerance_ratio": None, "tensors": len(tb),
                "structure": f"{len(ta)} tensors against {len(tb)}", "mismatched": [prefix]}
    tc = tensors_in(again) if again is not None else None
    return compare_named([(f"{prefix}[{i}]", a, b) for i, (a, b) in enumerate(zip(ta, tb))],
                         kind, again=tc if tc is not None and len(tc) == len(tb) else None)


def summary(parts: dict[str, dict[str, Any]], kind: str) -> dict[str, Any]:
    """One comparison of several parts (outputs, gradients, state): the keys a graph's
    ``what_if_streams`` has always had (``outputs_equal``: every part bitwise equal;
    ``max_abs_diff``) beside ``within_tolerance``, the tolerances and each part."""
    diffs = [p["max_abs_diff"] for p in parts.values()]
    ratios = [p["max_tolerance_ratio"] for p in parts.values()]
    return {
        "outputs_equal": all(p["bitwise_equal"] for p in parts.values()),
        "max_abs_diff": None if any(d is None for d in diffs) else max(diffs, default=0.0),
        "within_tolerance": all(p["within_tolerance"] for p in parts.values()),
        "max_tolerance_ratio": None if any(r is None for r in ratios) else max(
            ratios, default=0.0),
        "tolerance": {"kind": kind, "rule": "|a - b| <= atol + rtol * |b|",
                      "atol_rtol": tolerance_table(kind)},
        "compared": parts,
    }


def clone_all(ts: Iterable[Any]) -> list[Any]:
    return [t.detach().clone() for t in ts]


class StateSnapshot:
    """The bytes of every storage behind ``tensors`` (each storage once) and the generator
    state of ``device`` ("cpu" or a CUDA device), to :meth:`restore` before each graph's
    step."""

    def __init__(self, tensors: Iterable[Any], device: Any = None) -> None:
        import torch

        seen: dict[int, Any] = {}
        for t in tensors:
            key = storage_key(t)
            if key and key not in seen:
                seen[key] = t.untyped_storage()
        self.storages = list(seen.values())
        self.saved = [s.clone() for s in self.storages]
        self.device = torch.device(device) if device is not None else None
        self.rng: Optional[Any] = None
        if self.device is not None:
            self.rng = (torch.cuda.get_rng_state(self.device) if self.device.type == "cuda"
                        else torch.get_rng_state())

    def restore(self) -> None:
        import torch

        for s, saved in zip(self.storages, self.saved):
            s.copy_(saved)
        if self.rng is not None and self.device is not None:
            if self.device.type == "cuda":
                torch.cuda.set_rng_state(self.rng, self.device)
            else:
                torch.set_rng_state(self.rng)

    @property
    def nbytes(self) -> int:
        return sum(int(s.nbytes()) for s in self.saved)


@dataclass
class Ran:
    """A captured graph and what its step leaves to compare: its outputs (its static output
    tensors) and the parameters' gradients it writes ({name: tensor or None})."""

    graph: Any
    outputs: Any
    grads: Mapping[str, Any] = field(default_factory=dict)


def grad_pairs(tried: Mapping[str, Any], captured: Mapping[str, Any]
               ) -> tuple[list[tuple[str, Any, Any]], list[str]]:
    """(name, tried, captured) of the gradients both have; the names only one has."""
    pairs, missing = [], []
    for name, g in captured.items():
        a = tried.get(name)
        if (a is None) != (g is None):
            missing.append(name)
        elif g is not None:
            pairs.append((name, a, g))
    return pairs, missing


def compare_replays(captured: Ran, tried: Ran, external: Sequence[Any],
                    names: Mapping[int, str], kind: str, device: Any = None
                    ) -> dict[str, dict[str, Any]]:
    """One replay of each graph from the same state, and a second of the captured graph
    (its own run-to-run difference, module docstring): ``external`` (what the step writes
    in place but does not make) and the generator of ``device`` (None: the current CUDA
    device) are saved first and put back after each replay, and at the end. The parts
    compared: ``outputs``, ``gradients`` (where the step has any), ``state`` (``external``
    after the step; names from ``names`` by storage, else dtype and shape)."""
    import torch

    dev = torch.device(device) if device is not None else torch.device(
        "cuda", torch.cuda.current_device())
    snap = StateSnapshot(external, dev)
    results = []
    try:
        for ran in (captured, tried, captured):
            ran.graph.replay()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            results.append((clone_all(tensors_in(ran.outputs)),
                            {k: (v.detach().clone() if v is not None else None)
                             for k, v in ran.grads.items()},
                            clone_all(external)))
            snap.restore()
    finally:
        snap.restore()
    (o1, g1, s1), (o2, g2, s2), (o3, g3, s3) = results
    parts = {"outputs": compare_values(o2, o1, kind, again=o3)}
    pairs, missing = grad_pairs(g2, g1)
    if pairs or missing:
        parts["gradients"] = compare_named(pairs, kind, missing,
                                           again=[g3.get(n) for n, _, _ in pairs])
    if external:
        state = [(names.get(storage_key(t)) or
                  f"state[{i}] {dtype_name(t)}{list(t.shape)}", a, b)
                 for i, (t, a, b) in enumerate(zip(external, s2, s1))]
        parts["state"] = compare_named(state, kind, again=s3)
    return parts
