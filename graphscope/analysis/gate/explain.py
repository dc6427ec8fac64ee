"""What changed inside a graph between two bundles, to explain a change of its span: the
modules whose time on the critical path changed, kernels added, removed or replaced (matched by
module, kernel and shape), stream-order-only edges that appeared (``analysis/stream_order.py``),
and the graph's pool memory and capture time."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ...model.graph import CapturedGraph, Node

TOP_MODULES = 5  # critical-path modules listed
MAX_KERNELS = 20  # kernels listed per kind of change
MAX_ALIGNED = 5_000  # longer kernel sequences of one module are compared as multisets


@dataclass(frozen=True)
class Pair:
    """A figure in A and in B (None: not recorded on that side)."""

    a: Optional[float]
    b: Optional[float]


@dataclass(frozen=True)
class ShareChange:
    """A module's time on the critical path (median durations) and its share of the path."""

    module: str
    a_ns: float
    b_ns: float
    a_pct: float
    b_pct: float


@dataclass(frozen=True)
class KernelRef:
    """A work node: its module, kernel (short name), shape and median duration."""

    module: str
    name: str
    shape: str
    median_ns: Optional[float]


@dataclass(frozen=True)
class KernelSwap:
    module: str
    a: KernelRef
    b: KernelRef


@dataclass(frozen=True)
class EdgeRef:
    """A captured edge between two nodes (module and kernel of each)."""

    src_module: str
    src: str
    dst_module: str
    dst: str


@dataclass(frozen=True)
class Explanation:
    graph: str
    critical_path_modules: tuple[ShareChange, ...]  # changed, the most first either way
    kernels_added: tuple[KernelRef, ...]
    kernels_removed: tuple[KernelRef, ...]
    kernels_replaced: tuple[KernelSwap, ...]
    kernels_added_total: int  # before MAX_KERNELS cut the lists
    kernels_removed_total: int
    kernels_replaced_total: int
    stream_order_edges: Pair  # stream-order-only edges (counts)
    stream_order_edges_added: tuple[EdgeRef, ...]
    pool_bytes: Pair
    capture_s: Pair
    critical_path_modules_total: int = 0  # before TOP_MODULES cut the list


def shape_of(n: Node) -> str:
    """The shapes of the op that launched ``n`` where recorded, else its launch geometry."""
    if n.shapes:
        return n.shapes
    if any(n.grid) or any(n.block):
        return "grid {} block {}".format(*("x".join(map(str, v)) for v in (n.grid, n.block)))
    return f"{n.bytes} bytes" if n.bytes else ""


def _ref(n: Node) -> KernelRef:
    return KernelRef(n.module, n.short_name, shape_of(n), n.median_ns)


def _key(n: Node) -> tuple[str, str, str]:
    return (n.module, n.kernel or n.demangled or str(n.type), shape_of(n))


def kernel_changes(a: CapturedGraph, b: CapturedGraph
                   ) -> tuple[list[KernelRef], list[KernelRef], list[KernelSwap]]:
    """(added, removed, replaced) work nodes of ``b`` against ``a``: per module, its nodes'
    (kernel, shape) sequences aligned (difflib); a replaced run pairs A's and B's nodes in
    order, what is left over is added or removed. Very long sequences: multisets."""
    by_a: dict[str, list[Node]] = {}
    by_b: dict[str, list[Node]] = {}
    for g, by in ((a, by_a), (b, by_b)):
        for n in g.nodes:
            if n.is_work:
                by.setdefault(n.module, []).append(n)
    added: list[KernelRef] = []
    removed: list[KernelRef] = []
    replaced: list[KernelSwap] = []
    for module in sorted(set(by_a) | set(by_b)):
        xs, ys = by_a.get(module, []), by_b.get(module, [])
        ka, kb = [_key(n) for n in xs], [_key(n) for n in ys]
        if ka == kb:
            continue
        if max(len(ka), len(kb)) > MAX_ALIGNED:
            ca, cb = Counter(ka), Counter(kb)
            left_a, left_b = ca - cb, cb - ca
            removed += [_ref(n) for n in xs if _take(left_a, _key(n))]
            added += [_ref(n) for n in ys if _take(left_b, _key(n))]
            continue
        sm = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
        for op, i1, i2, j1, j2 in sm.get_opcodes():
            if op == "equal":
                continue
            pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
            replaced += [KernelSwap(module, _ref(xs[i1 + k]), _ref(ys[j1 + k]))
                         for k in range(pairs)]
            removed += [_ref(n) for n in xs[i1 + pairs:i2]]
            added += [_ref(n) for n in ys[j1 + pairs:j2]]
    return added, removed, replaced


