"""The CUPTI resource-callback recorder (csrc/recorder.cpp) and what it stores with each node:
the capturing thread's scope and op (csrc/scopes.h), and the capture session it records for.

One subscriber per process is CUPTI's rule, so the subscription is the extension's state; the
Python side keeps none of its own. :func:`recording` holds it for one ``with`` body; a
:class:`HeldRecorder` keeps it across consecutive capture windows for its owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import ProfilerActiveError
from .loader import _ext, call, column, ensure_loaded, extension
from .profilers import BEFORE_PROFILER, profiler_active


@dataclass(frozen=True)
class CreatedNodes:
    """GRAPHNODE_CREATED and clone records of one recorder window, as columns."""

    node_id: np.ndarray
    graph_id: np.ndarray
    node_type: np.ndarray
    scope: np.ndarray
    op: np.ndarray
    thread: np.ndarray
    clone_id: np.ndarray
    clone_origin: np.ndarray
    exec_id: np.ndarray
    exec_graph: np.ndarray
    callback_errors: int


def records() -> CreatedNodes:
    """The recorder's rows so far, as columns."""
    d = extension().recorder_records()
    return CreatedNodes(
        node_id=column(d["node_id"], "<u8"),
        graph_id=column(d["graph_id"], "<u4"),
        node_type=column(d["node_type"], "<i4"),
        scope=column(d["scope"], "<i8"),
        op=column(d["op"], "<i8"),
        thread=column(d["thread"], "<u8"),
        clone_id=column(d["clone_id"], "<u8"),
        clone_origin=column(d["clone_origin"], "<u8"),
        exec_id=column(d["exec_id"], "<u4"),
        exec_graph=column(d["exec_graph"], "<u4"),
        callback_errors=int(d["callback_errors"]),
    )


def recorder_active() -> bool:
    """Whether the recorder holds CUPTI's callback subscription now."""
    return _ext is not None and bool(_ext.recorder_active())


def recorder_held() -> bool:
    """Whether the recorder holds a subscription kept across capture windows
    (:class:`HeldRecorder`), not one :func:`recording` window's."""
    return _ext is not None and bool(_ext.recorder_held())


def release_held() -> None:
    """Let go of a subscription held across capture windows (:class:`HeldRecorder`): before a
    torch.profiler session starts (CUPTI has one subscriber; Kineto needs it), before another
    :func:`recording` and before node counting (while subscribed, every captured launch pays
    for the callbacks). A window open at that moment notices (:attr:`HeldRecorder.cut`)."""
    if recorder_held():
        call(extension().recorder_stop)


BEFORE_PROFILER.append(release_held)


def refuse_under_profiler() -> None:
    if profiler_active():
        raise ProfilerActiveError(
            "torch.profiler is active: graphscope cannot subscribe to CUPTI while it runs; "
            "capture outside the profiler's `with` block"
        )


@contextmanager
def recording() -> Iterator[list[CreatedNodes]]:
    """Hold the CUPTI resource-callback subscription for the ``with`` body only.

    Yields a list that holds the records once the body ends (also when it raises). The
    subscription is released on every path. A subscription held across captures is released
    first.
    """
    ext = ensure_loaded()
    release_held()
    refuse_under_profiler()
    call(ext.recorder_start, True)
    out: list[CreatedNodes] = []
    try:
        yield out
    finally:
        try:
            call(ext.recorder_stop)
        finally:
            out.append(records())


class HeldRecorder:
    """The CUPTI resource-callback subscription kept across consecutive capture windows
    (``graphscope run``'s batch of a program's capture loop, which owns one): subscribing and
    unsubscribing cost about 0.5 ms per capture on the H200, a tenth of a small decode graph's
    capture. Between windows the callbacks are off (the recorder's gate shut disables them in
    CUPTI: with them on, a counted capture between two windows had CUPTI deliver a record for
    every node it created and instantiate cloned, for the gate to drop). Let go by
    :func:`release_held` (:meth:`release`): when the batch is read (the program's first replay,
    a pause, the end), when a capture fails, before a torch.profiler session starts and before
    any other :func:`recording`; the next window subscribes again."""

    def __init__(self) -> None:
        # the last window lost the subscription while open (a profiler started inside the
        # capture): the nodes made after that went unrecorded; the window's owner reads it
        self.cut = False

    @property
    def held(self) -> bool:
        return recorder_held()

    @contextmanager
    def window(self) -> Iterator[list[CreatedNodes]]:
        """One capture window's records (the list holds them once the body ends)."""
        ext = ensure_loaded()
        self.cut = False
        if not ext.recorder_held():
            refuse_under_profiler()
            call(ext.recorder_start, True, True)
        else:
            ext.recorder_clear()
            call(ext.recorder_gate, True)  # CUPTI's callbacks on again (off between windows)
        out: list[CreatedNodes] = []
        try:
            yield out
        finally:
            self.cut = not ext.recorder_held()
            ext.recorder_gate(False)
            try:
                out.append(records())
            finally:
                ext.recorder_clear()

    def release(self) -> None:
        release_held()


# The per-thread scope stack and op id, in the extension: what GRAPHNODE_CREATED stores with a
# node. Cheap enough for module hooks.
def push_scope(scope_id: int) -> None:
    extension().push_scope(scope_id)


def pop_scope() -> int:
    return int(extension().pop_scope())


def current_scope() -> int:
    return -1 if _ext is None else int(_ext.current_scope())


def retire_slots() -> None:
    """Retire every thread's backward slot (after a backward call, at capture end)."""
    if _ext is not None:
        _ext.retire_slots()


def set_current_op(op_id: int) -> int:
    return int(extension().set_current_op(op_id))


# The capture session the extension serves (graphscope.annotate.session.Session): handed to it
# when an annotated capture window opens, taken back when it closes. mark_kernels and the
# module-call type open scopes only while it holds one, and call its resolve/push/pop.
def open_session(session: Any) -> None:
    """Hand ``session`` to the extension; raises if it already holds one."""
    call(extension().session_open, session)


def close_session() -> None:
    """Take the session back from the extension (nothing when it holds none)."""
    if _ext is not None:
        _ext.session_close()


def active_session() -> Any:
    """The session the extension holds, or None outside annotated capture windows."""
    return None if _ext is None else _ext.active_session()
