"""Backward attribution on torch without ``node_creation_hook`` (MK5-MK9).

Scope pushes and pops note autograd's sequence counter, so the scope that created any autograd
node is known from its sequence number (:class:`_Ownership`). When backward starts inside a
session, every node about to run gets one pre-hook that sets the thread's backward slot to its
owner's backward scope. Hooks run on autograd's device thread, which is where backward kernels
are launched. See docs/architecture.md.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any, Optional

from .. import native
from . import state


class Ownership:
    """Which scope created each autograd node, without a per-op mode.

    Autograd numbers nodes with a per-thread sequence counter. Every scope push/pop on the
    capturing thread appends ``(counter now, current scope)``: the owner of a node numbered
    ``s`` is the scope of the last event at or before ``s`` (a step function; bisect). Nodes
    made on autograd's thread while a hooked node ran (create_graph=True, MK8) are claimed
    explicitly by that node's post-hook instead.
    """

    def __init__(self) -> None:
        self.thread: Optional[int] = None
        self.seqs: list[int] = []
        self.scopes: list[int] = []
        self.explicit: dict[Any, int] = {}  # autograd Node -> backward scope id
        # graphscope.native._opwatch when the native observer keeps the step function (and
        # attributes
        # backward from the engine's RecordFunctions); None: the lists above and Python hooks.
        self.native: Any = None

    def use(self, obs: Any) -> None:
        """Keep ownership natively in ``obs`` (None: in Python) from now on."""
        self.native = obs
        ext = native.extension()
        if hasattr(ext, "mark_kernels_use_native"):  # mark_kernels pushes through obs too
            ext.mark_kernels_use_native(obs.own_note_address() if obs is not None else 0)
        scopes = state.ATTRIBUTION.scopes
        if obs is None:
            scopes.listener = None
            return
        obs.set_scope_fns(native.extension().scope_fn_addresses())
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
        self.seqs.append(_seq())
        self.scopes.append(_current_scope())

    def owner_scope(self, node: Any) -> int:
        """The forward scope whose dict the node's backward gets (-1: none)."""
        if self.native is not None:
            return int(self.native.owner(node._sequence_nr()))
        i = bisect.bisect_right(self.seqs, node._sequence_nr()) - 1
        return self.scopes[i] if i >= 0 else -1


def _seq() -> int:
    global _seq
    import torch

    getter = getattr(torch._C._autograd, "_get_sequence_nr", None)
    if getter is None:  # older torch: read the counter by making (and dropping) one node

        def getter() -> int:
            n = torch.ones(1, requires_grad=True).clone().grad_fn
            return int(n._sequence_nr()) + 1 if n is not None else 0

    _seq = getter
    return int(getter())


def _current_scope() -> int:
    global _current_scope
    _current_scope = native.extension().current_scope
    return int(_current_scope())



def push(scope_id: int) -> None:
    """Open a scope on this thread (and note it for backward ownership)."""
    own = state.ATTRIBUTION.ownership
    if own.native is not None:
        own.native.own_push(scope_id)
        return
    ext = native.extension()
    ext.push_scope(scope_id)
    if own.thread == threading.get_ident():
        own.seqs.append(_seq())
        own.scopes.append(scope_id)


def pop() -> None:
    own = state.ATTRIBUTION.ownership
    if own.native is not None:
        own.native.own_pop()
        return
    ext = native.extension()
    ext.pop_scope()
    if own.thread == threading.get_ident():
        own.seqs.append(_seq())
        own.scopes.append(int(ext.current_scope()))


def prepare_backward(session: Any, t_outputs: Any, create_graph: bool) -> Any:
    """Give every node of the graph about to run a pre-hook that sets the thread's slot to
    its owner's backward scope (-1 for AccumulateGrad and unowned nodes: MK9).

    With the native observer attributing backward (``session.native_backward``) no node needs
    a hook: only the AccumulateGrad nodes get one, where the caller knows parameter owners; the
    observer is returned, for the caller to watch the engine with around the call.
    create_graph=True (MK8 claims) and double backward over claimed nodes stay with the hooks
    (None is returned).
    """

    obs = getattr(session, "native_backward", None)
    if obs is not None:
        if not create_graph and not _reaches_explicit(t_outputs):
            obs.suspend_backward(False)
            leaf = getattr(session, "leaf_scope", None)
            obs.set_leaf_python(leaf is not None)
            if leaf is not None:
                _hook_leaves(session, t_outputs, leaf)
            return obs
        obs.suspend_backward(True)  # this call: the Python hooks below

    ownership, scopes = state.ATTRIBUTION.ownership, state.ATTRIBUTION.scopes
    stack = _roots(t_outputs)
    hooked = session.hooked
    explicit = ownership.explicit
    on_main = threading.get_ident() == session.main_thread
    # One walk: the nodes about to run, and how many gradients flow into each input slot
    # (node, input_nr). A slot fed by several nodes is where the engine accumulates.
    nodes = []
    fan_in: dict[tuple[Any, int], int] = {}
    seen: set[Any] = set()
    while stack:
        node = stack.pop()
        if node in seen or node in hooked:
            continue
        seen.add(node)
        nodes.append(node)
        for n, nr in node.next_functions:
            if n is not None:
                fan_in[(n, nr)] = fan_in.get((n, nr), 0) + 1
                stack.append(n)
    for node in nodes:
        hooked.add(node)
        is_acc = type(node).__name__ == "AccumulateGrad"
        if is_acc:
            leaf = getattr(session, "leaf_scope", None)  # where the caller knows param owners
            bsid = leaf(node) if leaf is not None else -1
        elif node in explicit:
            bsid = explicit[node]
        elif on_main:
            sid = ownership.owner_scope(node)
            bsid = scopes[sid].backward_scope if sid >= 0 else -1
        else:
            continue  # nested backward on autograd's thread: inherit the running node's slot
        node.register_prehook(_slot_hook(bsid))
        if bsid >= 0 and not is_acc and any(
                fan_in.get((n, nr), 0) > 1 for n, nr in node.next_functions if n is not None):
            # After this node the engine adds its outputs into an input buffer that several
            # nodes feed: those adds are gradient accumulation, in this node's scope. Only
            # such producers get the post-hook, so the rest of backward pays nothing for it.
            node.register_hook(_accumulation_hook(bsid))
        if create_graph and bsid >= 0:
            node.register_hook(_claim_hook(bsid))


