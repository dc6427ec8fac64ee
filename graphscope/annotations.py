"""``mark_kernels`` and friends: the reference semantics MK1-MK15 of SPEC.md, on any driver.

How a node gets its tag: a scope pushes an id on the native per-thread stack; CUPTI's
GRAPHNODE_CREATED callback stores the innermost id with the new node (O(1) per node, whatever
the nesting depth, and from any capturing stream). Scope ids index :data:`SCOPES`, which keeps
each id's merged dict, so nothing is merged per node.

Backward (torch without ``node_creation_hook``): scope pushes and pops note autograd's
sequence counter, so the scope that created any autograd node is known from its sequence number
(:class:`_Ownership`). When backward starts inside a session, every node about to run gets one
pre-hook that sets the thread's backward slot to its owner's backward scope. Hooks run on
autograd's device thread, which is where backward kernels are launched. See
docs/architecture.md.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import pickle
import sys
import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Optional, Union

from . import native
from ._errors import AnnotationError

PHASE_KEY = "autograd_phase"
MODULE_KEY = "module_name"
Annotation = Union[str, Mapping[str, Any]]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------ scope table
@dataclass(frozen=True)
class Scope:
    """One interned scope: its merged forward dict and the scope its backward work gets."""

    annotation: Mapping[str, Any]
    backward_scope: int  # -1: autograd nodes created here are not annotated in backward
    is_backward: bool


class ScopeTable:
    """scope id -> merged annotation. Interned by (parent, annotation, backward)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._scopes: list[Scope] = []
        self._index: dict[tuple[int, bytes, bool], int] = {}

    def __len__(self) -> int:
        return len(self._scopes)

    def __getitem__(self, scope_id: int) -> Scope:
        return self._scopes[scope_id]

    def annotation(self, scope_id: int) -> Mapping[str, Any]:
        return self._scopes[scope_id].annotation if scope_id >= 0 else {}

    def _add(self, key: tuple[int, bytes, bool], make: Any) -> int:
        with self._lock:
            sid = self._index.get(key)
            if sid is None:
                sid = len(self._scopes)
                self._scopes.append(make(sid))
                self._index[key] = sid
            return sid

    def child(
        self, parent: int, ann: Mapping[str, Any], backward: bool = True,
        frozen: Optional[bytes] = None,
    ) -> int:
        """The scope opened with ``ann`` inside ``parent`` (MK4: inner wins shared keys).

        ``frozen`` is ``pickle.dumps(ann)`` when the caller has it (the interning key).
        """
        key = (parent, frozen if frozen is not None else _freeze(ann), backward)
        sid = self._index.get(key)
        if sid is not None:
            return sid
        p = self._scopes[parent] if parent >= 0 else None
        fwd = {**(p.annotation if p else {}), **ann}
        if p is not None and p.is_backward:
            # A forward scope opened while backward runs: checkpoint recomputation (MK8).
            fwd["recompute"] = True
        base_bwd = self.annotation(p.backward_scope) if p and p.backward_scope >= 0 else None
        if backward:
            bsid = self.backward({**(base_bwd or {}), **ann, PHASE_KEY: "backward"})  # MK6
        elif base_bwd is not None:
            bsid = self.backward(dict(base_bwd))
        else:
            bsid = -1
        in_bwd = bool(p and p.is_backward)
        return self._add(key, lambda sid: Scope(MappingProxyType(fwd), bsid, in_bwd))

    def backward(self, ann: Mapping[str, Any]) -> int:
        """A scope pushed while a hooked autograd node executes; nodes made there inherit it."""
        key = (-2, _freeze(ann), True)
        return self._add(key, lambda sid: Scope(MappingProxyType(dict(ann)), sid, True))

    def with_base(self, scope_id: int, base: Mapping[str, Any]) -> int:
        """``scope_id``'s dict laid over ``base`` (mark_stream: the stream dict is outermost)."""
        s = self._scopes[scope_id] if scope_id >= 0 else None
        merged = {**base, **(s.annotation if s else {})}
        key = (-3 - scope_id, _freeze(merged), True)
        bwd = s.backward_scope if s else -1
        return self._add(
            key, lambda sid: Scope(MappingProxyType(merged), bwd, bool(s and s.is_backward))
        )


def _freeze(ann: Mapping[str, Any]) -> bytes:
    return pickle.dumps(sorted(ann.items()), protocol=4)


SCOPES = ScopeTable()


_STR_ANNOTATIONS: dict[str, tuple[dict[str, Any], bytes]] = {}


