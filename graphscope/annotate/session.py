"""One annotated capture window: the CUPTI recorder subscribed, backward attribution armed,
the op mode entered; everything undone on exit, on every path."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .. import native
from .._errors import AnnotationError
from ..native import nodecount
from . import state
from .backward import accumulation_scope, prepare_backward
from .ops import _op_mode_cls, default_skip_dirs, native_ops_possible, record_memory


class Session:
    """One annotated capture window (or a make_graphed_callables call)."""

    def __init__(self, record_ops: bool) -> None:
        self.record_ops = record_ops
        self.record_memory = record_ops and record_memory()  # each op call's memory ranges
        self.hooked: set[Any] = set()  # nodes given a pre-hook during this session
        self.skip_dirs = default_skip_dirs()
        self.main_thread = threading.get_ident()
        self._modes: list[Any] = []
        self._real_run_backward: Any = None
        self._real_make_grads: Any = None
        # AccumulateGrad node -> backward scope id (-1: none, MK9); set by graphscope run
        self.leaf_scope: Any = None
        self.ddp: Any = None  # a DDPWatch (the attribution's ddp when the session starts)
        # graphscope.native._opwatch while it attributes backward (no per-node Python hooks)
        self.native_backward: Any = None
        self._observer: Any = None
        self.backward_calls = 0  # backward/grad calls in the window (autograd's thread works)

    def enter(self) -> None:
        import torch.autograd

        attribution = state.ATTRIBUTION
        ownership, scopes = attribution.ownership, attribution.scopes
        obs = native.op_observer()
        ownership.use(obs)
        ownership.start(self.main_thread)
        self._real_run_backward = torch.autograd._engine_run_backward
        real = self._real_run_backward

        def run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
            create_graph = bool(args[2]) if len(args) > 2 else bool(
                kwargs.get("create_graph", False))
            self.backward_calls += 1
            watch = prepare_backward(self, t_outputs, create_graph)
            if watch:
                watch.backward_begin()
            try:
                return real(t_outputs, *args, **kwargs)
            finally:
                if watch:
                    watch.backward_end()
                native.retire_slots()

        torch.autograd._engine_run_backward = run_backward
        self._real_make_grads = torch.autograd._make_grads
        real_make = self._real_make_grads

        def make_grads(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            # The gradient seed (ones_like) belongs to the backward of whoever made the output,
            # where no scope is open (inside mark_kernels it keeps that scope).
            if native.current_scope() >= 0:
                return real_make(outputs, *args, **kwargs)
            scope = -1
            for t in outputs:
                node = getattr(t, "grad_fn", None)
                if node is not None:
                    sid = ownership.owner_scope(node)
                    scope = scopes[sid].backward_scope if sid >= 0 else -1
                    break
            if scope < 0:
                return real_make(outputs, *args, **kwargs)
            native.push_scope(scope)
            try:
                return real_make(outputs, *args, **kwargs)
            finally:
                native.pop_scope()

        torch.autograd._make_grads = make_grads
        self.ddp = attribution.ddp
        if self.ddp is not None:
            self.ddp.arm()
        native_ops = obs is not None and native_ops_possible(self)
        if obs is not None:  # the RecordFunction observer: backward always, ops where it can
            obs.enable(native.extension().set_op_address(), self.main_thread,
                       list(self.skip_dirs), record_ops=native_ops, record_source=True,
                       record_memory=self.record_memory,
                       backward=True)
            self._observer = obs
            self.native_backward = obs
        if (self.record_ops or attribution.streams or self.ddp is not None) and not native_ops:
            dm = _op_mode_cls()(self)
            dm.__enter__()
            self._modes.append(dm)

    def exit(self) -> None:
        import torch.autograd

        try:
            while self._modes:
                self._modes.pop().__exit__(None, None, None)
            if getattr(self, "ddp", None) is not None:
                self.ddp.disarm()
        finally:
            if self._real_run_backward is not None:
                torch.autograd._engine_run_backward = self._real_run_backward
            if self._real_make_grads is not None:
                torch.autograd._make_grads = self._real_make_grads
            if self._observer is not None:
                self._observer.disable()
                self._observer = self.native_backward = None
            state.ATTRIBUTION.ownership.stop()
            native.retire_slots()
            self.hooked.clear()


class CountedSession(Session):
    """A counted window that records no ops (:class:`CountedWindow`): module, ``mark_kernels``
    and memory scopes only. No autograd patches, op observer or ownership notes per window: a
    backward run inside it is counted by :func:`backward_counter`, held for a batch of
    captures, and leaves the window's nodes without scopes (the caller's check, as for a
    :class:`Session`'s ``backward_calls``). Made once per capture of a serving ladder's
    bucket: it sets only what a window reads (the rest are class defaults)."""

    record_ops = False
    record_memory = False
    skip_dirs: tuple[str, ...] = ()
    ddp = None
    native_backward = None
    _observer = None

    def __init__(self) -> None:  # not Session's: no per-window directories or env reads
        self.hooked: set[Any] = set()
        self.leaf_scope: Any = None
        self.backward_calls = 0
        self.main_thread = threading.get_ident()

    def enter(self) -> None:
        ownership = state.ATTRIBUTION.ownership
        if ownership.native is None:  # scope pushes through the native observer's fast path
            ownership.use(native.op_observer())

    def exit(self) -> None:
        pass


class CountedWindow:
    """:func:`session` for a counted capture that records no ops: what a serving ladder's
    buckets past their op captures need (module and memory scopes by node counts), without the
    per-window setup of backward attribution and the op observer (on the H200, the windows'
    opening and closing, counting included, went from 7.2 to 4.4 ms over a 67-bucket ladder's
    captures: the bundles' ``subscribe`` and ``unsubscribe`` causes). A plain class, not a
    generator: ``graphscope run`` opens one per bucket inside the program's capture loop.
    ``__enter__`` returns a list that holds the window's
    :class:`~graphscope.native.nodecount.CountedNodes` once it has exited. ``fake``: the count is
    :func:`graphscope.native.nodecount.start`'s fake one (tests without a GPU)."""

    __slots__ = ("how", "fake", "records")

    def __init__(self, count_how: int, fake: bool = False) -> None:
        self.how = count_how
        self.fake = fake
        self.records: list[Any] = []

    def __enter__(self) -> list[Any]:
        attribution = state.ATTRIBUTION
        if attribution.active is not None:
            raise AnnotationError("an annotated capture is already running in this process")
        nodecount.start(self.fake, self.how)
        s = CountedSession()
        attribution.active = s
        try:
            s.enter()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.records

    def __exit__(self, *exc: Any) -> None:
        state.ATTRIBUTION.active = None
        self.records.append(nodecount.stop())


def counted_window(count_how: int, fake: bool = False) -> CountedWindow:
    """A :class:`CountedWindow` counting the ``count_how`` way."""
    return CountedWindow(count_how, fake)


def backward_counter() -> Any:
    """Count backward calls made inside a :class:`CountedSession` (autograd's engine entered
    through ``torch.autograd._engine_run_backward``, as ``backward()`` and
    ``torch.autograd.grad`` do) into its ``backward_calls``; returns a handle whose
    ``remove()`` puts the engine's entry back. Held across a batch of captures: install it
    before a window's :class:`Session` patches the same entry (sessions restore what they
    found) and remove it outside windows."""
    import torch.autograd

    real = torch.autograd._engine_run_backward
    attribution = state.ATTRIBUTION

    def run_backward(*args: Any, **kwargs: Any) -> Any:
        active = attribution.active
        if type(active) is CountedSession:
            active.backward_calls += 1
        return real(*args, **kwargs)

    class _Undo:
        def remove(self) -> None:
            if torch.autograd._engine_run_backward is run_backward:
                torch.autograd._engine_run_backward = real

    torch.autograd._engine_run_backward = run_backward
    return _Undo()


def annotations_active() -> bool:
    """True inside an annotated capture (``graph(..., enable_annotations=True)``).

    A session exists only while the recorder holds its subscription (see :func:`session`).
    """
    return state.ATTRIBUTION.active is not None


@contextlib.contextmanager
def session(record_ops: bool = False, held: bool = False, counted: bool = False,
            count_how: int = 0) -> Iterator[list[Any]]:
    """Subscribe the recorder and start backward attribution; yields the records list.
    ``held``: through the subscription :data:`graphscope.native.HELD` keeps across windows.
    ``counted``: no subscription; the list gets one
    :class:`graphscope.native.nodecount.CountedNodes`
    (the capture attached with :func:`graphscope.native.nodecount.attach`), not recorder rows,
    counted
    the ``count_how`` way (:data:`graphscope.native.nodecount.WALK`, ``DEPS`` or ``VERIFY``)."""
    attribution = state.ATTRIBUTION
    if attribution.active is not None:
        raise AnnotationError("an annotated capture is already running in this process")
    window: Any = (nodecount.counting(how=count_how) if counted else native.HELD.window() if held
                   else native.recording())
    with window as records:
        s = Session(record_ops)
        attribution.active = s
        try:
            s.enter()
            yield records
        finally:
            try:
                s.exit()
            finally:
                attribution.active = None
    for i, rec in enumerate(records):
        if isinstance(rec, native.CreatedNodes):  # counted: when its nodes are read
            records[i] = resolve_accumulation(rec)


def resolve_accumulation(rec: native.CreatedNodes) -> native.CreatedNodes:
    """Scope ``-(b + 2)`` is backward scope ``b``'s gradient accumulation (the native
    observer's encoding, csrc/opwatch.cpp): give those nodes the accumulation scope."""
    import dataclasses

    import numpy as np

    sc = rec.scope
    marked = sc <= -2
    if not marked.any():
        return rec
    out = np.array(sc, copy=True)
    for code in np.unique(sc[marked]).tolist():
        out[sc == code] = accumulation_scope(-int(code) - 2)
    return dataclasses.replace(rec, scope=out)
