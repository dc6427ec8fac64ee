"""Reading CUDA graphs through the extension (csrc/inspect.cpp): a template's or a capture's
nodes and edges, graph and exec ids, kernel names demangled."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from .loader import call, column, ensure_loaded, extension, maybe_extension

ANNOTATED_TYPES = frozenset({0, 1, 2})  # MK2: kernel, memcpy and memset nodes
BODY_TYPES = frozenset({4, 13})  # child graph and conditional: bodies in another cudaGraph_t


@dataclass(frozen=True)
class GraphInspection:
    """Nodes (creation order) and edges of one template ``cudaGraph_t``."""

    graph_id: int
    node_id: np.ndarray
    node_type: np.ndarray
    grid: np.ndarray
    block: np.ndarray
    smem: np.ndarray
    bytes: np.ndarray
    name_idx: np.ndarray
    names: list[str]
    demangled: list[str]
    edge_from: np.ndarray
    edge_to: np.ndarray
    registers: Optional[np.ndarray] = None  # per thread, -1 where the driver did not say


def inspect_graph(graph_ptr: int, demangle: bool = True) -> GraphInspection:
    """Walk a graph: a template (kept with ``keep_graph=True``) or one still being captured
    (:func:`capture_graph`). ``demangle=False`` leaves ``demangled`` as the raw names (see
    :func:`demangled`)."""
    return as_inspection(call(ensure_loaded().inspect_graph, int(graph_ptr), bool(demangle)))


def read_graph(graph_ptr: int) -> Any:
    """:func:`inspect_graph` with ``demangle=False``, its columns left as the extension's bytes
    until :func:`as_inspection` makes them a :class:`GraphInspection`: ``graphscope run`` reads
    each graph inside the program's capture loop and builds the arrays after it."""
    return call(ensure_loaded().inspect_graph, int(graph_ptr), False)


def as_inspection(d: Any) -> GraphInspection:
    """A :class:`GraphInspection` from :func:`read_graph`'s answer."""
    return GraphInspection(
        graph_id=int(d["graph_id"]),
        node_id=column(d["node_id"], "<u8"),
        node_type=column(d["node_type"], "<i4"),
        grid=column(d["grid"], "<i4", 3),
        block=column(d["block"], "<i4", 3),
        smem=column(d["smem"], "<u4"),
        bytes=column(d["bytes"], "<u8"),
        name_idx=column(d["name_idx"], "<i4"),
        names=list(d["names"]),
        demangled=list(d["demangled"]),
        edge_from=column(d["edge_from"], "<u8"),
        edge_to=column(d["edge_to"], "<u8"),
        registers=column(d["regs"], "<i4") if "regs" in d else None,
    )


def read_capture(stream: int, detach_count: bool) -> Any:
    """:func:`read_graph` of the graph being captured on ``stream``, with the graph's nodes
    listed once: with ``detach_count``, node counting is detached at the same listing (its
    waiting notes resolved from it, :func:`graphscope.native.nodecount.detach`). None when the
    stream is not capturing (counting is detached all the same). ``graphscope run`` calls it
    just before the program's ``capture_end``."""
    return call(ensure_loaded().read_capture, int(stream), bool(detach_count))


def capture_graph(stream: int) -> int:
    """The graph being captured on ``stream`` (a ``cudaStream_t`` handle), 0 when the stream is
    not capturing. Valid until the capture ends; nodes may be read, not removed."""
    return int(call(ensure_loaded().capture_graph, int(stream)))


def positional_ids() -> bool | None:
    """Whether graph node ids are read as the nodes' positions in the driver's list (checked
    against CUPTI node by node on the process's first graph, then on each graph's first and
    last node; csrc/inspect.h): None until a graph was read."""
    state = int(extension().positional_ids())
    return None if state < 0 else bool(state)


def warm_graph_ids() -> str:
    """Read CUPTI's ids of an empty graph made and dropped now: a process's first id read
    costs ~15 ms, which ``graphscope run`` takes at its start rather than in the program's
    first capture. Returns why it could not ('' when done)."""
    return str(call(ensure_loaded().warm_graph_ids))


def demangled(ins: GraphInspection, cache: dict[str, str]) -> GraphInspection:
    """``ins`` with its kernel names demangled, through ``cache`` (raw name -> demangled),
    which a capture loop's graphs share: a ladder's buckets launch the same kernels."""
    out = []
    for name in ins.names:
        d = cache.get(name)
        if d is None:
            d = cache[name] = demangle(name)
        out.append(d)
    return replace(ins, demangled=out)


def exec_id(graph_exec_ptr: int) -> int:
    return int(call(ensure_loaded().exec_id, int(graph_exec_ptr)))


def graph_id(graph_ptr: int) -> int:
    return int(call(ensure_loaded().graph_id, int(graph_ptr)))


def debug_dot_print(graph_ptr: int, path: str) -> None:
    call(ensure_loaded().debug_dot_print, int(graph_ptr), str(path))


def demangle(name: str) -> str:
    ext = maybe_extension()
    return str(ext.demangle(name)) if ext is not None else name
