"""``mark_kernels`` and friends: the reference semantics MK1-MK15 of SPEC.md, on any driver.

The implementation is split by concern: :mod:`.scopes` (scope ids -> merged dicts),
:mod:`.ops` (aten op, shapes, source line; ``mark_stream``), :mod:`.backward` (ownership by
autograd sequence numbers, slot hooks), :mod:`.modules` (module-FQN scopes), :mod:`.session`
(one annotated capture window) and :mod:`.store` (the exec-id annotation map).
"""

from __future__ import annotations

from pickle import dumps as _dumps

from .. import native
from . import state
from .backward import OWNERSHIP, pop, push
from .modules import ModuleAnnotations, module_fqn, register_module_annotations
from .ops import mark_stream
from .scopes import MODULE_KEY, PHASE_KEY, SCOPES, Annotation, normalize
from .session import Session, annotations_active, session
from .store import (
    STORE,
    clear_kernel_annotations,
    get_kernel_annotations,
    publish,
    remap_to_exec_graph,
    save_kernel_annotations,
)


class mark_kernels:
    """Tag the GPU work captured inside the ``with`` body (MK1-MK15).

    Args:
        annotation: a str ``s`` (stored as ``{"name": s}``) or a dict of picklable values.
        backward: also tag the backward kernels of autograd nodes created in the scope,
            adding ``"autograd_phase": "backward"``.

    Outside an annotated capture it does nothing (MK3), but bad annotations still raise.
    """

    __slots__ = ("_ann", "_backward", "_pushed")

    def __init__(self, annotation: Annotation, *, backward: bool = True) -> None:
        self._ann = annotation
        self._backward = backward
        self._pushed = False

    def __enter__(self) -> mark_kernels:
        if state.ACTIVE is None:
            normalize(self._ann)  # MK3: nothing to tag, but MK12 still checks the annotation
            return self
        a = self._ann
        parent = native._ext.current_scope()  # a session implies the extension is loaded
        # A scope entered before costs a pickle and a lookup (the pickle is the interning key
        # normalize() would make); a new one is normalised and validated first.
        sid = None
        if type(a) is dict:
            try:
                sid = SCOPES.lookup(parent, _dumps(a, protocol=4), self._backward)
            except Exception:
                sid = None  # not picklable: normalize() names the culprit below
        if sid is None:
            ann, frozen = normalize(a)
            sid = SCOPES.child(parent, ann, self._backward, frozen)
        own = OWNERSHIP.native  # the hot path of backward.push, inlined
        if own is not None:
            own.own_push(sid)
        else:
            push(sid)
        self._pushed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            own = OWNERSHIP.native
            if own is not None:
                own.own_pop()
            else:
                pop()
            self._pushed = False


def is_available() -> bool:
    """True when annotations can be recorded here: a GPU, a driver and CUPTI (13.0 is fine)."""
    try:
        native.ensure_loaded()
        return True
    except Exception:
        return False


__all__ = [
    "MODULE_KEY",
    "PHASE_KEY",
    "SCOPES",
    "STORE",
    "Annotation",
    "ModuleAnnotations",
    "Session",
    "annotations_active",
    "clear_kernel_annotations",
    "get_kernel_annotations",
    "is_available",
    "mark_kernels",
    "mark_stream",
    "module_fqn",
    "normalize",
    "pop",
    "publish",
    "push",
    "register_module_annotations",
    "remap_to_exec_graph",
    "save_kernel_annotations",
    "session",
]
