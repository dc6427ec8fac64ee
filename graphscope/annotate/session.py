"""One annotated capture window: a :class:`Session`, made per capture and handed to the
extension for the window (``native.open_session``), which then opens scopes through it. The
CUPTI recorder subscribed (or node counting on), backward attribution armed, the op mode
entered; everything undone on exit, on every path."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pickle import dumps
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import native
from .._errors import AnnotationError
from ..native import nodecount
from .backward import accumulation_scope, prepare_backward
from .ops import default_skip_dirs, native_ops_possible, op_mode_class, record_memory
from .scopes import Annotation, ScopeTable, normalize
from .tables import TABLES, Tables

if TYPE_CHECKING:
    from .training import DDPWatch

LeafScope = Callable[[Any], int]  # AccumulateGrad node -> backward scope id (-1: none, MK9)


class Session:
    """One annotated capture window (or a make_graphed_callables call): what it records and how
    its scopes are opened. Made per capture by its caller and passed to :func:`run_session`.

    Args:
        record_ops: record each node's aten op, shapes and source line.
        ddp: DDP's reducer work placed by bucket (:class:`~.training.DDPWatch`).
        leaf_scope: the scope of an AccumulateGrad node, where the caller knows which module
            owns each parameter.
        tables: the attribution tables scopes and ops are interned in.
    """

    def __init__(self, record_ops: bool = False, *, ddp: Optional[DDPWatch] = None,
                 leaf_scope: Optional[LeafScope] = None, tables: Tables = TABLES) -> None:
        self.tables = tables
        self.record_ops = record_ops
        self.record_memory = record_ops and record_memory()  # each op call's memory ranges
        self.ddp = ddp
        self.leaf_scope = leaf_scope
        self.hooked: set[Any] = set()  # autograd nodes given a pre-hook in this capture
        self.skip_dirs: tuple[str, ...] = default_skip_dirs()
        self.main_thread = threading.get_ident()
        self.backward_calls = 0  # backward/grad calls in the window (autograd's thread works)
        # graphscope.native._opwatch while it attributes backward (no per-node Python hooks)
        self.native_backward: Optional[ModuleType] = None
        self._observer: Optional[ModuleType] = None
        self._modes: list[Any] = []
        self._undo: list[Callable[[], None]] = []  # autograd's entries put back

    # -- opening scopes: the extension (mark_kernels, module calls) and the hooks call these
    def resolve(self, annotation: Annotation, parent: int, backward: bool) -> int:
        """The scope id for ``annotation`` opened inside scope ``parent`` (interned).

        A scope entered before costs a pickle and a lookup (the pickle is the interning key
        normalize() would make); a new one is normalised and validated first (MK12)."""
        scopes = self.tables.scopes
        sid = None
        if type(annotation) is dict:
            try:
                sid = scopes.lookup(parent, dumps(annotation, protocol=4), backward)
            except Exception:
                sid = None  # not picklable: normalize() names the culprit below
        if sid is None:
            ann, frozen = normalize(annotation)
            sid = scopes.child(parent, ann, backward, frozen)
        return sid

    def push(self, scope_id: int) -> None:
        """Open scope ``scope_id`` on this thread, noted for backward ownership."""
        self.tables.ownership.push(scope_id)

    def pop(self) -> None:
        self.tables.ownership.pop()

    def open_scope(self, annotation: dict[str, Any], backward: bool,
                   frozen: Optional[bytes] = None) -> None:
        """Open the scope ``annotation`` makes inside this thread's current one (MK4: inner
        wins shared keys); ``frozen`` is its pickle where the caller has it."""
        self.push(self.tables.scopes.child(native.current_scope(), annotation, backward, frozen))

    def close_scope(self) -> None:
        self.pop()

    # -- the window
    def enter(self) -> None:
        ownership = self.tables.ownership
        obs = native.op_observer()
        ownership.use(obs)
        ownership.start(self.main_thread)
        self._patch_autograd()
        if self.ddp is not None:
            self.ddp.arm()
        native_ops = obs is not None and native_ops_possible(self)
        if obs is not None:  # the RecordFunction observer: backward always, ops where it can
            obs.enable(native.extension().set_op_address(), self.main_thread,
                       list(self.skip_dirs), record_ops=native_ops, record_source=True,
                       record_memory=self.record_memory, backward=True)
            self._observer = self.native_backward = obs
        if (self.record_ops or self.tables.streams or self.ddp is not None) and not native_ops:
            mode = op_mode_class()(self)
            mode.__enter__()
            self._modes.append(mode)

    def _patch_autograd(self) -> None:
        """Wrap autograd's engine entry (backward attribution per call) and its gradient seed
        (``ones_like`` of an output belongs to the backward of whoever made the output)."""
        import torch.autograd

        real = torch.autograd._engine_run_backward
        real_make = torch.autograd._make_grads
        ownership = self.tables.ownership

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

        def make_grads(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            # where no scope is open (inside mark_kernels the seed keeps that scope)
            if native.current_scope() >= 0:
                return real_make(outputs, *args, **kwargs)
            node = next((n for n in (getattr(t, "grad_fn", None) for t in outputs)
                         if n is not None), None)
            scope = ownership.backward_scope(node) if node is not None else -1
            if scope < 0:
                return real_make(outputs, *args, **kwargs)
            native.push_scope(scope)
            try:
                return real_make(outputs, *args, **kwargs)
            finally:
                native.pop_scope()

        def undo() -> None:
            torch.autograd._engine_run_backward = real
            torch.autograd._make_grads = real_make

        torch.autograd._engine_run_backward = run_backward
        torch.autograd._make_grads = make_grads
        self._undo.append(undo)

    def exit(self) -> None:
        try:
            while self._modes:
                self._modes.pop().__exit__(None, None, None)
            if self.ddp is not None:
                self.ddp.disarm()
        finally:
            while self._undo:
                self._undo.pop()()
            if self._observer is not None:
                self._observer.disable()
                self._observer = self.native_backward = None
            self.tables.ownership.stop()
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

    def __init__(self, tables: Tables = TABLES) -> None:  # no per-window directories or env
        self.tables = tables
        self.hooked: set[Any] = set()
        self.leaf_scope: Optional[LeafScope] = None
        self.backward_calls = 0
        self.main_thread = threading.get_ident()

    def enter(self) -> None:
        ownership = self.tables.ownership
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
        _refuse_a_second()
        nodecount.start(self.fake, self.how)
        s = CountedSession()
        native.open_session(s)
        try:
            s.enter()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.records

    def __exit__(self, *exc: Any) -> None:
        native.close_session()
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
    active_session = native.active_session

    def run_backward(*args: Any, **kwargs: Any) -> Any:
        active = active_session()
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
    return native.active_session() is not None


def _refuse_a_second() -> None:
    if native.active_session() is not None:
        raise AnnotationError("an annotated capture is already running in this process")


@contextlib.contextmanager
def run_session(s: Session, held: Optional[native.HeldRecorder] = None, counted: bool = False,
                count_how: int = 0) -> Iterator[list[Any]]:
    """Run session ``s`` for the ``with`` body: subscribe the recorder, hand ``s`` to the
    extension and start backward attribution; yields the records list.
    ``held``: through the subscription that recorder keeps across windows.
    ``counted``: no subscription; the list gets one
    :class:`graphscope.native.nodecount.CountedNodes` (the capture attached with
    :func:`graphscope.native.nodecount.attach`), not recorder rows, counted the ``count_how``
    way (:data:`graphscope.native.nodecount.WALK`, ``DEPS`` or ``VERIFY``)."""
    _refuse_a_second()
    window: Any = (nodecount.counting(how=count_how) if counted else
                   held.window() if held is not None else native.recording())
    with window as records:
        native.open_session(s)
        try:
            s.enter()
            yield records
        finally:
            try:
                s.exit()
            finally:
                native.close_session()
    for i, rec in enumerate(records):
        if isinstance(rec, native.CreatedNodes):  # counted: when its nodes are read
            records[i] = resolve_accumulation(rec, s.tables.scopes)


def session(record_ops: bool = False, held: Optional[native.HeldRecorder] = None,
            counted: bool = False, count_how: int = 0, *, ddp: Optional[DDPWatch] = None,
            leaf_scope: Optional[LeafScope] = None) -> contextlib.AbstractContextManager[
                list[Any]]:
    """:func:`run_session` of a new :class:`Session` with these options."""
    return run_session(Session(record_ops, ddp=ddp, leaf_scope=leaf_scope), held, counted,
                       count_how)


def resolve_accumulation(rec: native.CreatedNodes, scopes: ScopeTable) -> native.CreatedNodes:
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
        out[sc == code] = accumulation_scope(scopes, -int(code) - 2)
    return dataclasses.replace(rec, scope=out)
