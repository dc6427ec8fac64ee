"""Per-node context: the aten op that launched a node, its input shapes and the user's source
line, and ``mark_stream``. Recorded once per op call by the native RecordFunction observer
(csrc/opwatch.cpp) where graphscope was built against the running torch, else by the
TorchDispatchMode below; both intern into the session's :class:`~.optable.OpTable`."""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Optional

from .. import native
from .._errors import AnnotationError
from .optable import OpCall, OpRecord, OpTable
from .scopes import Annotation, normalize
from .tables import TABLES

if TYPE_CHECKING:
    from .session import Session

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        TABLES.streams.pop(handle, None)
        return
    ann = {"stream": annotation} if isinstance(annotation, str) else normalize(annotation)[0]
    TABLES.streams[handle] = ann


def native_ops_possible(session: Session) -> bool:
    """Whether the native observer can record this session's ops (it always can attribute
    backward). mark_stream and DDP scoping need the dispatch mode's per-op Python hooks."""
    return session.record_ops and not session.tables.streams and session.ddp is None


class _OpRecorder:
    """What the dispatch mode does per op call: intern its record (and, with memory ranges,
    make a call id noting the tensors it reads and writes) and set the thread's op id."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.ops: OpTable = session.tables.ops
        self.names: dict[Any, str] = {}  # op overload -> "aten::addmm"
        self.set_op = native.set_current_op
        with contextlib.suppress(Exception):
            self.set_op = native.extension().set_current_op  # skip the wrapper

    def begin(self, func: Any, args: Any, kwargs: Any) -> tuple[int, Optional[list[int]]]:
        """Note the op call; returns the thread's previous op id and the list its outputs'
        ranges go to (None without memory ranges)."""
        s = self.session
        src = user_source(s.skip_dirs) if threading.get_ident() == s.main_thread else None
        name = self.names.get(func)
        if name is None:
            name = self.names[func] = str(func.name())
        oid = self.ops.intern(OpRecord(name, _describe(args), src))
        writes = None
        if s.record_memory:
            oid, reads, writes = self.ops.new_call(oid)
            note_call_memory(func, args, kwargs, reads, writes)
        return self.set_op(oid), writes


def _scope_for(session: Session, func: Any, args: Any, kwargs: Any) -> int:
    """The scope an op call is pushed in by the dispatch mode (-1: none): its stream's
    ``mark_stream`` dict laid under the current scope, else DDP's bucket it belongs to."""
    streams = session.tables.streams
    if streams:
        import torch

        base = streams.get(torch.cuda.current_stream().cuda_stream)
        if base is not None:
            return session.tables.scopes.with_base(native.current_scope(), base)
    if session.ddp is not None:
        return session.ddp.scope_for(func, args, kwargs)
    return -1


@functools.cache
def op_mode_class() -> type:
    """The TorchDispatchMode that records ops, streams and DDP buckets where the native observer
    cannot (made once: torch is imported then)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpMode(TorchDispatchMode):
        def __init__(self, session: Session) -> None:
            super().__init__()
            self.session = session
            self.recorder = _OpRecorder(session) if session.record_ops else None

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            sid = _scope_for(self.session, func, args, kwargs)
            if sid >= 0:
                native.push_scope(sid)
            rec = self.recorder
            prev, writes = rec.begin(func, args, kwargs) if rec is not None else (0, None)
            try:
                out = func(*args, **(kwargs or {}))
                if writes is not None:
                    _value_ranges(out, writes)  # the outputs: written by the op
                return out
            finally:
                if rec is not None:
                    rec.set_op(prev)
                if sid >= 0:
                    native.pop_scope()

    return OpMode


__all__ = ["OpCall", "OpRecord", "OpTable", "mark_stream", "note_call_memory", "user_source"]
