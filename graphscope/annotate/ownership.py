"""Which scope created each autograd node (MK5-MK9), and the scope pushes and pops that note
it.

Autograd numbers nodes with a per-thread sequence counter. Every scope push/pop on the capturing
thread appends ``(counter now, current scope)``: the owner of a node numbered ``s`` is the scope
of the last event at or before ``s`` (a step function; bisect). Nodes made on autograd's thread
while a hooked node ran (create_graph=True, MK8) are claimed explicitly by that node's
post-hook instead. Where the native op observer is built, it keeps the step function
(``own_note`` at every push and pop) and this class only hands calls to it.

The events outlive a capture: a forward captured in one window and its backward in the next
(``make_graphed_callables``) are attributed across them.
"""

from __future__ import annotations

import bisect
import functools
import threading
from types import ModuleType
from typing import Any, Callable, Optional

from .. import native
from .scopes import ScopeTable


@functools.cache
def sequence_counter() -> Callable[[], int]:
    """A function reading this thread's autograd sequence counter (torch's getter, or on an
    older torch one that makes and drops a node)."""
    import torch

    getter = getattr(torch._C._autograd, "_get_sequence_nr", None)
    if getter is not None:
        return getter

    def made() -> int:
        n = torch.ones(1, requires_grad=True).clone().grad_fn
        return int(n._sequence_nr()) + 1 if n is not None else 0

    return made


def sequence_number() -> int:
    """This thread's autograd sequence counter now."""
    return int(sequence_counter()())


class Ownership:
    """The step function from autograd sequence numbers to the scopes that made the nodes."""

    def __init__(self, scopes: ScopeTable) -> None:
        self._scopes = scopes
        self.thread: Optional[int] = None  # the capturing thread while a session runs
        self.seqs: list[int] = []
        self.owners: list[int] = []  # the scope current from seqs[i] on
        self.explicit: dict[Any, int] = {}  # autograd Node -> backward scope id
        # graphscope.native._opwatch when the native observer keeps the step function (and
        # attributes backward from the engine's RecordFunctions); None: the lists above and
        # Python hooks
        self.native: Optional[ModuleType] = None

    def use(self, obs: Optional[ModuleType]) -> None:
        """Keep ownership natively in ``obs`` (None: in Python) from now on."""
        self.native = obs
        ext = native.extension()
        if hasattr(ext, "mark_kernels_use_native"):  # mark_kernels pushes through obs too
            ext.mark_kernels_use_native(obs.own_note_address() if obs is not None else 0)
        scopes = self._scopes
        if obs is None:
            scopes.listener = None
            return
        obs.set_scope_fns(ext.scope_fn_addresses())
        have = obs.backward_scopes_size()
        if have < len(scopes):
            obs.set_backward_scopes(have, [scopes[i].backward_scope
                                           for i in range(have, len(scopes))])
        scopes.listener = lambda sid, bsid: obs.set_backward_scopes(sid, [bsid])

    def start(self, thread: int) -> None:
        self.thread = thread
        if self.native is not None:
            self.native.own_thread(thread)
        self.event()

    def stop(self) -> None:
        self.event()
        self.thread = None
        if self.native is not None:
            self.native.own_thread(0)

    def event(self) -> None:
        if self.native is not None:
            self.native.own_event()
            return
        if threading.get_ident() != self.thread:
            return
        self.seqs.append(sequence_number())
        self.owners.append(native.current_scope())

    def push(self, scope_id: int) -> None:
        """Open a scope on this thread (and note it for backward ownership)."""
        if self.native is not None:
            self.native.own_push(scope_id)
            return
        native.push_scope(scope_id)
        if self.thread == threading.get_ident():
            self.seqs.append(sequence_number())
            self.owners.append(scope_id)

    def pop(self) -> None:
        """Close this thread's innermost scope (and note it)."""
        if self.native is not None:
            self.native.own_pop()
            return
        native.pop_scope()
        if self.thread == threading.get_ident():
            self.seqs.append(sequence_number())
            self.owners.append(native.current_scope())

    def owner_scope(self, node: Any) -> int:
        """The forward scope whose dict the node's backward gets (-1: none)."""
        if self.native is not None:
            return int(self.native.owner(node._sequence_nr()))
        i = bisect.bisect_right(self.seqs, node._sequence_nr()) - 1
        return self.owners[i] if i >= 0 else -1

    def backward_scope(self, node: Any) -> int:
        """The scope the node's backward work gets: its owner's backward scope (MK5, MK6), or
        -1 where no scope owns it or the owner's annotation stops at forward."""
        sid = self.owner_scope(node)
        return self._scopes[sid].backward_scope if sid >= 0 else -1