def normalize(annotation: Annotation, what: str = "mark_kernels") -> tuple[dict[str, Any], bytes]:
    """MK12: a str ``s`` is ``{"name": s}``; keys must be str and values must pickle.

    Returns the dict and its pickle (the scope-interning key).
    """
    if isinstance(annotation, str):
        hit = _STR_ANNOTATIONS.get(annotation)
        if hit is None:
            hit = ({"name": annotation}, pickle.dumps({"name": annotation}, protocol=4))
            if len(_STR_ANNOTATIONS) < 4096:
                _STR_ANNOTATIONS[annotation] = hit
        return dict(hit[0]), hit[1]
    if isinstance(annotation, Mapping):
        ann: dict[str, Any] = dict(annotation)
    else:
        raise AnnotationError(
            f"{what}: annotation must be a str or a dict, not {type(annotation).__name__}"
        )
    try:
        return ann, pickle.dumps(ann, protocol=4)
    except Exception:
        pass
    for k, v in ann.items():  # find the culprit for the message
        if not isinstance(k, str):
            raise AnnotationError(f"{what}: annotation key {k!r} is not a str")
        try:
            pickle.dumps(v, protocol=4)
        except Exception as exc:
            raise AnnotationError(
                f"{what}: value of annotation key {k!r} ({type(v).__name__}) cannot be "
                f"pickled: {exc}"
            ) from None
    raise AnnotationError(f"{what}: annotation cannot be pickled")


# ------------------------------------------------------------------ op table
@dataclass(frozen=True)
class OpRecord:
    """The aten op that launched a node, its inputs and the user's source line."""

    op: str
    shapes: str
    source: Optional[str]


class OpTable:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[OpRecord] = []
        self._index: dict[OpRecord, int] = {}

    def __getitem__(self, op_id: int) -> OpRecord:
        return self._ops[op_id]

    def __len__(self) -> int:
        return len(self._ops)

    def intern(self, rec: OpRecord) -> int:
        oid = self._index.get(rec)
        if oid is not None:
            return oid
        with self._lock:
            oid = self._index.setdefault(rec, len(self._ops))
            if oid == len(self._ops):
                self._ops.append(rec)
            return oid


OPS = OpTable()


def _describe(args: Any) -> str:
    import torch

    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            dt = str(a.dtype).replace("torch.", "")
            parts.append(f"{dt}[{','.join(map(str, a.shape))}]")
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            parts.append("[" + _describe(a) + "]")
        elif isinstance(a, (int, float, bool)) or a is None:
            parts.append(repr(a))
    return ", ".join(parts)


def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__))


def user_source(skip_dirs: tuple[str, ...]) -> Optional[str]:
    """``file:line (function)`` of the innermost frame outside torch and graphscope."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(skip_dirs) and not fn.startswith("<"):
            return f"{fn}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back  # type: ignore[assignment]
    return None


# ------------------------------------------------------------------ ownership by sequence nr
class _Ownership:
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

    def event(self) -> None:
        if threading.get_ident() != self.thread:
            return
        self.seqs.append(_seq())
        self.scopes.append(_current_scope())

    def owner_scope(self, node: Any) -> int:
        """The forward scope whose dict the node's backward gets (-1: none)."""
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


OWNERSHIP = _Ownership()


