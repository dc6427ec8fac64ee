"""Plain data: what a bundle holds once loaded. No torch, no extension."""

from __future__ import annotations

import dataclasses
import functools
import re
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

UNATTRIBUTED = "(unattributed)"
DDP_SCOPE = "(ddp)"  # DDP's reducer work (annotate/training.py)
WORK_TYPES = frozenset({"kernel", "memcpy", "memset"})  # the nodes that take GPU time (MK2)


@dataclass(eq=False)
class Node:
    """One node of a captured graph (template local id = exec local id).

    Treated as immutable. Not ``frozen``: a frozen dataclass's ``__init__`` sets every field
    through ``object.__setattr__``, which made loading a 100,000-node bundle 3x slower.
    """

    graph: str
    local_id: int
    exec_node_id: int
    type: str
    kernel: Optional[str] = None  # mangled
    demangled: Optional[str] = None
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    smem: int = 0
    bytes: int = 0
    annotation: Mapping[str, Any] = field(default_factory=dict)
    op: Optional[str] = None
    shapes: Optional[str] = None
    source: Optional[str] = None
    durations_ns: tuple[int, ...] = ()
    # [start, end) byte ranges the node's op read / wrote; None: no op information
    reads: Optional[tuple[tuple[int, int], ...]] = None
    writes: Optional[tuple[tuple[int, int], ...]] = None

    @property
    def is_work(self) -> bool:
        """Kernel, memcpy or memset: the nodes that take GPU time and get annotations."""
        return self.type in WORK_TYPES

    @property
    def module(self) -> str:
        return str(self.annotation.get("module_name", UNATTRIBUTED))

    @property
    def phase(self) -> str:
        return str(self.annotation.get("autograd_phase", "forward"))

    @property
    def short_name(self) -> str:
        if self.type != "kernel":
            return self.type
        return short_kernel_name(self.demangled or self.kernel or "?")

    @property
    def median_ns(self) -> Optional[float]:
        return statistics.median(self.durations_ns) if self.durations_ns else None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "local_id": self.local_id,
            "exec_node_id": self.exec_node_id,
            "type": self.type,
        }
        if self.type == "kernel":
            d.update(kernel=self.kernel, demangled=self.demangled, short=self.short_name,
                     grid=list(self.grid), block=list(self.block), smem=self.smem)
        if self.bytes:
            d["bytes"] = self.bytes
        if self.annotation:
            d["annotation"] = dict(sorted(self.annotation.items()))
        for k in ("op", "shapes", "source"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        for k in ("reads", "writes"):
            v = getattr(self, k)
            if v is not None:
                d[k] = [list(r) for r in v]
        return d

    @classmethod
    def from_json(cls, graph: str, d: Mapping[str, Any], durations: tuple[int, ...]) -> Node:
        # Built without __init__: bundles hold 100,000s of nodes and the generated __init__
        # with defaults and keyword arguments was half of the read time.
        obj = cls.__new__(cls)
        vals = obj.__dict__
        vals.update(_NODE_DEFAULTS)
        vals.update(d)
        if len(vals) != _N_FIELDS:  # derived or unknown keys (e.g. "short") are not fields
            for k in [k for k in vals if k not in _NODE_FIELDS]:
                del vals[k]
        vals["graph"] = graph
        vals["local_id"] = int(d["local_id"])
        vals["exec_node_id"] = int(d["exec_node_id"])
        vals["type"] = str(d["type"])
        if "grid" in d:
            vals["grid"] = tuple(d["grid"])
            vals["block"] = tuple(d["block"])
        if "annotation" not in d:
            vals["annotation"] = {}
        for k in ("reads", "writes"):
            if d.get(k) is not None:
                vals[k] = tuple((int(a), int(b)) for a, b in d[k])
        vals["durations_ns"] = durations
        return obj


_NODE_FIELDS = set(Node.__dataclass_fields__)
_N_FIELDS = len(_NODE_FIELDS)
_NODE_DEFAULTS = {
    name: f.default for name, f in Node.__dataclass_fields__.items()
    if not isinstance(f.default, type(dataclasses.MISSING))
}


@dataclass(frozen=True)
class CapturedGraph:
    """One captured graph: ``step``, ``forward`` / ``backward`` in callables mode, or a graph
    a program captured itself (``graphscope run``), named by its capture site.

    ``info`` holds graph-level facts: for observed programs the capture ``site``, ``ordinal``,
    input ``shapes``, ``replays`` over the whole run, ``traced_replays``, ``pool_bytes``.
    """

    name: str
    template_graph_id: int
    exec_id: int
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int], ...]  # (from local id, to local id)
    info: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "template_graph_id": self.template_graph_id,
            "exec_id": self.exec_id,
            "nodes": [n.to_json() for n in self.nodes],
            "edges": [list(e) for e in self.edges],
        }
        if self.info:
            d["info"] = dict(sorted(self.info.items()))
        return d

    @property
    def dot_file(self) -> str:
        """The bundle-relative file of this graph's driver DOT: a safe name for any graph name."""
        return f"raw/{safe_file_stem(self.name)}.dot"


_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,80}$")


