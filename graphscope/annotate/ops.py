"""Per-node context: the aten op that launched a node, its input shapes and the user's source
line, and ``mark_stream``. Recorded once per op call by the native RecordFunction observer
(csrc/opwatch.cpp) where graphscope was built against the running torch, else by the
TorchDispatchMode below; both intern into the :class:`OpTable` (``state.ATTRIBUTION.ops``)."""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Optional

from .. import native
from .._errors import AnnotationError
from . import state
from .scopes import Annotation, normalize

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class OpRecord:
    """The aten op that launched a node, its inputs and the user's source line."""

    op: str
    shapes: str
    source: Optional[str]


Ranges = tuple[tuple[int, int], ...]  # [start, end) device byte ranges


@dataclass(frozen=True)
class OpCall:
    """One op call of a capture: its record and the device memory it read and wrote (its
    tensor arguments' spans; ``(a!)`` arguments, i.e. in-place and ``out=``, and the outputs
    are writes)."""

    op: str
    shapes: str
    source: Optional[str]
    reads: Ranges
    writes: Ranges


def _pairs(flat: Any) -> Ranges:
    return tuple(sorted(set(zip(flat[0::2], flat[1::2]))))


class OpTable:
    """Op ids -> records. Ids below ``OP_BASE`` are interned here (the dispatch mode, Triton
    launches); ``OP_BASE + i`` is row ``i`` of the native observer's table (csrc/opwatch.cpp)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[OpRecord] = []
        self._index: dict[OpRecord, int] = {}
        self._native: list[OpRecord] = []
        # op calls with memory: [op id, reads, writes] (flat [s0, e0, ...]); the dispatch
        # mode's (ids from PY_CALL_BASE) and the native observer's (from CALL_BASE), cached
        self._py_calls: list[tuple[int, list[int], list[int]]] = []
        self._native_calls: list[tuple[int, list[int], list[int]]] = []

    def __getitem__(self, op_id: int) -> OpRecord:
        rec = self.get(op_id)
        if rec is None:
            raise KeyError(op_id)
        return rec

    def __len__(self) -> int:
        return len(self._ops)

    def records(self) -> list[OpRecord]:
        """Every record so far: the interned ones, then the native observer's."""
        self._sync_native()
        return self._ops + self._native

    def _sync_native(self) -> None:
        obs = native.op_observer()
        if obs is not None:
            self._native.extend(OpRecord(*row) for row in obs.table(len(self._native)))

    def new_call(self, op_id: int) -> tuple[int, list[int], list[int]]:
        """A dispatch-mode op call of ``op_id``: its id and the (reads, writes) lists to fill."""
        reads: list[int] = []
        writes: list[int] = []
        with self._lock:
            self._py_calls.append((op_id, reads, writes))
            return PY_CALL_BASE + len(self._py_calls) - 1, reads, writes

    def _call(self, call_id: int) -> Optional[tuple[int, list[int], list[int]]]:
        if call_id >= PY_CALL_BASE:
            i = call_id - PY_CALL_BASE
            return self._py_calls[i] if i < len(self._py_calls) else None
        i = call_id - CALL_BASE
        if i >= len(self._native_calls):
            obs = native.op_observer()
            if obs is not None:
                self._native_calls.extend(obs.calls(len(self._native_calls)))
        return self._native_calls[i] if i < len(self._native_calls) else None

    def get(self, op_id: int) -> Optional[Any]:
        """The record of ``op_id`` (an :class:`OpCall` for a call id), or None for -1 and
        unknown ids."""
        if op_id >= CALL_BASE:
            call = self._call(op_id)
            rec = self.get(call[0]) if call is not None else None
            if call is None or rec is None:
                return None
            return OpCall(rec.op, rec.shapes, rec.source, _pairs(call[1]), _pairs(call[2]))
        if 0 <= op_id < len(self._ops):
            return self._ops[op_id]
        i = op_id - OP_BASE
        if i < 0:
            return None
        if i >= len(self._native):
            self._sync_native()
        return self._native[i] if i < len(self._native) else None

    def intern(self, rec: OpRecord) -> int:
        oid = self._index.get(rec)
        if oid is not None:
            return oid
        with self._lock:
            oid = self._index.setdefault(rec, len(self._ops))
            if oid == len(self._ops):
                self._ops.append(rec)
            return oid


OP_BASE = 1 << 40  # the native observer's first id (csrc/opwatch.cpp kOpBase)
CALL_BASE = 2 << 40  # the native observer's op calls with memory (kCallBase)
PY_CALL_BASE = 3 << 40  # the dispatch mode's op calls with memory


def record_memory() -> bool:
    """Whether captures record each op call's memory ranges (false-serialization analysis);
    ``GRAPHSCOPE_MEMORY_RANGES=0`` turns it off."""
    return os.environ.get("GRAPHSCOPE_MEMORY_RANGES", "1") != "0"


def _tensor_range(t: Any, out: list[int]) -> None:
    """Append the [start, end) bytes a CUDA tensor's elements span (as csrc/opwatch.cpp)."""
    if not t.is_cuda or t.is_sparse or t.numel() == 0:
        return
    base = t.data_ptr()
    if not base:
        return
    lo = hi = 0
    for size, stride in zip(t.shape, t.stride()):
        step = (size - 1) * stride
        if step < 0:
            lo += step
        else:
            hi += step
    item = t.element_size()
    out += (base + lo * item, base + (hi + 1) * item)


