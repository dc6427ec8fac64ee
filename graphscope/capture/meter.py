"""What one capture costs: its wall time, its instantiate time, and the memory it took from its
pool, by module scope.

Per capture (:class:`CaptureMeter`, armed from just before ``capture_begin`` to just after
``capture_end``):

- **time**: the capture's wall time and, per module scope, the time between scope entries
  (``marks``: the meter's own global forward pre/post hooks, registered after graphscope's so
  they see the scope the next interval runs in, ``native.current_scope()``; under
  ``graphscope run`` its module hooks append the marks themselves, ``scopes=False``);
- **memory**: the caching allocator's events during the window, from graphscope's allocator
  trace tracker where it is built (``graphscope.native._alloctrace``, csrc/alloctrace.cpp: the
  allocator calls it for every event; it keeps time, action, address, size and pool of those
  inside an open window, on the realtime clock of ``time.time_ns()``), else from the
  allocator's own history (``torch.cuda.memory._record_memory_history`` without stacks,
  cleared when it starts and turned off when it is read: a program's own history session is
  ended by a capture). Each allocation of the window in the graph's pool is attributed to the
  scope active at its time; one ``torch.cuda.memory._snapshot()`` gives the pool's segments
  (``segment_pool_id``).
  Model-file captures read the events at the end of each window (:meth:`CaptureMeter.end`);
  ``graphscope run`` keeps them across a program's consecutive captures and reads them once
  for all of them, when the program first replays one (``keep_history``:
  :meth:`CaptureMeter.stop` per window, :meth:`CaptureMeter.read` for the batch). The tracker
  is closed between windows; the history runs on across them.

How the events of a window add up by module is :mod:`graphscope.capture.allocations`.
:meth:`CaptureMeter.end` gives the graph-info fields; ``graphscope.analysis.memory`` adds them
up. ``GRAPHSCOPE_MEMORY_HISTORY=0`` turns the allocator events off (pool totals stay);
``GRAPHSCOPE_ALLOC_TRACKER=history`` reads torch's history where the tracker is built.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

from .. import native
from .._errors import NativeUnavailableError
from ..annotate.tensors import tensors_in
from . import allocations
from .allocations import (
    END_SLACK_US,
    OUTSIDE,
    AllocatorEvents,
    cuda_initialized,
    device_index,
    graph_pool,
    pool_bytes,
    pool_segments,
)
from .allocations import pool_facts as pool_facts  # the callables source's one-off pool read


def history_wanted() -> bool:
    return os.environ.get("GRAPHSCOPE_MEMORY_HISTORY", "1") not in ("0", "false", "no", "")


def mark_log() -> Any:
    """Where a meter's (time_ns, scope) marks go: the extension's ``MarkLog`` (plain integers,
    which graphscope run's C ``nn.Module.__call__`` appends to without making a Python object:
    a list of tuples made four objects per module call, and the collector ran 28 times in a
    67-bucket ladder's capture loop for them), else a list. Both take ``append((t, scope))``,
    ``extend``, ``clear``, ``copy``, ``len`` and iteration."""
    try:
        return native.extension().MarkLog()
    except NativeUnavailableError:
        return []


def tensor_bytes(values: Any) -> int:
    """Bytes of the distinct CUDA tensors among ``values`` (tuples, lists, dicts, dataclasses)."""
    one = values[0] if type(values) is list and len(values) == 1 else values
    if type(one).__name__ == "Tensor" and type(one).__module__ == "torch":  # a decode step's
        return int(one.nbytes) if one.is_cuda else 0  # logits: no walk, one call less a tensor
    seen: set[int] = set()
    total = 0
    for x in tensors_in(values):
        if x.is_cuda and x.data_ptr() not in seen:
            seen.add(x.data_ptr())
            total += x.numel() * x.element_size()
    return total


def scope_name(scope_id: int) -> str:
    """The module a scope id names (its innermost ``module_name``), or :data:`OUTSIDE`."""
    from ..annotate.tables import TABLES

    if scope_id < 0:
        return OUTSIDE
    try:
        name = TABLES.scopes.annotation(scope_id).get("module_name")
    except (IndexError, AttributeError):
        return OUTSIDE
    return str(name) if name else OUTSIDE


@dataclass
class Window:
    """One capture window, stopped (:meth:`CaptureMeter.stop`) and not yet read."""

    pool: Optional[tuple[int, ...]]
    wall0_ns: int
    end_ns: int
    marks: Any  # a MarkLog or list of (time_ns, scope)
    armed: bool  # the allocator history ran through it
    reserved_from_history: bool = False  # capture_reserved_bytes is the history's to give
    pool_read: bool = False  # stopped with read_pool=False: set_pool has read it since
    device: int = -1  # the CUDA device current as it began (-1: the one current when read)


class CaptureMeter:
    """Time, memory and per-scope attribution of captures (one window at a time).

    ``keep_history``: the allocator history runs on across consecutive windows and is read
    once, by :meth:`read`, for all of them (``graphscope run``: a program's capture loop pays
    for no snapshot); without it each window's :meth:`end` reads its own."""

    def __init__(self, history: Optional[bool] = None, scopes: bool = True,
                 keep_history: bool = False) -> None:
        self.history = history_wanted() if history is None else history
        self.scopes = scopes  # time per module: its hooks registered after graphscope's
        self.keep_history = keep_history
        # allocator time_us - time.time_ns() / 1000: both are CLOCK_REALTIME (torch converts
        # its approximate clock to c10::getTime()), so 0 but for the conversion's error
        self._offset_us = 0.0
        self._hooks: list[Any] = []
        # (time_ns, scope id) at each scope change; one log for the meter's life, so that
        # hooks outside the meter (graphscope run's module hooks) can append to it
        self.marks: Any = mark_log()
        self._scope_names: dict[int, str] = {}  # scope id -> the module it names (_names)
        self._reserved0: Optional[int] = None  # torch.cuda.memory_reserved() at the start
        self._t0 = 0.0
        self._wall0_ns = 0
        self._armed = False
        self._from_history = False
        self._history_on = False
        self._tracker: Any = None  # graphscope.native._alloctrace while it records the events
        self._tracker_actions: tuple[str, ...] = ()
        self._device = -1  # the window's device, for the tracker's events of every device

    # -- the window
    def begin(self) -> None:
        """Just before the capture starts."""
        self.marks.clear()
        self._wall0_ns = time.time_ns()
        if self.history and not self._history_on:
            with contextlib.suppress(Exception):
                self._start_history()
                self._history_on = True
        elif self._tracker is not None and self._history_on:
            self._tracker.resume()
        self._armed = self._history_on
        self._device = -1
        if self._armed and self._tracker is not None:
            with contextlib.suppress(Exception):
                self._device = device_index()
        if self.scopes:
            self._install_hooks()
        # with the history kept across windows, the reserved bytes come from its segment
        # events when it is read (memory_reserved() builds torch's whole stats dict)
        self._from_history = self.keep_history and self._armed
        self._reserved0 = None if self._from_history else _reserved()
        self.marks.append((time.time_ns(), native.current_scope()))
        self._t0 = time.perf_counter()

    def stop(self, cuda_graph: Any, read_pool: bool = True) -> tuple[dict[str, Any], Window]:
        """Just after ``capture_end``: the capture's time and reserved bytes now, and its
        window, for :meth:`read` to add the pool's and the allocator history's facts.
        ``read_pool=False``: the graph's pool is left for the caller to set before
        :meth:`read` (:meth:`set_pool`; ``graphscope run`` reads it after the loop)."""
        capture_s = time.perf_counter() - self._t0
        end_ns = time.time_ns()
        if self._tracker is not None:
            self._tracker.pause()  # the events between windows are neither's
        reserved1 = _reserved() if self._reserved0 is not None else None
        if self._hooks:
            self._remove_hooks()
        info: dict[str, Any] = {"capture_s": round(capture_s, 6)}
        if self._reserved0 is not None and reserved1 is not None:
            # all the device memory the caching allocator reserved during the capture, in the
            # graph's pool or not (a library's workspace on another stream, say)
            info["capture_reserved_bytes"] = reserved1 - self._reserved0
        pool = graph_pool(cuda_graph) if read_pool else None
        if pool is not None:
            info["pool_id"] = list(pool)
        window = Window(pool, self._wall0_ns, end_ns, self.marks.copy(), self._armed,
                        reserved_from_history=self._from_history, device=self._device)
        if not self.keep_history:
            self._end_history()
        return info, window

    @staticmethod
    def set_pool(info: dict[str, Any], window: Window, cuda_graph: Any) -> None:
        """A window stopped with ``read_pool=False``: its graph's pool, read now."""
        pool = graph_pool(cuda_graph)
        window.pool = pool
        if pool is not None:
            info["pool_id"] = list(pool)

    def read(self, windows: list[tuple[dict[str, Any], Window]]) -> None:
        """One allocator snapshot for all ``windows`` (stopped, not yet read): each info gets
        its pool's reserved and allocated bytes, its per-module capture time and its
        allocations by module. The history is turned off."""
        snap = taken = None
        try:
            import torch

            if self._tracker is not None:
                taken = self._tracker.take()
            snap = torch.cuda.memory._snapshot()
        except Exception:
            snap = None
        finally:
            self._end_history()
        history = None
        if taken is None and any(w.armed for _, w in windows):
            history = AllocatorEvents(snap, self._offset_us)
        tracked: dict[int, AllocatorEvents] = {}  # the tracker's events, by device
        for info, w in windows:
            if taken is not None and w.armed:
                dev = w.device if w.device >= 0 else device_index()
                if dev not in tracked:
                    tracked[dev] = AllocatorEvents.tracked(taken, self._tracker_actions, dev)
                history = tracked[dev]
            info.update(self._window_facts(snap, w, history))

    def end(self, cuda_graph: Any) -> dict[str, Any]:
        """Just after ``capture_end``: the graph-info fields of this capture (stop, read)."""
        info, window = self.stop(cuda_graph)
        self.read([(info, window)])
        return info

    def _window_facts(self, snap: Optional[dict[str, Any]], w: Window,
                      history: Optional[AllocatorEvents] = None) -> dict[str, Any]:
        names = self._names(w.marks)
        info: dict[str, Any] = self._scope_info(w.end_ns, w.marks, names)
        if w.reserved_from_history and history is not None:
            # what memory_reserved grew by, from the history's segment events (no
            # memory_reserved() call inside the program's capture loop)
            reserved = history.reserved_delta(w.wall0_ns, w.end_ns)
            if reserved is not None:
                info["capture_reserved_bytes"] = reserved
        if snap is None or w.pool is None:
            return info
        pool = w.pool
        segs = pool_segments(snap, pool)
        info.update(pool_bytes(segs))
        if w.armed:
            try:
                history = history or AllocatorEvents(snap, self._offset_us)
                if history.lost(w.wall0_ns, w.end_ns):
                    info["memory_note"] = ("allocator history overflowed before it was read: "
                                           "memory by module not known for this capture")
                else:
                    info.update(self._attribute(history.during(w.wall0_ns, w.end_ns), segs,
                                                pool, w.marks, w.wall0_ns, names, w.end_ns,
                                                history.slack_us))
            except (KeyError, TypeError, ValueError) as exc:  # said, never a failed capture
                info["memory_note"] = f"allocator history not read: {exc!r}"
        return info

    @contextlib.contextmanager
    def measure(self, cuda_graph: Any) -> Iterator[dict[str, Any]]:
        """``begin`` ... ``end`` around a ``with`` body that captures ``cuda_graph``; the dict
        it yields is filled when the body ends (``cancel`` when it raises)."""
        info: dict[str, Any] = {}
        self.begin()
        try:
            yield info
        except BaseException:
            self.cancel()
            raise
        info.update(self.end(cuda_graph))

    def cancel(self) -> None:
        """The capture failed: hooks removed, nothing recorded (the history stays on for the
        windows still to be read, where it is kept across windows)."""
        self._remove_hooks()
        if self._tracker is not None:
            self._tracker.pause()
        if not self.keep_history:
            self._end_history()

    def _end_history(self) -> None:
        if self._history_on:
            self._stop_history()
            self._history_on = False

    def _names(self, marks: Optional[Iterable[tuple[int, int]]] = None) -> dict[int, str]:
        """The module each scope id of a window's marks names, each id looked up once for the
        meter's life (scope ids are interned for the process and never change: a ladder's
        windows open the same scopes, ~150 per window of a 16-layer decoder)."""
        marks = self.marks if marks is None else marks
        known = self._scope_names
        out = {}
        for sid in {s for _, s in marks}:
            name = known.get(sid)
            if name is None:
                name = known[sid] = scope_name(sid)
            out[sid] = name
        return out

    def _scope_info(self, end_ns: int, marks: Iterable[tuple[int, int]],
                    names: dict[int, str]) -> dict[str, Any]:
        spans = self._scope_time(end_ns, marks, names)
        return {"capture_by_module_s": spans} if len(spans) > 1 or OUTSIDE not in spans else {}

    @staticmethod
    def _scope_time(end_ns: int, marks: Iterable[tuple[int, int]], names: dict[int, str]
                    ) -> dict[str, float]:
        out: dict[str, float] = {}
        marks = list(marks) + [(end_ns, -1)]
        for (t, sid), (t2, _) in zip(marks, marks[1:]):
            name = names.get(sid, OUTSIDE)
            out[name] = out.get(name, 0.0) + (t2 - t) / 1e9
        return {k: round(v, 6) for k, v in out.items()}

    # -- allocator events
    def _start_history(self) -> None:
        tracker = native.alloc_tracker()
        if tracker is not None and cuda_initialized():
            # (attached before CUDA's init, torch's attach reaches no device's allocator and
            # the tracker would see nothing for the process's life: the history instead)
            try:
                tracker.start(allocations.HISTORY_ENTRIES)
            except Exception:  # noqa: BLE001  (an allocator that takes no tracker: the history)
                tracker = None
            else:
                self._tracker, self._tracker_actions = tracker, tuple(tracker.ACTIONS)
                return
        self._tracker = None
        import torch

        try:
            torch.cuda.memory._record_memory_history("all", context=None, stacks="python",
                                                     max_entries=allocations.HISTORY_ENTRIES,
                                                     clear_history=True)
        except TypeError:  # a torch without clear_history: older entries are left by time
            torch.cuda.memory._record_memory_history("all", context=None, stacks="python",
                                                     max_entries=allocations.HISTORY_ENTRIES)

    def _stop_history(self) -> None:
        if self._tracker is not None:
            self._tracker.pause()  # its events stay for read() (take)
            return
        import torch

        with contextlib.suppress(Exception):
            torch.cuda.memory._record_memory_history(None)

    def _attribute(self, entries: list[dict[str, Any]], segs: list[dict[str, Any]],
                   pool: tuple[int, ...], marks: Optional[Iterable[tuple[int, int]]] = None,
                   wall0_ns: Optional[int] = None, names: Optional[dict[int, str]] = None,
                   end_ns: Optional[int] = None, slack_us: float = END_SLACK_US
                   ) -> dict[str, Any]:
        """:func:`allocations.attribute` of a window (this meter's current one by default)."""
        marks = list(self.marks if marks is None else marks)
        names = self._names(marks) if names is None else names
        offset = self._offset_us
        begin_us = (self._wall0_ns if wall0_ns is None else wall0_ns) / 1000 + offset
        # the history may run on past the window (kept across a program's captures): entries
        # after its end are the next window's, or the program's between them (frees of its
        # outputs); slack_us covers the allocator clock's conversion error
        end_us = float("inf") if end_ns is None else end_ns / 1000 + offset + slack_us
        return allocations.attribute(entries, segs, pool, marks, names, begin_us, end_us, offset)

    # -- scope marks
    def _install_hooks(self) -> None:
        from torch.nn.modules import module as m

        from ..annotate.training import no_dynamo

        marks = self.marks

        @no_dynamo
        def mark(*_: Any) -> None:
            marks.append((time.time_ns(), native.current_scope()))

        self._hooks = [m.register_module_forward_pre_hook(mark),
                       m.register_module_forward_hook(mark, always_call=True)]

    def _remove_hooks(self) -> None:
        while self._hooks:
            self._hooks.pop().remove()


def _reserved() -> Optional[int]:
    """``torch.cuda.memory_reserved()`` (None where it cannot be read)."""
    try:
        import torch

        return int(torch.cuda.memory_reserved())
    except Exception:
        return None
