"""FSDP2's communication, scope ``(fsdp)``: each all-gather (its copy-in, the collective and
the copy-out) and each reduce-scatter (the gradients' copy-in, the collective, the division)
under the module it serves.

FSDP2 (``torch.distributed.fsdp.fully_shard``) keeps one parameter group per sharded module
(``FSDPParamGroup``, torch 2.4 and later): its ``unshard`` issues the all-gather,
``wait_for_unshard`` copies the gathered parameters out, ``post_backward`` reduce-scatters the
gradients. ``FSDPParamGroup._prefetch_unshard`` (a staticmethod) runs another group's
``unshard`` early: forward prefetch (``set_modules_to_forward_prefetch``) and backward
prefetch (by default, in reverse forward order); that all-gather, and its copy-out later, are
marked ``fsdp_prefetch``. :class:`FSDPWatch` wraps those four methods on the class for one
capture and restores them after; the wrappers open a scope only while a capture window is
open (``native.active_session()``), else they call torch's method and nothing more.

Scopes: in forward, a child of the open scope (the module's; inner wins shared keys, MK4);
in backward (the group's training state is pre- or post-backward), a backward scope of its
own, as DDP's buckets are. The kernels a wrapped call launches, on whatever stream FSDP picks,
take the innermost scope of the launching thread.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from .. import native
from ..model.graph import FSDP_SCOPE
from .modules import module_fqn
from .scopes import MODULE_KEY, PHASE_KEY, normalize

_GROUP_MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param_group"


def fsdp_loaded() -> bool:
    """Whether the program has imported FSDP2 (a watch is worth arming)."""
    import sys

    return _GROUP_MODULE in sys.modules


def fsdp_modules(model: Any) -> list[Any]:
    """The modules of ``model`` (itself included) that ``fully_shard`` made FSDP2 modules."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch without FSDP2
        return []
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def served(fqn: Any, prefix: str = "L") -> str:
    """graphscope's name of the module(s) a parameter group serves: FSDP's ``_module_fqn``
    is the path below the root (``""`` for the root, ``"a, b"`` for a group of several)."""
    paths = [p.strip() for p in str(fqn or "").split(",")] or [""]
    return ", ".join(module_fqn(p, prefix) for p in paths)


class FSDPWatch:
    """FSDP2's all-gathers and reduce-scatters placed in ``(fsdp)`` scopes (module docstring)."""

    def __init__(self, prefix: str = "L") -> None:
        self.prefix = prefix
        self._local = threading.local()
        self._prefetched: set[int] = set()  # id(group) whose pending all-gather is a prefetch
        self._real: dict[str, Any] = {}

    def arm(self) -> FSDPWatch:
        import importlib

        cls = importlib.import_module(_GROUP_MODULE).FSDPParamGroup
        self._cls = cls
        for name in ("unshard", "wait_for_unshard", "post_backward"):
            self._real[name] = real = cls.__dict__[name]
            setattr(cls, name, self._wrap(name, real))
        self._real["_prefetch_unshard"] = real_pre = cls.__dict__["_prefetch_unshard"]
        fn = real_pre.__func__
        watch = self

        def prefetch_unshard(target: Any, pass_type: str) -> Any:
            watch._local.prefetch = True
            try:
                return fn(target, pass_type)
            finally:
                watch._local.prefetch = False

        cls._prefetch_unshard = staticmethod(prefetch_unshard)
        return self

    def remove(self) -> None:
        """Put torch's methods back (a handle's ``remove``, as the other training hooks)."""
        for name, real in self._real.items():
            setattr(self._cls, name, real)
        self._real.clear()
        self._prefetched.clear()

    def annotation(self, group: Any, op: str) -> dict[str, Any]:
        """The scope's dict for ``op`` (``all_gather`` | ``reduce_scatter``) of ``group``."""
        bwd = op == "reduce_scatter" or getattr(group, "_training_state", None) is not None \
            and group._training_state.name in ("PRE_BACKWARD", "POST_BACKWARD")
        prefetch = op == "all_gather" and (bool(getattr(self._local, "prefetch", False))
                                           or id(group) in self._prefetched)
        return {MODULE_KEY: FSDP_SCOPE, PHASE_KEY: "backward" if bwd else "forward",
                "fsdp_op": op, "fsdp_module": served(getattr(group, "_module_fqn", ""),
                                                     self.prefix),
                "fsdp_prefetch": prefetch}

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        op = "reduce_scatter" if name == "post_backward" else "all_gather"
        watch = self

        def wrapper(group: Any, *args: Any, **kwargs: Any) -> Any:
            session = native.active_session()
            if session is None:
                return real(group, *args, **kwargs)
            ann = watch.annotation(group, op)
            if ann[PHASE_KEY] == "backward":
                session.push(session.tables.scopes.backward(ann))
            else:
                d, frozen = normalize(ann)
                session.open_scope(d, False, frozen)
            try:
                return real(group, *args, **kwargs)
            finally:
                session.close_scope()
                watch._note(name, group, ann)

        wrapper.__wrapped__ = real  # type: ignore[attr-defined]
        return wrapper

    def _note(self, name: str, group: Any, ann: dict[str, Any]) -> None:
        """An all-gather issued as a prefetch stays one until its copy-out has run."""
        if name == "unshard" and ann["fsdp_prefetch"] and \
                getattr(group, "_all_gather_result", None) is not None:
            self._prefetched.add(id(group))
        elif name == "wait_for_unshard":
            self._prefetched.discard(id(group))