def _value_ranges(v: Any, out: list[int]) -> None:
    import torch

    if isinstance(v, torch.Tensor):
        _tensor_range(v, out)
    elif isinstance(v, (list, tuple)):
        for e in v:
            if isinstance(e, torch.Tensor):
                _tensor_range(e, out)


def note_call_memory(func: Any, args: Any, kwargs: Any, reads: list[int],
                     writes: list[int]) -> None:
    """The op's arguments: ``(a!)`` ones (in-place, ``out=``) are writes, the rest reads."""
    kwargs = kwargs or {}
    for i, a in enumerate(func._schema.arguments):
        v = args[i] if i < len(args) else kwargs.get(a.name)
        if v is not None:
            alias = a.alias_info
            _value_ranges(v, writes if alias is not None and alias.is_write else reads)


def _describe(args: Any) -> str:
    import torch

    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            dt = str(a.dtype).replace("torch.", "")
            parts.append(f"{dt}[{','.join(map(str, a.shape))}]")
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            parts.append("[" + _describe(a) + "]")
        elif isinstance(a, (int, float, bool)) or a is None:
            parts.append(repr(a))
    return ", ".join(parts)


def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__))


def user_source(skip_dirs: tuple[str, ...]) -> Optional[str]:
    """``file:line (function)`` of the innermost frame outside torch and graphscope."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(skip_dirs) and not fn.startswith("<"):
            return f"{fn}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back  # type: ignore[assignment]
    return None


@functools.lru_cache(maxsize=1)
def default_skip_dirs() -> tuple[str, ...]:
    """Frames in these directories are never "the user's line" (made once: every capture
    window's session asks)."""
    return (_torch_dir(), _PKG_DIR, os.path.dirname(contextlib.__file__))


def mark_stream(stream: Any, annotation: Annotation) -> None:
    """Tag all work captured on ``stream`` (a str ``s`` means ``{"stream": s}``).

    The stream's dict is the outermost layer: scopes inside override its keys. Pass
    ``annotation=None`` to forget the stream.
    """
    raw = getattr(stream, "cuda_stream", stream)
    try:  # an integer of any kind (a numpy one too), as int() took before; never None or bool
        if isinstance(raw, bool):
            raise TypeError
        handle = operator.index(raw)
    except TypeError:
        raise AnnotationError(f"mark_stream: stream must be a torch.cuda.Stream or its handle "
                              f"(an int), not {type(stream).__name__}") from None
    if annotation is None:
        state.ATTRIBUTION.streams.pop(handle, None)
        return
    ann = {"stream": annotation} if isinstance(annotation, str) else normalize(annotation)[0]
    state.ATTRIBUTION.streams[handle] = ann


def native_ops_possible(session: Any) -> bool:
    """Whether the native observer can record this session's ops (it always can attribute
    backward). mark_stream and DDP scoping need the dispatch mode's per-op Python hooks."""
    return bool(session.record_ops) and not state.ATTRIBUTION.streams and session.ddp is None


_MODE_CLASSES: dict[str, type] = {}


def _op_mode_cls() -> type:
    if "op" not in _MODE_CLASSES:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        class OpMode(TorchDispatchMode):
            def __init__(self, session: Any) -> None:
                super().__init__()
                self.session = session
                self.streams = state.ATTRIBUTION.streams  # one dict, changed in place
                self.scopes = state.ATTRIBUTION.scopes
                self.ops = state.ATTRIBUTION.ops
                self.names: dict[Any, str] = {}  # op overload -> "aten::addmm"
                self.set_op = native.set_current_op
                try:
                    self.set_op = native.extension().set_current_op  # skip the wrapper
                except Exception:
                    pass

            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                s = self.session
                pushed = False
                if self.streams:
                    base = self.streams.get(torch.cuda.current_stream().cuda_stream)
                    if base is not None:
                        native.push_scope(self.scopes.with_base(native.current_scope(), base))
                        pushed = True
                if s.ddp is not None and not pushed:
                    sid = s.ddp.scope_for(func, args, kwargs)
                    if sid >= 0:
                        native.push_scope(sid)
                        pushed = True
                if s.record_ops:
                    src = (
                        user_source(s.skip_dirs)
                        if threading.get_ident() == s.main_thread
                        else None
                    )
                    name = self.names.get(func)
                    if name is None:
                        name = self.names[func] = str(func.name())
                    rec = OpRecord(name, _describe(args), src)
                    oid = self.ops.intern(rec)
                    call = None
                    if s.record_memory:
                        oid, reads, writes = self.ops.new_call(oid)
                        note_call_memory(func, args, kwargs, reads, writes)
                        call = writes
                    prev = self.set_op(oid)
                try:
                    out = func(*args, **(kwargs or {}))
                    if s.record_ops and call is not None:
                        _value_ranges(out, call)  # the outputs: written by the op
                    return out
                finally:
                    if s.record_ops:
                        self.set_op(prev)
                    if pushed:
                        native.pop_scope()

        _MODE_CLASSES["op"] = OpMode
    return _MODE_CLASSES["op"]
