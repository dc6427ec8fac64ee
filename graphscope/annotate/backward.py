"""Backward attribution at backward time (MK5-MK9): the nodes about to run get their owners'
backward scopes.

With the native op observer attributing backward, no node needs a hook: only AccumulateGrad
nodes get one where the caller knows parameter owners. Otherwise (no observer,
``GRAPHSCOPE_OP_OBSERVER=python``, ``create_graph=True``) every node about to run gets one
shared pre-hook that sets the thread's backward slot to its owner's backward scope
(:meth:`~.ownership.Ownership.backward_scope`). Hooks run on autograd's device thread, which is
where backward kernels are launched. See docs/architecture.md.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import native
from .scopes import ScopeTable
from .tables import Tables

if TYPE_CHECKING:
    from .session import Session

ACCUMULATION_KEY = "grad_accumulation"


def prepare_backward(session: Session, t_outputs: Any, create_graph: bool
                     ) -> Optional[ModuleType]:
    """Give every node of the graph about to run a pre-hook that sets the thread's slot to
    its owner's backward scope (-1 for AccumulateGrad and unowned nodes: MK9).

    With the native observer attributing backward (``session.native_backward``) no node needs
    a hook: only the AccumulateGrad nodes get one, where the caller knows parameter owners; the
    observer is returned, for the caller to watch the engine with around the call.
    create_graph=True (MK8 claims) and double backward over claimed nodes stay with the hooks
    (None is returned).
    """
    obs = session.native_backward
    if obs is not None:
        if not create_graph and not _reaches_explicit(session.tables, t_outputs):
            obs.suspend_backward(False)
            leaf = session.leaf_scope
            obs.set_leaf_python(leaf is not None)
            if leaf is not None:
                _hook_leaves(session, t_outputs, leaf)
            return obs
        obs.suspend_backward(True)  # this call: the Python hooks below
    nodes, fan_in = _about_to_run(session, t_outputs)
    for node in nodes:
        _hook_node(session, node, fan_in, create_graph)
    return None


def _about_to_run(session: Session, t_outputs: Any
                  ) -> tuple[list[Any], dict[tuple[Any, int], int]]:
    """One walk: the nodes about to run that the session has not hooked yet, and how many
    gradients flow into each input slot (node, input_nr). A slot fed by several nodes is where
    the engine accumulates."""
    stack = _roots(t_outputs)
    hooked = session.hooked
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
    return nodes, fan_in


def _hook_node(session: Session, node: Any, fan_in: dict[tuple[Any, int], int],
               create_graph: bool) -> None:
    """The pre-hook (and post-hooks) of one node about to run."""
    tables = session.tables
    session.hooked.add(node)
    is_acc = type(node).__name__ == "AccumulateGrad"
    if is_acc:
        leaf = session.leaf_scope  # where the caller knows param owners
        bsid = leaf(node) if leaf is not None else -1
    elif node in tables.ownership.explicit:
        bsid = tables.ownership.explicit[node]
    elif threading.get_ident() == session.main_thread:
        bsid = tables.ownership.backward_scope(node)
    else:
        return  # nested backward on autograd's thread: inherit the running node's slot
    node.register_prehook(_slot_hook(tables, bsid))
    if bsid >= 0 and not is_acc and any(
            fan_in.get((n, nr), 0) > 1 for n, nr in node.next_functions if n is not None):
        # After this node the engine adds its outputs into an input buffer that several
        # nodes feed: those adds are gradient accumulation, in this node's scope. Only
        # such producers get the post-hook, so the rest of backward pays nothing for it.
        node.register_hook(_accumulation_hook(tables, bsid))
    if create_graph and bsid >= 0:
        node.register_hook(_claim_hook(tables, bsid))


def _reaches_explicit(tables: Tables, t_outputs: Any) -> bool:
    """Whether a node claimed by a create_graph=True backward (MK8) is about to run: those keep
    their claim through the Python hooks. A walk only in processes that made such claims."""
    explicit = tables.ownership.explicit
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


def _hook_leaves(session: Session, t_outputs: Any, leaf: Callable[[Any], int]) -> None:
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
                node.register_prehook(_slot_hook(session.tables, leaf(node)))
            continue
        stack.extend(n for n, _ in node.next_functions if n is not None)


def _slot_hook(tables: Tables, scope_id: int) -> Callable[[Any], None]:
    """One shared pre-hook per backward scope."""
    hook = tables.slot_hooks.get(scope_id)
    if hook is None:
        set_slot = native.extension().set_slot
        active = native.active_session

        def hook(grad_outputs: Any) -> None:
            if active() is not None:  # MK7: outside an annotated capture, do nothing
                set_slot(scope_id)

        tables.slot_hooks[scope_id] = hook
    return hook


def accumulation_scope(scopes: ScopeTable, scope_id: int) -> int:
    """The backward scope ``scope_id`` with ``grad_accumulation: True``."""
    return scopes.backward({**scopes.annotation(scope_id), ACCUMULATION_KEY: True})


def _accumulation_hook(tables: Tables, scope_id: int) -> Callable[[Any, Any], None]:
    """One shared post-hook per backward scope: the slot becomes its accumulation variant
    until the next node's pre-hook (the engine's InputBuffer adds run in between)."""
    hook = tables.acc_hooks.get(scope_id)
    if hook is None:
        set_slot = native.extension().set_slot
        active = native.active_session
        acc = accumulation_scope(tables.scopes, scope_id)

        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if active() is not None:
                set_slot(acc)

        tables.acc_hooks[scope_id] = hook
    return hook


def _claim_hook(tables: Tables, scope_id: int) -> Callable[[Any, Any], None]:
    explicit = tables.ownership.explicit

    def post(grad_inputs: Any, grad_outputs: Any) -> None:
        active = native.active_session()
        if active is None or not _grad_enabled():
            return
        # MK8: nodes made while this node ran (create_graph=True) inherit its scope.
        import torch

        hooked = active.hooked
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