class _Session:
    """One annotated capture window (or a make_graphed_callables call)."""

    def __init__(self, record_ops: bool) -> None:
        self.record_ops = record_ops
        self.hooked: set[Any] = set()  # nodes given a pre-hook during this session
        self.skip_dirs = (_torch_dir(), _PKG_DIR, os.path.dirname(contextlib.__file__))
        self.main_thread = threading.get_ident()
        self._modes: list[Any] = []
        self._real_run_backward: Any = None

    def enter(self) -> None:
        import torch.autograd

        OWNERSHIP.thread = self.main_thread
        OWNERSHIP.event()
        self._real_run_backward = torch.autograd._engine_run_backward
        real = self._real_run_backward

        def run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
            create_graph = bool(args[2]) if len(args) > 2 else bool(
                kwargs.get("create_graph", False))
            self.prepare_backward(t_outputs, create_graph)
            try:
                return real(t_outputs, *args, **kwargs)
            finally:
                native.retire_slots()

        torch.autograd._engine_run_backward = run_backward
        if self.record_ops or _STREAMS:
            dm = _op_mode_cls()(self)
            dm.__enter__()
            self._modes.append(dm)

    def exit(self) -> None:
        import torch.autograd

        try:
            while self._modes:
                self._modes.pop().__exit__(None, None, None)
        finally:
            if self._real_run_backward is not None:
                torch.autograd._engine_run_backward = self._real_run_backward
            OWNERSHIP.event()
            OWNERSHIP.thread = None
            native.retire_slots()
            self.hooked.clear()

    # -- backward attribution
    def prepare_backward(self, t_outputs: Any, create_graph: bool) -> None:
        """Give every node of the graph about to run a pre-hook that sets the thread's slot to
        its owner's backward scope (-1 for AccumulateGrad and unowned nodes: MK9)."""
        import torch

        stack = []
        for t in t_outputs:
            node = t.grad_fn if isinstance(t, torch.Tensor) else getattr(t, "node", None)
            if node is not None:
                stack.append(node)
        hooked = self.hooked
        explicit = OWNERSHIP.explicit
        on_main = threading.get_ident() == self.main_thread
        while stack:
            node = stack.pop()
            if node in hooked:
                continue
            hooked.add(node)
            stack.extend(n for n, _ in node.next_functions if n is not None)
            if type(node).__name__ == "AccumulateGrad":
                bsid = -1
            elif node in explicit:
                bsid = explicit[node]
            elif on_main:
                sid = OWNERSHIP.owner_scope(node)
                bsid = SCOPES[sid].backward_scope if sid >= 0 else -1
            else:
                continue  # nested backward on autograd's thread: inherit the running node's slot
            node.register_prehook(_slot_hook(bsid))
            if create_graph and bsid >= 0:
                node.register_hook(_claim_hook(bsid))


_SLOT_HOOKS: dict[int, Any] = {}


def _slot_hook(scope_id: int) -> Any:
    """One shared pre-hook per backward scope."""
    hook = _SLOT_HOOKS.get(scope_id)
    if hook is None:
        set_slot = native.extension().set_slot

        def hook(grad_outputs: Any) -> None:
            if _ACTIVE is not None:  # MK7: outside an annotated capture, do nothing
                set_slot(scope_id)

        _SLOT_HOOKS[scope_id] = hook
    return hook


def _claim_hook(scope_id: int) -> Any:
    def post(grad_inputs: Any, grad_outputs: Any) -> None:
        if _ACTIVE is None or not _grad_enabled():
            return
        # MK8: nodes made while this node ran (create_graph=True) inherit its scope.
        import torch

        hooked = _ACTIVE.hooked
        explicit = OWNERSHIP.explicit
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


_ACTIVE: Optional[_Session] = None
_STREAMS: dict[int, dict[str, Any]] = {}  # cuda stream handle -> mark_stream annotation
_MODE_CLASSES: dict[str, type] = {}


def _op_mode_cls() -> type:
    if "op" not in _MODE_CLASSES:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        class OpMode(TorchDispatchMode):
            def __init__(self, session: _Session) -> None:
                super().__init__()
                self.session = session

            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                s = self.session
                pushed = False
                if _STREAMS:
                    base = _STREAMS.get(torch.cuda.current_stream().cuda_stream)
                    if base is not None:
                        native.push_scope(SCOPES.with_base(native.current_scope(), base))
                        pushed = True
                if s.record_ops:
                    src = (
                        user_source(s.skip_dirs)
                        if threading.get_ident() == s.main_thread
                        else None
                    )
                    rec = OpRecord(str(func.name()), _describe(args), src)
                    prev = native.set_current_op(OPS.intern(rec))
                try:
                    return func(*args, **(kwargs or {}))
                finally:
                    if s.record_ops:
                        native.set_current_op(prev)
                    if pushed:
                        native.pop_scope()

        _MODE_CLASSES["op"] = OpMode
    return _MODE_CLASSES["op"]


def annotations_active() -> bool:
    """True inside an annotated capture (``graph(..., enable_annotations=True)``).

    A session exists only while the recorder holds its subscription (see :func:`session`).
    """
    return _ACTIVE is not None


def push(scope_id: int) -> None:
    """Open a scope on this thread (and note it for backward ownership)."""
    ext = native.extension()
    ext.push_scope(scope_id)
    own = OWNERSHIP
    if own.thread == threading.get_ident():
        own.seqs.append(_seq())
        own.scopes.append(scope_id)


def pop() -> None:
    ext = native.extension()
    ext.pop_scope()
    own = OWNERSHIP
    if own.thread == threading.get_ident():
        own.seqs.append(_seq())
        own.scopes.append(int(ext.current_scope()))


