"""All of graphscope's attribution state, in one object: :data:`ATTRIBUTION`.

Where a kernel's annotation comes from, in one place: the running capture window
(``active``, set by :func:`graphscope.annotate.session.session` for exactly the window in which
the CUPTI recorder holds its subscription: every hook is inert while it is None), the scope
table, the op table, the streams ``mark_stream`` tagged, the exec-id annotation store, backward
ownership, the registered modules and the DDP watch of the next capture. The native side
receives it explicitly (``mark_kernels_setup``: the C type reads ``active`` from it).

It is one per process because what it serves is: one CUPTI subscriber, one set of global
module hooks, one per-thread native scope stack whose ids index ``scopes``. It is built by
``graphscope.annotate`` (its ``__init__``) from the tables its modules define, so this module
imports none of them (the modules read ``state.ATTRIBUTION`` when called: no import cycle).
"""

from __future__ import annotations

from typing import Any


class Attribution:
    """The process's attribution state (see the module docstring)."""

    def __init__(self, scopes: Any, ops: Any, store: Any, ownership: Any, modules: Any) -> None:
        self.active: Any = None  # the running graphscope.annotate.session.Session, or None
        # A DDPWatch (annotate/training.py) the next annotated captures place DDP's reducer
        # work with; set by the capture source around the capture.
        self.ddp: Any = None
        self.scopes = scopes  # scope id -> merged annotation (scopes.ScopeTable)
        self.ops = ops  # op id -> (aten op, shapes, source line) (ops.OpTable)
        self.streams: dict[int, dict[str, Any]] = {}  # cuda stream -> mark_stream annotation
        self.store = store  # exec node id -> annotation, rekeyed per instantiate (store.py)
        self.ownership = ownership  # autograd node -> the scope that created it (backward.py)
        self.modules = modules  # register_module_annotations' modules and hooks (modules.py)
        # one shared autograd hook per backward scope (ids index ``scopes``)
        self.slot_hooks: dict[int, Any] = {}
        self.acc_hooks: dict[int, Any] = {}


ATTRIBUTION: Attribution  # set once by graphscope.annotate when it is imported
