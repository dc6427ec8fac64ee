"""All of graphscope's attribution state, in one object: :data:`ATTRIBUTION`.

Where a kernel's annotation comes from, in one place: the running capture window
(``active``, set by :func:`graphscope.annotate.session.session` for exactly the window in which
the CUPTI recorder holds its subscription: every hook is inert while it is None), the scope
table, the op table, the streams ``mark_stream`` tagged, the exec-id annotation store, backward
ownership, the registered modules and the DDP watch of the next capture. The native side
receives it explicitly (``mark_kernels_setup``: the C type reads ``active`` from it).

It is one per process because what it serves is: one CUPTI subscriber, one set of global
module hooks, one per-thread native scope stack whose ids index ``scopes``.
"""

from __future__ import annotations

from typing import Any


class Attribution:
    """The process's attribution state (see the module docstring)."""

    def __init__(self) -> None:
        from .backward import Ownership
        from .modules import ModuleHooks
        from .ops import OpTable
        from .scopes import ScopeTable
        from .store import AnnotationStore

        self.active: Any = None  # the running graphscope.annotate.session.Session, or None
        # A DDPWatch (annotate/training.py) the next annotated captures place DDP's reducer
        # work with; set by the capture source around the capture.
        self.ddp: Any = None
        self.scopes = ScopeTable()  # scope id -> merged annotation
        self.ops = OpTable()  # op id -> (aten op, shapes, source line)
        self.streams: dict[int, dict[str, Any]] = {}  # cuda stream -> mark_stream annotation
        self.store = AnnotationStore()  # exec node id -> annotation (rekeyed per instantiate)
        self.ownership = Ownership()  # autograd node -> the scope that created it
        self.modules = ModuleHooks()  # register_module_annotations' modules and hooks
        # one shared autograd hook per backward scope (ids index ``scopes``)
        self.slot_hooks: dict[int, Any] = {}
        self.acc_hooks: dict[int, Any] = {}


ATTRIBUTION = Attribution()
