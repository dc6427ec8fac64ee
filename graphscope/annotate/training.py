"""Training-step scopes: the optimizer (step and zero_grad), ``.grad`` accumulation into
parameters (AccumulateGrad) and DDP's reducer work per gradient bucket."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Optional

from .. import native
from ..model.graph import DDP_SCOPE
from .modules import module_fqn
from .scopes import MODULE_KEY, PHASE_KEY, normalize
from .tables import TABLES
from .tensors import storage_key, tensors_in

OPTIMIZER_SCOPE = "(optimizer)"


def no_dynamo(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch._dynamo.disable(fn)`` once dynamo is loaded, else ``fn``: importing dynamo takes
    about a second (inside a program's capture loop, under ``graphscope run``), and no compiled
    code runs before it is loaded (``torch.compile`` loads it)."""
    dynamo = sys.modules.get("torch._dynamo")
    return dynamo.disable(fn) if dynamo is not None else fn


def _optimizer_scope(opt: Any, **more: str) -> tuple[dict[str, Any], bytes]:
    """The scope of an optimizer's work: ``(optimizer)``, phase ``optimizer``, its class."""
    return normalize({MODULE_KEY: OPTIMIZER_SCOPE, PHASE_KEY: "optimizer",
                      "optimizer": type(opt).__name__, **more})


def optimizer_hooks() -> list[Any]:
    """``optimizer.step()`` and ``zero_grad()`` inside a capture are a scope of their own,
    phase ``optimizer``."""
    from torch.optim import optimizer as o

    local = threading.local()  # per thread: the session each step's pre-hook pushed in

    @no_dynamo
    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        stack = local.__dict__.setdefault("stack", [])
        session = native.active_session()
        if session is not None:
            d, frozen = _optimizer_scope(opt)
            session.open_scope(d, False, frozen)
        stack.append(session)

    @no_dynamo
    def post(opt: Any, args: Any, kwargs: Any) -> None:
        stack = local.__dict__.get("stack")
        session = stack.pop() if stack else None
        if session is not None:
            session.close_scope()

    real_zero = o.Optimizer.zero_grad

    def zero_grad(self: Any, *a: Any, **k: Any) -> Any:  # its fills are optimizer work too
        session = native.active_session()
        if session is None:
            return real_zero(self, *a, **k)
        d, frozen = _optimizer_scope(self, optimizer_call="zero_grad")
        session.open_scope(d, False, frozen)
        try:
            return real_zero(self, *a, **k)
        finally:
            session.close_scope()

    class _Undo:
        def remove(self) -> None:
            o.Optimizer.zero_grad = real_zero  # type: ignore[method-assign]

    o.Optimizer.zero_grad = zero_grad  # type: ignore[method-assign]
    return [o.register_optimizer_step_pre_hook(pre), o.register_optimizer_step_post_hook(post),
            _Undo()]


def leaf_scopes(owner: Callable[[Any], Optional[str]], source: str = "hooks"
                ) -> Callable[[Any], int]:
    """AccumulateGrad node -> backward scope of the parameter's owner module (a ``.grad``
    that already exists: micro-batch accumulation, zero_grad(set_to_none=False)), with
    ``accumulate_grad: True``. ``owner(param)`` gives the module path or None."""
    cache: dict[int, int] = {}

    def scope(node: Any) -> int:
        var = getattr(node, "variable", None)
        if var is None:
            return -1
        key = id(var)
        if key not in cache:
            fqn = owner(var)
            cache[key] = -1 if fqn is None else TABLES.scopes.backward(
                {MODULE_KEY: fqn, PHASE_KEY: "backward", "module_source": source,
                 "accumulate_grad": True})
        return cache[key]

    return scope


def param_owners(model: Any, depth: Optional[int] = None, prefix: str = "L"
                 ) -> dict[int, str]:
    """id(parameter) -> the path of the module that owns it (its ancestor at ``depth``)."""
    out: dict[int, str] = {}
    for path, mod in model.named_modules():
        parts = path.split(".") if path else []
        fqn = module_fqn(".".join(parts[:depth] if depth is not None else parts), prefix)
        for p in mod.parameters(recurse=False):
            out.setdefault(id(p), fqn)
    return out


class DDPWatch:
    """DDP's reducer work, scope ``(ddp)``, phase backward, per gradient bucket.

    The reducer runs from AccumulateGrad's post-hooks: a parameter's post-accumulate-grad hook
    (which runs just before them) sets the thread's slot to the bucket of that parameter, and
    the op mode (:meth:`scope_for`) learns each bucket's flat buffer from the copies into it,
    so the division, the NCCL all-reduce and the copies back at the end of backward are
    placed by the buffer they touch whatever bucket launched them.
    """

    def __init__(self, ddp: Any, depth: Optional[int] = None) -> None:
        module = ddp.module
        owners = param_owners(module, depth)
        self.scopes: list[int] = []
        self.bucket_of: dict[int, int] = {}
        self.buffers: dict[int, int] = {}  # storage data_ptr -> bucket
        for b in ddp.reducer._get_zeros_like_grad_buckets():
            i = int(b.index())
            params = list(b.parameters())
            mods = sorted({owners.get(id(p), "L") for p in params})
            nbytes = int(b.buffer().numel() * b.buffer().element_size())
            ann = {MODULE_KEY: DDP_SCOPE, PHASE_KEY: "backward", "ddp_bucket": i,
                   "bucket_modules": mods, "bucket_params": len(params),
                   "bucket_bytes": nbytes}
            while len(self.scopes) <= i:
                self.scopes.append(-1)
            self.scopes[i] = TABLES.scopes.backward(ann)
            for p in params:
                self.bucket_of[id(p)] = i
        self.params = [p for p in module.parameters() if id(p) in self.bucket_of]
        self._by_scope = {sid: i for i, sid in enumerate(self.scopes)}
        self._handles: list[Any] = []

    def arm(self) -> None:
        set_slot = native.extension().set_slot
        active = native.active_session
        for p in self.params:
            sid = self.scopes[self.bucket_of[id(p)]]

            def hook(param: Any, sid: int = sid) -> None:
                if active() is not None:
                    set_slot(sid)

            self._handles.append(p.register_post_accumulate_grad_hook(hook))

    def disarm(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def scope_for(self, func: Any, args: Any, kwargs: Any) -> int:
        """The bucket scope an op belongs to (-1: not DDP's), learning buffers as it goes.

        Only while no forward or optimizer scope is open: an optimizer reading gradients that
        are bucket views (gradient_as_bucket_view=True) stays the optimizer's.
        """
        cur = native.current_scope()
        if cur >= 0 and not TABLES.scopes[cur].is_backward:
            return -1
        bucket = self._by_scope.get(cur)
        if bucket is not None:  # the reducer's copy into the bucket: learn the buffer
            out = kwargs.get("out") if kwargs else None
            if out is None and args and str(func.name()).endswith("_"):
                out = args[0]
            ptr = storage_key(out)
            if ptr:
                self.buffers.setdefault(ptr, bucket)
        if self.buffers:
            for t in tensors_in((args, kwargs)):
                b = self.buffers.get(storage_key(t))
                if b is not None:
                    return self.scopes[b]
        return -1