def safe_file_stem(name: str) -> str:
    """``name`` where it is a plain file name, else a sanitised name plus a hash of ``name``
    (graph names like ``decode.py:65 #0 [1,1]`` or ``../x`` never become paths)."""
    if _SAFE.match(name) and ".." not in name:
        return name
    import hashlib

    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._")[:60] or "graph"
    return f"{stem}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Bundle:
    """A loaded bundle: manifest, graphs and replay data."""

    path: str
    manifest: Mapping[str, Any]
    graphs: tuple[CapturedGraph, ...]
    replays: int
    replay_kernel_ns: tuple[int, ...] = ()  # per replay: sum of graph work durations
    replay_span_ns: tuple[int, ...] = ()  # per replay: first start to last end
    events: tuple[Mapping[str, Any], ...] = ()
    unjoined_records: int = 0
    # per traced replay: the host's cudaGraphLaunch call {graph, replay, start_ns, end_ns}
    launches: tuple[Mapping[str, Any], ...] = ()

    def nodes(self) -> Iterator[Node]:
        for g in self.graphs:
            yield from g.nodes

    def work_nodes(self) -> Iterator[Node]:
        return iter(self.work)

    @functools.cached_property
    def work(self) -> tuple[Node, ...]:
        """Kernel, memcpy and memset nodes of every graph, in graph and node order."""
        return tuple(n for n in self.nodes() if n.is_work)

    @functools.cached_property
    def durations(self) -> Any:
        """(work nodes x replays) numpy matrix of per-replay durations, 0 where missing."""
        import numpy as np

        r = max(self.replays, 0)
        rows = [n.durations_ns for n in self.work]
        if r == 0 or not rows:
            return np.zeros((len(rows), r), dtype=np.int64)
        if all(len(d) == r for d in rows):
            return np.asarray(rows, dtype=np.int64).reshape(len(rows), r)
        out = np.zeros((len(rows), r), dtype=np.int64)
        for i, d in enumerate(rows):
            k = min(len(d), r)
            out[i, :k] = d[:k]
        return out

    def graph(self, name: str) -> CapturedGraph:
        for g in self.graphs:
            if g.name == name:
                return g
        raise KeyError(name)

    @property
    def has_timings(self) -> bool:
        return self.replays > 0

    def annotation_map(self) -> dict[int, list[dict[str, Any]]]:
        """PyTorch's shape: ``{exec node id: [annotation dict]}`` for annotated work nodes."""
        return {
            n.exec_node_id: [dict(n.annotation)]
            for n in self.work_nodes()
            if n.annotation
        }


def resolve_graph(bundle: Bundle, name: str) -> str:
    """The one graph ``name`` means: an exact name, else a unique prefix, else a regex that
    matches exactly one graph (``decode.py:65 #1`` or ``#1``)."""
    from .._errors import BundleError

    names = [g.name for g in bundle.graphs]
    hits = [n for n in names if n == name] or [n for n in names if n.startswith(name)]
    if not hits:
        try:
            rx = re.compile(name)
        except re.error:
            rx = None
        hits = [n for n in names if rx is not None and rx.search(n)]
    if len(hits) != 1:
        what = "no graph" if not hits else f"{len(hits)} graphs"
        raise BundleError(f"{bundle.path}: --graph {name!r} matches {what}; graphs: "
                          + "; ".join(names[:20]))
    return hits[0]


def only_graph(bundle: Bundle, name: str) -> Bundle:
    """``bundle`` restricted to one graph (see :func:`resolve_graph`).

    Per-replay totals are recomputed from that graph's nodes; events keep that graph's only.
    """
    g = bundle.graph(resolve_graph(bundle, name))
    import numpy as np

    work = [n for n in g.nodes if n.is_work]
    r = bundle.replays
    mat = np.zeros((len(work), r), dtype=np.int64)
    for i, n in enumerate(work):
        k = min(len(n.durations_ns), r)
        mat[i, :k] = n.durations_ns[:k]
    per_replay = mat.sum(axis=0).tolist()
    return dataclasses.replace(
        bundle, graphs=(g,), replay_kernel_ns=tuple(int(x) for x in per_replay),
        replay_span_ns=(),
        events=tuple(e for e in bundle.events if e.get("graph") == g.name))


# Names that say little alone: qualify them with what their template arguments instantiate.
_GENERIC = {"Kernel", "Kernel2", "kernel", "vectorized_elementwise_kernel", "elementwise_kernel",
            "unrolled_elementwise_kernel", "reduce_kernel", "device_kernel"}
_IDENT = re.compile(r"[A-Za-z_]\w*")
_QUALIFYING = re.compile(r"Functor|functor|Impl|_kernel_cuda|_sgemm|_gemm")
_NOT_QUALIFYING = {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "func_wrapper_t", "ReduceOp",
                   "TensorIteratorBase", "OffsetCalculator"}


def _strip_nested(s: str) -> str:
    """``s`` without its ``<...>`` and ``(...)`` groups, however deep: one linear pass."""
    out = []
    depth = 0
    for ch in s:
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


MAX_NAME = 4096  # longer kernel names are cut before they are shortened


@functools.lru_cache(maxsize=65536)
def short_kernel_name(name: str) -> str:
    """``void at::native::foo<4, F>(int, F)`` -> ``foo``; generic names keep a qualifier
    (``vectorized_elementwise_kernel<GeluCUDAKernelImpl>``); plain C names pass through."""
    s = name[:MAX_NAME].strip()
    if s.startswith("void "):
        s = s[5:]
    base = _strip_nested(s)
    base = base.split("::")[-1].strip()
    base = base.split(" ")[-1] if " " in base else base
    if not base:
        return name[:60]
    if base in _GENERIC and "<" in s:
        for ident in _IDENT.findall(s[s.index("<"):MAX_NAME]):
            if _QUALIFYING.search(ident) and ident not in _NOT_QUALIFYING:
                return f"{base}<{ident}>"
    return base
