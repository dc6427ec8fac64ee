"""The capture-source protocol: every way graphscope obtains graphs is one class behind it.

A source turns a job into a :class:`RawCapture`: per graph, the template inspection, the
recorder rows of its capture window, its exec id and driver DOT, plus either a ``replay``
callable (graphscope traces it afterwards) or the replays it already traced itself (a program
observed by ``graphscope run``). Everything after that — building the Graph model, joining
timings, writing the bundle — is shared (:func:`graphscope.capture.finish.finish`).

Every source registers in :data:`SOURCES`: the model-file ones (``takes = "model"``: step,
forward, callables) are ``--mode``'s choices; ``run`` (``takes = "program"``) watches a program
(``graphscope run``, :func:`graphscope.profile`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional, Protocol

from .. import native

Phase = Callable[[str], None]


@dataclass
class RawGraph:
    """One captured graph before it becomes a :class:`~graphscope.model.graph.CapturedGraph`."""

    name: str
    inspection: native.GraphInspection
    records: native.CreatedNodes
    exec_id: int
    dot: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    # (exec node id -> extra annotation) for work nodes that scopes could not tag
    place: Optional[Callable[[Any], Optional[Mapping[str, Any]]]] = None


@dataclass
class RawCapture:
    """What a source produced: graphs, and how to time them."""

    graphs: list[RawGraph]
    replay: Optional[Callable[[], None]] = None  # one replay of every graph, in order
    join: Any = None  # a JoinResult when the source traced replays itself
    meta: dict[str, Any] = field(default_factory=dict)  # goes into the manifest
    # more bundle files: {name: made after the replays, before the write} (eager.json)
    extra_files: dict[str, Callable[[], Mapping[str, Any]]] = field(default_factory=dict)


@dataclass
class ModelJob:
    """A loaded model file, on the GPU: what model-file sources capture."""

    model: Any
    args: tuple
    kwargs: dict[str, Any]
    loss_fn: Callable[[Any], Any]
    warmup: int
    depth: Optional[int]
    backward: bool
    record_ops: bool
    settings: Mapping[str, Any] = field(default_factory=dict)
    buckets: tuple = ()  # extra input sets (forward mode)
    step: Optional[Callable[..., Any]] = None  # the user's whole step (step mode)
    try_streams: int = 0  # also capture over this many streams (streams.py, streams_train.py)
    try_compile: Optional[str] = None  # also capture with these modules compiled (compile.py)
    replays: int = 20  # traced replays (--try-streams/--try-compile: as many of each version)


@dataclass
class ProgramJob:
    """An unmodified program to run in this process (``graphscope run``)."""

    target: str  # a script, or a module with ``module=True``
    args: list[str]
    # a graphscope.capture.config.CaptureConfig (replays, skip_replays, graphs, depth, ...)
    config: Any
    module: bool = False
    exit_code: Optional[int] = None  # the program's, once it ran


class CaptureSource(Protocol):
    """Turns a job (a loaded model file, or a program) into graphs."""

    name: ClassVar[str]
    help: ClassVar[str]
    takes: ClassVar[str]  # "model" (a ModelJob: --mode NAME) or "program" (a ProgramJob)

    def capture(self, job: Any, phase: Phase) -> RawCapture: ...


SOURCES: dict[str, type[CaptureSource]] = {}


def register(cls: type[CaptureSource]) -> type[CaptureSource]:
    """Class decorator: make a source selectable by name (``--mode NAME`` for model files)."""
    SOURCES[cls.name] = cls
    return cls


def default_output(target: str, command: str, module: bool = False) -> str:
    """Where a bundle goes without ``-o``: ``graphscope-out/<stem>.<command>``, the stem being
    the model file's or program's name (a module's last part with ``module=True``)."""
    stem = target.rsplit(".", 1)[-1] if module else os.path.splitext(os.path.basename(target))[0]
    return os.path.join("graphscope-out", f"{stem}.{command}")


def unplaced_reason(node: Any) -> Optional[dict[str, Any]]:
    """Why a work node has no module: said in the node, never lumped silently."""
    where = f" ({node.op} at {node.source})" if node.op and node.source else (
        f" ({node.op})" if node.op else "")
    return {"unplaced_reason": f"launched outside any module, loss and optimizer step{where}"}


def _dot_dir() -> Optional[str]:
    """Where the driver writes a DOT for graphscope to read back: memory (``/dev/shm``) where
    it can, else the temporary directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def read_dot(graph_ptr: int) -> str:
    """The driver's verbose DOT of a template graph (cudaGraphDebugDotPrint)."""
    fd, path = tempfile.mkstemp(suffix=".dot", prefix="graphscope-", dir=_dot_dir())
    os.close(fd)
    try:
        native.debug_dot_print(graph_ptr, path)
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    finally:
        os.unlink(path)


def inspect_template(cuda_graph: Any, name: str, records: native.CreatedNodes,
                     dot: bool = True) -> RawGraph:
    """Inspect a kept template (before it is dropped); the exec id is filled in later."""
    ptr = cuda_graph.raw_cuda_graph()
    return RawGraph(name, native.inspect_graph(ptr), records, -1,
                    read_dot(ptr) if dot else "", place=unplaced_reason)


def set_exec_id(raw: RawGraph, cuda_graph: Any) -> None:
    raw.exec_id = native.exec_id(cuda_graph.raw_cuda_graph_exec())


def warmup(step: Callable[[], Any], n: int) -> None:
    """``n`` eager iterations on a side stream (torch's recipe before a capture)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