def _reaches_explicit(t_outputs: Any) -> bool:
    """Whether a node claimed by a create_graph=True backward (MK8) is about to run: those keep
    their claim through the Python hooks. A walk only in processes that made such claims."""
    explicit = state.ATTRIBUTION.ownership.explicit
    if not explicit:
        return False
    stack, seen = _roots(t_outputs), set()
    while stack:
        node = stack.pop()
        if node in explicit:
            return True
        if node in seen:
            continue
        seen.add(node)
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return False


def _roots(t_outputs: Any) -> list[Any]:
    """The autograd nodes a backward call starts from (tensors' grad_fn, or gradient edges)."""
    import torch

    roots = []
    for t in t_outputs:
        node = t.grad_fn if isinstance(t, torch.Tensor) else getattr(t, "node", None)
        if node is not None:
            roots.append(node)
    return roots


def _hook_leaves(session: Any, t_outputs: Any, leaf: Any) -> None:
    """A slot pre-hook on each AccumulateGrad node about to run: its parameter's owner."""

    stack = _roots(t_outputs)
    hooked = session.hooked
    seen: set[Any] = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == "AccumulateGrad":
            if node not in hooked:
                hooked.add(node)
                node.register_prehook(_slot_hook(leaf(node)))
            continue
        stack.extend(n for n, _ in node.next_functions if n is not None)


def _slot_hook(scope_id: int) -> Any:
    """One shared pre-hook per backward scope."""
    attribution = state.ATTRIBUTION
    hook = attribution.slot_hooks.get(scope_id)
    if hook is None:
        set_slot = native.extension().set_slot

        def hook(grad_outputs: Any) -> None:
            if attribution.active is not None:  # MK7: outside an annotated capture, do nothing
                set_slot(scope_id)

        attribution.slot_hooks[scope_id] = hook
    return hook


ACCUMULATION_KEY = "grad_accumulation"


def accumulation_scope(scope_id: int) -> int:
    """The backward scope ``scope_id`` with ``grad_accumulation: True``."""
    scopes = state.ATTRIBUTION.scopes
    return scopes.backward({**scopes.annotation(scope_id), ACCUMULATION_KEY: True})


def _accumulation_hook(scope_id: int) -> Any:
    """One shared post-hook per backward scope: the slot becomes its accumulation variant
    until the next node's pre-hook (the engine's InputBuffer adds run in between)."""
    attribution = state.ATTRIBUTION
    hook = attribution.acc_hooks.get(scope_id)
    if hook is None:
        set_slot = native.extension().set_slot
        acc = accumulation_scope(scope_id)

        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if attribution.active is not None:
                set_slot(acc)

        attribution.acc_hooks[scope_id] = hook
    return hook


def _claim_hook(scope_id: int) -> Any:
    def post(grad_inputs: Any, grad_outputs: Any) -> None:
        active = state.ATTRIBUTION.active
        if active is None or not _grad_enabled():
            return
        # MK8: nodes made while this node ran (create_graph=True) inherit its scope.
        import torch

        hooked = active.hooked
        explicit = state.ATTRIBUTION.ownership.explicit
        stack = [g.grad_fn for g in grad_inputs if isinstance(g, torch.Tensor) and g.grad_fn]
        while stack:
            node = stack.pop()
            if node in hooked or node in explicit or type(node).__name__ == "AccumulateGrad":
                continue
            explicit[node] = scope_id
            stack.extend(n for n, _ in node.next_functions if n is not None)

    return post


def _grad_enabled() -> bool:
    import torch

    return torch.is_grad_enabled()