def _take(left: Counter[Any], key: Any) -> bool:
    if left[key] > 0:
        left[key] -= 1
        return True
    return False


def _cp_modules(da: Mapping[str, Any], db: Mapping[str, Any]) -> list[ShareChange]:
    """Modules whose time on the critical path changed, by how much (the most first, either
    way: a module that left the path is a speed-up's cause)."""
    if not (da.get("timed") and db.get("timed")):
        return []
    ma = {m["module"]: m for m in da["critical_path"]["modules"]}
    mb = {m["module"]: m for m in db["critical_path"]["modules"]}
    rows = []
    for name in set(ma) | set(mb):
        x, y = ma.get(name, {}), mb.get(name, {})
        a_ns, b_ns = float(x.get("ns", 0.0)), float(y.get("ns", 0.0))
        if b_ns != a_ns:
            rows.append(ShareChange(name, a_ns, b_ns, float(x.get("pct", 0.0)),
                                    float(y.get("pct", 0.0))))
    rows.sort(key=lambda r: (-abs(r.b_ns - r.a_ns), r.module))
    return rows


def _order_only(diag: Mapping[str, Any]) -> tuple[Optional[int], list[list[int]]]:
    """Stream-order-only edges of a graph's diagnosis (the allocator's block reuse renamed);
    (None, []) without op information."""
    so = diag.get("stream_order") or {}
    if not so.get("op_info"):
        return None, []
    return int(so.get("stream_order_only_edges", 0)), [list(e) for e in so.get("edges", ())]


def _node_keys(g: CapturedGraph) -> dict[int, tuple[str, str, str, int]]:
    """local id -> (module, kernel, shape, how many such nodes came before it): a node's
    identity across two recordings of one program."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out = {}
    for n in g.nodes:
        k = _key(n)
        out[n.local_id] = (*k, seen[k])
        seen[k] += 1
    return out


def _edges_added(a: CapturedGraph, b: CapturedGraph, ea: Sequence[Sequence[int]],
                 eb: Sequence[Sequence[int]]) -> list[EdgeRef]:
    if not eb:
        return []
    ka, kb = _node_keys(a), _node_keys(b)
    have = {(ka.get(u), ka.get(v)) for u, v in ea}
    nodes_b = {n.local_id: n for n in b.nodes}
    out = []
    for u, v in eb:
        if (kb.get(u), kb.get(v)) in have or u not in nodes_b or v not in nodes_b:
            continue
        x, y = nodes_b[u], nodes_b[v]
        out.append(EdgeRef(x.module, x.short_name, y.module, y.short_name))
    return out


def _info(g: CapturedGraph, key: str) -> Optional[float]:
    v = (g.info or {}).get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def explain(a: CapturedGraph, b: CapturedGraph, da: Mapping[str, Any],
            db: Mapping[str, Any]) -> Explanation:
    """What changed in graph ``b`` against ``a`` (``da``/``db``: their diagnoses)."""
    added, removed, replaced = kernel_changes(a, b)
    na, ea = _order_only(da)
    nb, eb = _order_only(db)
    cp = _cp_modules(da, db)
    return Explanation(
        graph=b.name,
        critical_path_modules=tuple(cp[:TOP_MODULES]), critical_path_modules_total=len(cp),
        kernels_added=tuple(added[:MAX_KERNELS]),
        kernels_removed=tuple(removed[:MAX_KERNELS]),
        kernels_replaced=tuple(replaced[:MAX_KERNELS]),
        kernels_added_total=len(added), kernels_removed_total=len(removed),
        kernels_replaced_total=len(replaced),
        stream_order_edges=Pair(na, nb),
        stream_order_edges_added=tuple(_edges_added(a, b, ea, eb)),
        pool_bytes=Pair(_info(a, "pool_bytes"), _info(b, "pool_bytes")),
        capture_s=Pair(_info(a, "capture_s"), _info(b, "capture_s")))
