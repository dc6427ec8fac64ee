"""What changed inside a graph, as the list every view of a comparison prints: only what moved
beyond its noise, the largest first (docs/gates.md, "What changed").

Each item is a :class:`Moved` of one kind:

- ``critical_path``: a module whose time on the critical path grew or shrank (it left the
  path: a speed-up's cause) by more than its noise
  (the noise floor of its GPU work, ``stats.py``; a module without one: ``noise_pct`` % of
  A's time, at least the module floor);
- ``kernel_added``, ``kernel_removed``, ``kernel_replaced``: kernels by module and shape (a
  kernel in one recording and not the other is a change whatever its time);
- ``module_work``: a module whose GPU work moved beyond the noise, the deepest such;
- ``stream_order_edges``, ``stream_order_edge``: stream-order-only edges, their count and each
  new one;
- ``pool_bytes``: the graph's pool memory, where it changed;
- ``capture_s``: the capture's wall time, where it changed by more than ``CAPTURE_NOISE``
  times (separate processes of one model captured in 68-113 ms, ``tests/data/gates``);
- ``more``: how many more of a kind the list leaves out (``of``: that kind).

Items with a GPU time (``size_ns``) come first, the largest first; then the others in the
order above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .explain import EdgeRef, Explanation, KernelRef, KernelSwap, Pair, ShareChange
from .stats import WITHIN_NOISE, Change

TOP = 5  # items of each kind
CAPTURE_NOISE = 2.0  # a capture time moving by less than this factor is noise


@dataclass(frozen=True)
class Moved:
    """One change inside a graph; the field its ``kind`` names holds it."""

    kind: str
    size_ns: Optional[float]  # the GPU time it moved by (orders the list); None: not a time
    share: Optional[ShareChange] = None  # critical_path
    kernel: Optional[KernelRef] = None  # kernel_added, kernel_removed
    swap: Optional[KernelSwap] = None  # kernel_replaced
    change: Optional[Change] = None  # module_work
    edge: Optional[EdgeRef] = None  # stream_order_edge
    pair: Optional[Pair] = None  # stream_order_edges, pool_bytes, capture_s
    of: Optional[str] = None  # more: the kind left out
    count: int = 0  # more: how many


@dataclass(frozen=True)
class GraphChanges:
    graph: str
    items: tuple[Moved, ...]


def _cp_noise(module: str, a_ns: float, modules: dict[str, Change], floor_ns: float,
              noise_pct: float) -> float:
    c = modules.get(module)
    return c.noise_ns if c is not None else max(floor_ns, noise_pct / 100.0 * a_ns)


def _top(kind: str, items: list[Moved], total: Optional[int] = None) -> list[Moved]:
    """The ``TOP`` largest of one kind, and a ``more`` item for the rest (``total``: how many
    there are, where ``items`` holds only the first of them)."""
    items = sorted(items, key=lambda m: -(m.size_ns or 0.0))
    left = (len(items) if total is None else total) - min(len(items), TOP)
    return items[:TOP] + ([Moved("more", None, of=kind, count=left)] if left > 0 else [])


def _leaves(changes: list[Change]) -> list[Change]:
    """Changes of modules none of whose sub-modules changed too (``L.left.2``, not also
    ``L.left`` and ``L``): where the change is."""
    names = {c.module for c in changes}
    return [c for c in changes
            if not any(n and n != c.module and n.startswith(f"{c.module}.") for n in names)]


def _kernels(ex: Explanation) -> list[Moved]:
    out: list[Moved] = []
    for kind, refs, total in (("kernel_added", ex.kernels_added, ex.kernels_added_total),
                              ("kernel_removed", ex.kernels_removed,
                               ex.kernels_removed_total)):
        out += _top(kind, [Moved(kind, k.median_ns or 0.0, kernel=k) for k in refs], total)
    swaps = [Moved("kernel_replaced", abs((s.b.median_ns or 0.0) - (s.a.median_ns or 0.0)),
                   swap=s) for s in ex.kernels_replaced]
    return out + _top("kernel_replaced", swaps, ex.kernels_replaced_total)


def what_changed(ex: Explanation, modules: tuple[Change, ...], floor_ns: float,
                 noise_pct: float) -> tuple[Moved, ...]:
    """What moved beyond the noise in the graph ``ex`` explains (module docstring);
    ``modules``: the graph's GPU work per module, A → B."""
    by_module = {c.module or "": c for c in modules}
    cp = [Moved("critical_path", abs(m.b_ns - m.a_ns), share=m)
          for m in ex.critical_path_modules
          if abs(m.b_ns - m.a_ns) > _cp_noise(m.module, m.a_ns, by_module, floor_ns, noise_pct)]
    # the modules past the listed ones changed less: counted where the listed all count
    timed = _top("critical_path", cp, ex.critical_path_modules_total
                 if len(cp) == len(ex.critical_path_modules) else None)
    timed += _kernels(ex)
    moved = _leaves([c for c in modules if c.verdict != WITHIN_NOISE])
    timed += _top("module_work", [Moved("module_work", abs(c.delta_ns), change=c)
                                  for c in moved])
    first = sorted((m for m in timed if m.kind != "more"), key=lambda m: -(m.size_ns or 0.0))
    rest: list[Moved] = []
    e = ex.stream_order_edges
    if e.a is not None and e.b is not None and e.b != e.a:
        rest.append(Moved("stream_order_edges", None, pair=e))
    rest += _top("stream_order_edge", [Moved("stream_order_edge", None, edge=x)
                                       for x in ex.stream_order_edges_added])
    if ex.pool_bytes.a != ex.pool_bytes.b:
        rest.append(Moved("pool_bytes", None, pair=ex.pool_bytes))
    ca, cb = ex.capture_s.a, ex.capture_s.b
    if ca is not None and cb is not None and min(ca, cb) > 0 and (
            max(ca, cb) / min(ca, cb) > CAPTURE_NOISE):
        rest.append(Moved("capture_s", None, pair=ex.capture_s))
    return tuple(first + rest + [m for m in timed if m.kind == "more"])
