"""``mark_kernels`` and friends: the reference semantics MK1-MK15 of SPEC.md, on any driver.

The implementation is split by concern: :mod:`.scopes` (scope ids -> merged dicts),
:mod:`.optable` and :mod:`.ops` (aten op, shapes, source line; ``mark_stream``),
:mod:`.ownership` and :mod:`.backward` (ownership by autograd sequence numbers, slot hooks),
:mod:`.modules` (module-FQN scopes), :mod:`.training` (optimizer, ``.grad`` accumulation,
DDP), :mod:`.store` and :mod:`.publish` (the exec-id annotation map). The process's interning
tables are one object, :data:`~.tables.TABLES` (:mod:`.tables`); what belongs to one capture
is its :class:`~.session.Session`, made per capture and handed to the extension for the window.
"""

from __future__ import annotations

from typing import Any

from .. import native
from .modules import ModuleAnnotations, module_fqn, register_module_annotations
from .ops import mark_stream
from .publish import (
    clear_kernel_annotations,
    get_kernel_annotations,
    publish,
    remap_to_exec_graph,
    save_kernel_annotations,
)
from .scopes import MODULE_KEY, PHASE_KEY, Annotation, normalize
from .session import Session, annotations_active, run_session, session
from .tables import TABLES, Tables


class _PyMarkKernels:
    """``mark_kernels`` in Python, the C type's reference (where graphscope's extension could
    not be imported no session can start: it then tags nothing, MK3, but still checks the
    annotation, MK12)."""

    __slots__ = ("annotation", "backward", "_pushed")

    def __init__(self, annotation: Annotation, *, backward: bool = True) -> None:
        self.annotation = annotation
        self.backward = backward
        self._pushed: list[Session] = []

    def __enter__(self) -> _PyMarkKernels:
        s = native.active_session()
        if s is None:
            normalize(self.annotation)
            return self
        s.push(s.resolve(self.annotation, native.current_scope(), self.backward))
        self._pushed.append(s)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            self._pushed.pop().pop()


def _check(a: Annotation) -> None:
    normalize(a)


# ``mark_kernels`` is a C type (csrc/markscope.cpp): entering a scope seen before runs no
# Python. Inside a capture window it calls the running Session's resolve for new scopes and
# its push/pop on the hook path; outside one, _check for annotations it cannot vouch for.
_ext = native.maybe_extension()
if _ext is not None:
    mark_kernels: Any = _ext.mark_kernels
    mark_kernels.__module__ = "graphscope"
    _ext.mark_kernels_setup(_check)
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
    "TABLES",
    "Annotation",
    "ModuleAnnotations",
    "Session",
    "Tables",
    "annotations_active",
    "clear_kernel_annotations",
    "get_kernel_annotations",
    "is_available",
    "mark_kernels",
    "mark_stream",
    "module_fqn",
    "normalize",
    "publish",
    "register_module_annotations",
    "remap_to_exec_graph",
    "run_session",
    "save_kernel_annotations",
    "session",
]
