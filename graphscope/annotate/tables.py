"""The process's attribution tables: what the ids a capture records stand for.

A scope id indexes :attr:`Tables.scopes` (its merged annotation), an op id :attr:`Tables.ops`;
the exec-id annotation map (``get_kernel_annotations``) is :attr:`Tables.store`. They are
interning tables, one per process, because the ids outlive any one capture: the extension's
``mark_kernels`` cache and the native op observer keep scope ids for the process's life, and a
forward captured in one window has its backward in another (``make_graphed_callables``).
Beside them sit what the public API registers for every later capture (``mark_stream``'s
streams, ``register_module_annotations``' modules) and the shared autograd hooks, one per
backward scope. What belongs to one capture — whether it is running, its DDP watch, its
leaf scopes, its op recording — is its :class:`~graphscope.annotate.session.Session`.

"Why did this kernel get module X?" starts here: the scope its node recorded, merged by
:meth:`~.scopes.ScopeTable.child` (MK4: inner wins), opened by a session
(:meth:`~graphscope.annotate.session.Session.open_scope`) or owned by an autograd node
(:meth:`~.ownership.Ownership.backward_scope`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .modulehooks import ModuleHooks
from .optable import OpTable
from .ownership import Ownership
from .scopes import ScopeTable
from .store import AnnotationStore


@dataclass(eq=False)
class Tables:
    """The attribution tables of a process (:data:`TABLES`); tests may build their own."""

    scopes: ScopeTable = field(default_factory=ScopeTable)
    ops: OpTable = field(default_factory=OpTable)
    store: AnnotationStore = field(default_factory=AnnotationStore)
    modules: ModuleHooks = field(default_factory=ModuleHooks)
    # cuda stream handle -> its mark_stream annotation (outermost layer of the stream's work)
    streams: dict[int, dict[str, Any]] = field(default_factory=dict)
    # one shared autograd pre-hook per backward scope, and one accumulation post-hook
    slot_hooks: dict[int, Callable[[Any], None]] = field(default_factory=dict)
    acc_hooks: dict[int, Callable[[Any, Any], None]] = field(default_factory=dict)
    ownership: Ownership = field(init=False)

    def __post_init__(self) -> None:
        self.ownership = Ownership(self.scopes)


TABLES = Tables()