@contextlib.contextmanager
def session(record_ops: bool = False) -> Iterator[list[native.CreatedNodes]]:
    """Subscribe the recorder and start backward attribution; yields the records list."""
    global _ACTIVE
    if _ACTIVE is not None:
        raise AnnotationError("an annotated capture is already running in this process")
    with native.recording() as records:
        s = _Session(record_ops)
        _ACTIVE = s
        try:
            s.enter()
            yield records
        finally:
            try:
                s.exit()
            finally:
                _ACTIVE = None


# ------------------------------------------------------------------ public API
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
        ann, frozen = normalize(self._ann)
        if _ACTIVE is not None:
            push(SCOPES.child(_current_scope(), ann, self._backward, frozen))
            self._pushed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            pop()
            self._pushed = False


def mark_stream(stream: Any, annotation: Annotation) -> None:
    """Tag all work captured on ``stream`` (a str ``s`` means ``{"stream": s}``).

    The stream's dict is the outermost layer: scopes inside override its keys. Pass
    ``annotation=None`` to forget the stream.
    """
    handle = int(getattr(stream, "cuda_stream", stream))
    if annotation is None:
        _STREAMS.pop(handle, None)
        return
    ann = {"stream": annotation} if isinstance(annotation, str) else normalize(annotation)[0]
    _STREAMS[handle] = ann


class _ModuleHooks:
    """Module-FQN scopes through *global* module hooks (per-module hooks would trip CG5)."""

    def __init__(self) -> None:
        # module -> (annotation, its pickle, backward)
        self.names: weakref.WeakKeyDictionary[Any, tuple[dict[str, Any], bytes, bool]] = (
            weakref.WeakKeyDictionary()
        )
        self.handles: list[Any] = []
        self.local = threading.local()

    def install(self) -> None:
        if self.handles:
            return
        from torch.nn.modules import module as m

        self.handles = [
            m.register_module_forward_pre_hook(self.pre),
            m.register_module_forward_hook(self.post, always_call=True),
        ]

    def uninstall_if_idle(self) -> None:
        if not len(self.names) and self.handles:
            for h in self.handles:
                h.remove()
            self.handles = []

    def pre(self, module: Any, args: Any) -> None:
        entry = self.names.get(module)
        stack = self.local.__dict__.setdefault("pushed", [])
        if entry is not None and annotations_active():
            push(SCOPES.child(native.current_scope(), entry[0], entry[2], entry[1]))
            stack.append(True)
        else:
            stack.append(False)

    def post(self, module: Any, args: Any, output: Any) -> None:
        stack = self.local.__dict__.setdefault("pushed", [])
        if stack and stack.pop():
            pop()


_MODULES = _ModuleHooks()


class ModuleAnnotations:
    """Handle returned by :func:`register_module_annotations`; ``remove()`` undoes it."""

    def __init__(self, modules: list[Any]) -> None:
        self._modules = modules

    def remove(self) -> None:
        for mod in self._modules:
            _MODULES.names.pop(mod, None)
        _MODULES.uninstall_if_idle()

    def __enter__(self) -> ModuleAnnotations:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def module_fqn(path: str, prefix: str = "L") -> str:
    return f"{prefix}.{path}" if path else prefix


def register_module_annotations(
    model: Any, *, depth: Optional[int] = None, prefix: str = "L", backward: bool = True
) -> ModuleAnnotations:
    """Tag each module's captured work with ``{"module_name": "L.<path>"}``.

    Args:
        model: the root ``nn.Module``; the root itself is ``"L"``.
        depth: tag modules at most this many levels below the root (None: all).
        prefix: the FQN prefix PyTorch's helper uses (``"L"``).
        backward: also attribute each module's backward kernels to it (MK5).
    """
    mods = []
    for path, mod in model.named_modules():
        level = 0 if not path else path.count(".") + 1
        if depth is not None and level > depth:
            continue
        ann = {MODULE_KEY: module_fqn(path, prefix)}
        _MODULES.names[mod] = (ann, pickle.dumps(ann, protocol=4), backward)
        mods.append(mod)
    _MODULES.install()
    return ModuleAnnotations(mods)


def is_available() -> bool:
    """True when annotations can be recorded here: a GPU, a driver and CUPTI (13.0 is fine)."""
    try:
        native.ensure_loaded()
        return True
    except Exception:
        return False


