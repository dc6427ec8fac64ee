"""Plain data: the nodes and graphs a bundle holds once loaded, and their kernels' names as
reports show them. No torch, no extension. The loaded bundle itself is
:class:`~graphscope.model.bundle.Bundle`.

Kernel names: ``void at::native::foo<4, F>(...)`` reads ``foo``, and two different kernels
never share a shown name (their differing template arguments are added)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

UNATTRIBUTED = "(unattributed)"
# a capture's memory and time outside every module scope (memory by module's row)
OUTSIDE_MODULES = "(outside modules)"
DDP_SCOPE = "(ddp)"  # DDP's reducer work (annotate/training.py)
FSDP_SCOPE = "(fsdp)"  # FSDP2's all-gathers and reduce-scatters (annotate/fsdp.py)


class NodeKind(str, enum.Enum):
    """The type of a graph node: ``CUgraphNodeType`` (cuda.h), in its order, by the names
    bundles store in ``Node.type``. A ``str``: ``node.type == NodeKind.KERNEL`` compares the
    name."""

    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    HOST = "host"
    GRAPH = "graph"  # a child graph
    EMPTY = "empty"
    EVENT_WAIT = "event_wait"
    EVENT_RECORD = "event_record"
    EXT_SEMAS_SIGNAL = "ext_semas_signal"
    EXT_SEMAS_WAIT = "ext_semas_wait"
    MEM_ALLOC = "mem_alloc"
    MEM_FREE = "mem_free"
    BATCH_MEM_OP = "batch_mem_op"
    CONDITIONAL = "conditional"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec)

    @classmethod
    def name_of(cls, cuda_type: int) -> str:
        """The name of a ``CUgraphNodeType`` value (``type<N>`` for one newer than this list)."""
        return _BY_CODE[cuda_type].value if 0 <= cuda_type < len(_BY_CODE) else f"type{cuda_type}"

    @property
    def is_work(self) -> bool:
        return self in WORK_KINDS


_BY_CODE = tuple(NodeKind)
# the nodes that take GPU time and get annotations (MK2)
WORK_KINDS = frozenset({NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET})


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
    registers: Optional[int] = None  # a kernel's registers per thread (None: not recorded)
    bytes: int = 0
    annotation: Mapping[str, Any] = field(default_factory=dict)
    op: Optional[str] = None
    shapes: Optional[str] = None
    source: Optional[str] = None
    durations_ns: tuple[int, ...] = ()
    # device byte ranges [start, end) its op read / wrote (recorded at capture); None: the
    # node has no op information (a raw kernel, a collective): a hard dependency
    reads: Optional[tuple[tuple[int, int], ...]] = None
    writes: Optional[tuple[tuple[int, int], ...]] = None

    @property
    def is_work(self) -> bool:
        """Kernel, memcpy or memset: the nodes that take GPU time and get annotations."""
        return self.type in WORK_KINDS

    @property
    def module(self) -> str:
        return str(self.annotation.get("module_name", UNATTRIBUTED))

    @property
    def phase(self) -> str:
        return str(self.annotation.get("autograd_phase", "forward"))

    @property
    def short_name(self) -> str:
        if self.type != NodeKind.KERNEL:
            return self.type
        # unique within the bundle where it was read (assign_short_names)
        return self.__dict__.get("_short") or short_kernel_name(
            self.demangled or self.kernel or "?")

    @property
    def median_ns(self) -> Optional[float]:
        return statistics.median(self.durations_ns) if self.durations_ns else None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "local_id": self.local_id,
            "exec_node_id": self.exec_node_id,
            "type": self.type,
        }
        if self.type == NodeKind.KERNEL:
            d.update(kernel=self.kernel, demangled=self.demangled, short=self.short_name,
                     grid=list(self.grid), block=list(self.block), smem=self.smem)
            if self.registers is not None:
                d["registers"] = self.registers
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


# ---------------------------------------------------------------- kernel names

# Names that say little alone: qualify them with what their template arguments instantiate.
_GENERIC = {"Kernel", "Kernel2", "kernel", "vectorized_elementwise_kernel", "elementwise_kernel",
            "unrolled_elementwise_kernel", "reduce_kernel", "device_kernel"}
_IDENT = re.compile(r"[A-Za-z_]\w*")
_QUALIFYING = re.compile(r"Functor|functor|Impl|_kernel_cuda|_sgemm|_gemm")
_NOT_QUALIFYING = {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "func_wrapper_t", "ReduceOp",
                   "TensorIteratorBase", "OffsetCalculator"}
# namespaces that say nothing of a generic kernel (``internal::gemvx::kernel``: ``gemvx``)
_PLAIN_SCOPES = {"at", "native", "std", "internal", "detail", "c10", "cuda", "anonymous"}


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
    path = _strip_nested(s).split(" ")[-1].split("::")
    base = path[-1].strip()
    if not base:
        return name[:60]
    if base in _GENERIC and "<" in s:
        for ident in _IDENT.findall(s[s.index("<"):MAX_NAME]):
            if _QUALIFYING.search(ident) and ident not in _NOT_QUALIFYING:
                return f"{base}<{ident}>"
    if base in _GENERIC and len(path) >= 3:  # nothing in its arguments says what it is: the
        # scope it is declared in, below a library's namespace, may (a library's own top
        # namespace, cutlass::Kernel2, is left to the arguments' disambiguation)
        scope = path[-2].strip()
        if scope and scope not in _PLAIN_SCOPES:
            return f"{scope}::{base}"
    return base


def _group_args(s: str, opener: str) -> list[str]:
    """The top-level arguments of ``s``'s first ``<...>`` (or ``(...)``) group, each without
    its namespaces: ``f<a::B<1>, float>`` -> ``['B<1>', 'float']``."""
    s = s.replace("(anonymous namespace)::", "")
    i = s.find(opener)
    if i < 0:
        return []
    args: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s[i + 1:MAX_NAME]:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    args.append("".join(cur).strip())
    out = []
    for a in args:
        head, sep, rest = a.partition("<")
        out.append(head.rsplit("::", 1)[-1] + sep + rest)
    return [a for a in out if a]


MAX_SHOWN_NAME = 160  # a disambiguated kernel name keeps at most this many characters


_NAMESPACE = re.compile(r"\b\w+::")


def _with_args(short: str, args: list[str]) -> str:
    kept = [a for i, a in enumerate(args) if a != "…" or i == 0 or args[i - 1] != "…"]
    shown = ", ".join(_NAMESPACE.sub("", a) for a in kept)
    name = f"{short[:-1]}, {shown}>" if short.endswith(">") else f"{short}<{shown}>"
    if len(name) > MAX_SHOWN_NAME:
        name = name[:MAX_SHOWN_NAME - 1] + "…"
    return name


def _differing(args: list[str], every: list[list[str]]) -> list[str]:
    """The arguments of ``args`` not shared by every member (by position where all have as
    many)."""
    if all(len(a) == len(args) for a in every):
        return [x if any(o[i] != x for o in every) else "…" for i, x in enumerate(args)]
    common = set.intersection(*(set(a) for a in every))
    return [x for x in args if x not in common]


def unique_short_names(full_names: list[str]) -> dict[str, str]:
    """Short names for ``full_names`` that never put two different kernels under one name:
    where several kernels shorten alike, each keeps the template arguments (else the
    parameters) that tell it apart, and a ``#k`` suffix where even those are the same."""
    groups: dict[str, list[str]] = {}
    for full in dict.fromkeys(full_names):
        groups.setdefault(short_kernel_name(full), []).append(full)
    out: dict[str, str] = {}
    for short, fulls in groups.items():
        if len(fulls) == 1:
            out[fulls[0]] = short
            continue
        names: dict[str, str] = {}
        for opener in ("<", "("):
            argsets = {f: _group_args(f[5:] if f.startswith("void ") else f, opener)
                       for f in fulls}
            names = {f: _with_args(short, args) for f, args in argsets.items()}
            if len(set(names.values())) < len(fulls) or max(map(len, names.values())) > 100:
                # too long to read: only the arguments that differ
                names = {f: _with_args(short, _differing(args, list(argsets.values())))
                         for f, args in argsets.items()}
            if len(set(names.values())) == len(fulls):
                break
        else:  # alike in all they say: numbered
            names = {f: _with_args(short, _group_args(f, "<")) if "<" in f else short
                     for f in fulls}
        seen: dict[str, int] = {}
        for f in sorted(fulls):
            name = names.get(f) or short
            k = seen[name] = seen.get(name, 0) + 1
            out[f] = name if list(names.values()).count(name) == 1 else f"{name} #{k}"
    return out
