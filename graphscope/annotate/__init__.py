"""``mark_kernels`` and friends: the reference semantics MK1-MK15 of SPEC.md, on any driver.

The implementation is split by concern: :mod:`.scopes` (scope ids -> merged dicts),
:mod:`.ops` (aten op, shapes, source line; ``mark_stream``), :mod:`.backward` (ownership by
autograd sequence numbers, slot hooks), :mod:`.modules` (module-FQN scopes), :mod:`.session`
(one annotated capture window) and :mod:`.store` (the exec-id annotation map); their
state is one object, :data:`ATTRIBUTION` (:mod:`.state`).
"""

from __future__ import annotations

from pickle import dumps as _dumps
from typing import Any

from .. import native
from . import state
from .backward import Ownership, pop, push
from .modules import ModuleAnnotations, ModuleHooks, module_fqn, register_module_annotations
from .ops import OpTable, mark_stream
from .scopes import MODULE_KEY, PHASE_KEY, Annotation, ScopeTable, normalize
from .session import Session, annotations_active, session
from .state import Attribution
from .store import (
    AnnotationStore,
    clear_kernel_annotations,
    get_kernel_annotations,
    publish,
    remap_to_exec_graph,
    save_kernel_annotations,
)

ATTRIBUTION = state.ATTRIBUTION = Attribution(ScopeTable(), OpTable(), AnnotationStore(),
                                              Ownership(), ModuleHooks())


def _resolve(a: Annotation, parent: int, backward: bool) -> int:
    """The scope id for ``a`` opened inside scope ``parent`` (interned in ``ATTRIBUTION.scopes``).

    A scope entered before costs a pickle and a lookup (the pickle is the interning key
    normalize() would make); a new one is normalised and validated first."""
    scopes = ATTRIBUTION.scopes
    sid = None
    if type(a) is dict:
        try:
            sid = scopes.lookup(parent, _dumps(a, protocol=4), backward)
        except Exception:
            sid = None  # not picklable: normalize() names the culprit below
    if sid is None:
        ann, frozen = normalize(a)
        sid = scopes.child(parent, ann, backward, frozen)
    return sid


class _PyMarkKernels:
    """``mark_kernels`` in Python, where graphscope's extension could not be imported (it is
    then a no-op that still validates: no session can start without the extension)."""

    __slots__ = ("_ann", "_backward", "_pushed")

    def __init__(self, annotation: Annotation, *, backward: bool = True) -> None:
        self._ann = annotation
        self._backward = backward
        self._pushed = 0

    def __enter__(self) -> _PyMarkKernels:
        if ATTRIBUTION.active is None:
            normalize(self._ann)  # MK3: nothing to tag, but MK12 still checks the annotation
            return self
        push(_resolve(self._ann, native.current_scope(), self._backward))
        self._pushed += 1
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            self._pushed -= 1
            pop()


def _check(a: Annotation) -> None:
    normalize(a)


# ``mark_kernels`` is a C type (csrc/markscope.cpp): entering a scope seen before runs no
# Python. It calls back into _resolve for new scopes and into push/pop on the hook path.
if native._ext is not None and hasattr(native._ext, "mark_kernels"):
    mark_kernels: Any = native._ext.mark_kernels
    mark_kernels.__module__ = "graphscope"
    native._ext.mark_kernels_setup(ATTRIBUTION, _resolve, _check, push, pop)
else:
    mark_kernels = _PyMarkKernels


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
    "ATTRIBUTION",
    "Annotation",
    "Attribution",
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