# ------------------------------------------------------------------ exec-id annotation map
class _AnnotationStore:
    """Template-graph annotations and their current exec-graph keys."""

    def __init__(self) -> None:
        self.by_template: dict[int, dict[int, dict[str, Any]]] = {}
        self.exec_of: dict[int, int] = {}  # template graph id -> exec id
        self.live: dict[int, list[dict[str, Any]]] = {}
        self.view: Mapping[int, list[dict[str, Any]]] = MappingProxyType(self.live)
        self.graph_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def add_template(self, gid: int, local: dict[int, dict[str, Any]]) -> None:
        self.by_template[gid] = local

    def rekey(self, gid: int, exec_id: int, clones: Optional[dict[int, int]] = None) -> int:
        """Key graph ``gid``'s annotations by ``exec_id`` (dropping the previous exec's keys)."""
        old = self.exec_of.get(gid)
        if old is not None:
            for k in [k for k in self.live if k >> 32 == old]:
                del self.live[k]
        self.exec_of[gid] = exec_id
        local = self.by_template.get(gid, {})
        n = 0
        if clones:
            for clone, origin in clones.items():
                if clone >> 32 == exec_id and origin >> 32 == gid:
                    ann = local.get(origin & 0xFFFFFFFF)
                    if ann:
                        self.live[clone] = [dict(ann)]
                        n += 1
        else:
            for lid, ann in local.items():
                self.live[(exec_id << 32) | lid] = [dict(ann)]
                n += 1
        return n


STORE = _AnnotationStore()


def template_annotations(rec: native.CreatedNodes, exec_ids: set[int]) -> dict[int, dict]:
    """Per template graph id: {local id: merged annotation} of annotated nodes (MK2, MK14)."""
    out: dict[int, dict[int, dict[str, Any]]] = {}
    body_tagged = 0
    for nid, gid, ntype, sid in zip(
        rec.node_id.tolist(), rec.graph_id.tolist(), rec.node_type.tolist(), rec.scope.tolist()
    ):
        if gid in exec_ids:
            continue
        per = out.setdefault(gid, {})
        if sid < 0:
            continue
        if ntype in native.BODY_TYPES:
            body_tagged += 1
            continue
        if ntype not in native.ANNOTATED_TYPES:
            continue
        ann = SCOPES.annotation(sid)
        if ann:
            per[nid & 0xFFFFFFFF] = dict(ann)
    if body_tagged:
        warnings.warn(
            f"graphscope: {body_tagged} child-graph/conditional node(s) were captured inside "
            "annotated scopes; work in their bodies is tagged only where CUPTI's clone "
            "callbacks map it to exec nodes (MK14)",
            stacklevel=3,
        )
    return out


def publish(rec: native.CreatedNodes, cuda_graph: Any = None) -> list[int]:
    """Store a finished capture's annotations; rekey instantiated graphs. Returns template ids."""
    exec_ids = set(rec.exec_id.tolist())
    per_graph = template_annotations(rec, exec_ids)
    clones = dict(zip(rec.clone_id.tolist(), rec.clone_origin.tolist()))
    for gid, local in per_graph.items():
        STORE.add_template(gid, local)
    for eid, gid in zip(rec.exec_id.tolist(), rec.exec_graph.tolist()):
        if gid in per_graph:
            STORE.rekey(gid, eid, clones)
    gids = sorted(per_graph)
    if cuda_graph is not None and len(gids) >= 1:
        STORE.graph_ids[cuda_graph] = gids[0]
    return gids


def get_kernel_annotations() -> Mapping[int, list[dict[str, Any]]]:
    """Live read-only ``{exec node id: [annotation dict]}``; ``dict(...)`` it to pickle."""
    return STORE.view


def save_kernel_annotations(path: Union[str, os.PathLike]) -> str:
    """Pickle ``dict(get_kernel_annotations())`` atomically, in PyTorch's format."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        pickle.dump(dict(STORE.live), f, protocol=4)
    os.replace(tmp, path)
    return path


def remap_to_exec_graph(cuda_graph: Any) -> int:
    """Rekey ``cuda_graph``'s annotations to its current exec graph (each instantiate mints a
    new exec id). Returns the number of exec node ids keyed."""
    gid = STORE.graph_ids.get(cuda_graph)
    if gid is None:
        try:
            gid = native.graph_id(cuda_graph.raw_cuda_graph())
        except Exception:
            return 0
    eid = native.exec_id(cuda_graph.raw_cuda_graph_exec())
    return STORE.rekey(gid, eid)


def clear_kernel_annotations() -> None:
    """Forget every recorded annotation."""
    STORE.by_template.clear()
    STORE.exec_of.clear()
    STORE.live.clear()
