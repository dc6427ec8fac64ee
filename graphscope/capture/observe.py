"""The ``observe`` source: watch the CUDA graphs an unmodified program captures itself.

Used by ``graphscope run`` and :func:`graphscope.profile`. torch 2.11 has no official
capture/instantiate/replay hooks (pytorch PR 192162 adds them later), so the methods of
``torch.cuda.CUDAGraph`` are wrapped; measured on the H200, that sees every capture of a decode
loop, a whole training step, ``make_graphed_callables`` and torch.compile's cudagraph trees
(``shared/probes/probe_run_hooks.txt``).

Per capture: the CUPTI recorder is subscribed from ``capture_begin`` to the end of the
instantiate that follows ``capture_end`` (and never longer); module, optimizer and inductor
hooks are installed for that window only, so the program's eager work outside captures runs
untouched. Every graph is created with ``keep_graph=True`` so its template can be inspected;
where the program asked for ``keep_graph=False`` graphscope instantiates right after
``capture_end``, as torch would have. Replays ``K .. K+N-1`` of each graph run under the CUPTI
activity tracer, one replay at a time, followed by a device synchronize; the others run at
plain speed.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from .. import annotate as ann
from .. import native
from .._errors import GraphscopeError
from ..annotate import state
from ..annotate.backward import pop, push
from ..annotate.scopes import MODULE_KEY, SCOPES, normalize
from ..annotate.training import leaf_scopes, optimizer_hooks
from ..graphs.join import JoinResult, join
from .source import RawCapture, RawGraph, read_dot, unplaced_reason

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class ObserveConfig:
    """Options of ``graphscope run`` / :func:`graphscope.profile`."""

    replays: int = 20  # traced replays per graph
    skip_replays: int = 0  # replays of each graph to let pass before tracing
    graphs: Optional[str] = None  # regex: only graphs whose name matches are traced
    depth: Optional[int] = None
    record_ops: bool = True
    keep_events: int = 3
    dot: bool = True  # keep the driver's verbose DOT of every graph

    def validate(self) -> ObserveConfig:
        from .._errors import ConfigError

        if self.replays < 0 or self.skip_replays < 0 or self.keep_events < 0:
            raise ConfigError("--replays, --skip-replays and keep_events must be >= 0")
        if self.depth is not None and self.depth < 0:
            raise ConfigError("--depth must be >= 0")
        if self.graphs is not None:
            try:
                re.compile(self.graphs)
            except re.error as exc:
                raise ConfigError(f"--graphs {self.graphs!r} is not a regular expression: "
                                  f"{exc}") from None
        return self


@dataclass
class Observed:
    """One capture the program made."""

    site: str
    kind: str  # "eager" or "compiled"
    ordinal: int = 0
    shapes: str = ""
    name: str = ""
    raw: Optional[RawGraph] = None
    exec_ids: list[int] = field(default_factory=list)
    replays: int = 0
    traced: int = 0
    pool_bytes: Optional[int] = None
    pool: Any = None
    user_keep: bool = False
    failed: Optional[str] = None
    untraced_why: Optional[str] = None  # why a replay ran untraced (the first reason)
    root: Optional[str] = None
    wrapper_files: set[str] = field(default_factory=set)

    @property
    def exec_id(self) -> int:
        return self.exec_ids[-1] if self.exec_ids else -1


# ---------------------------------------------------------------- naming
def _skip_frame(fn: str, torch_dir: str) -> bool:
    return (fn.startswith((torch_dir, _HERE, "<")) or "torchinductor_" in fn
            or os.path.basename(fn) in ("contextlib.py", "runpy.py", "threading.py"))


def capture_site(torch_dir: str) -> tuple[str, str, Optional[str]]:
    """(``file:line`` of the program's frame that started the capture, kind, root class)."""
    f: Any = sys._getframe(2)
    compiled = False
    while f is not None:
        fn = f.f_code.co_filename
        if "cudagraph_trees" in fn:
            compiled = True
        if not _skip_frame(fn, torch_dir):
            root = None
            if compiled:
                me = f.f_locals.get("self")
                root = type(me).__name__ if me is not None and hasattr(me, "_modules") else None
                site = f"{os.path.basename(fn)}:{f.f_lineno} ({f.f_code.co_name})"
            else:
                site = f"{os.path.basename(fn)}:{f.f_lineno}"
            return site, ("compiled" if compiled else "eager"), root
        f = f.f_back
    return "?", ("compiled" if compiled else "eager"), None


def describe_shapes(values: Any, limit: int = 3) -> str:
    """``[1,1]`` / ``[8,64] [8]``: the shapes of the tensors among ``values``."""
    import torch

    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append("[" + ",".join(str(int(s)) for s in v.shape) + "]")
            if len(out) == limit:
                break
    return " ".join(out)


def _compiled_inputs() -> str:
    """Shapes of a cudagraph-tree recording's non-static inputs, from its ``_record`` frame."""
    f: Any = sys._getframe(2)
    while f is not None:
        if "cudagraph_trees" in f.f_code.co_filename and "inputs" in f.f_locals:
            inputs = f.f_locals["inputs"]
            node = f.f_locals.get("self")
            static = set()
            for owner in (node, getattr(node, "wrapped_function", None)):
                idx = getattr(owner, "static_input_idxs", None)
                if idx:
                    static = set(idx)
                    break
            vals = [v for i, v in enumerate(inputs) if i not in static]
            return describe_shapes(vals)
        f = f.f_back
    return ""


# ---------------------------------------------------------------- module scopes (hooks)
class _ModuleNames:
    """Module FQNs resolved from the outermost module the program called in a capture."""

    def __init__(self) -> None:
        self.roots: weakref.WeakKeyDictionary[Any, dict[Any, str]] = weakref.WeakKeyDictionary()
        self.local = threading.local()

    def names_of(self, root: Any) -> dict[Any, str]:
        names = self.roots.get(root)
        if names is None:
            label = type(root).__name__
            names = {m: (f"{label}.{p}" if p else label) for p, m in root.named_modules()}
            self.roots[root] = names
        return names


def _module_hooks(obs: Observer) -> list[Any]:
    """Global forward pre/post hooks that push module scopes; installed per capture window,
    inert on other threads' eager work, and never traced by dynamo."""
    import torch
    from torch.nn.modules import module as m

    names = obs.module_names
    local = names.local
    depth = obs.cfg.depth

    @torch._dynamo.disable
    def pre(module: Any, args: Any) -> None:
        stack = local.__dict__.setdefault("stack", [])
        if state.ACTIVE is None:
            stack.append((None, False))
            return
        parent_root = stack[-1][0] if stack else None
        table = names.names_of(parent_root) if parent_root is not None else None
        if table is None or module not in table:
            root, table = module, names.names_of(module)
            cur = obs.current
            if cur is not None and not stack:
                if not cur.shapes:
                    cur.shapes = describe_shapes(args)
                if cur.root is None:
                    cur.root = type(module).__name__
        else:
            root = parent_root
        fqn = table[module]
        if depth is not None and fqn.count(".") > depth:
            stack.append((root, False))
            return
        a = {MODULE_KEY: fqn, "module_source": "hooks"}
        ann_dict, frozen = normalize(a)
        push(SCOPES.child(native.current_scope(), ann_dict, True, frozen))
        stack.append((root, True))

    @torch._dynamo.disable
    def post(module: Any, args: Any, output: Any) -> None:
        stack = local.__dict__.get("stack")
        if stack:
            _, pushed = stack.pop()
            if pushed:
                pop()

    return [m.register_module_forward_pre_hook(pre),
            m.register_module_forward_hook(post, always_call=True)]


def _leaf_scopes(names: _ModuleNames) -> Callable[[Any], int]:
    """AccumulateGrad: the parameter's owner module among the modules seen in the window."""

    def owner(var: Any) -> Optional[str]:
        for table in list(names.roots.values()):
            for mod, fqn in table.items():
                if any(p is var for p in mod.parameters(recurse=False)):
                    return fqn
        return None

    return leaf_scopes(owner)


# ---------------------------------------------------------------- inductor provenance
_SOURCE_NODES = re.compile(r"Source Nodes: \[([^\]]*)\]")
_CALL_LINE = re.compile(r"\.run\(|extern_kernels\.|\.call\(|torch\.ops\.")


def module_path(stack_entry: str) -> str:
    """``L['self'].blocks[0].attn`` / ``L__self___blocks_0`` style paths -> ``blocks.0.attn``."""
    s = re.sub(r"\._modules\['([^']*)'\]", r".\1", stack_entry)
    s = re.sub(r"^L\['self'\]\.?", "", s)
    s = re.sub(r"^self\.?", "", s)
    s = re.sub(r"\['([^']*)'\]", r".\1", s)
    s = re.sub(r"\[(\d+)\]", r".\1", s)
    return s.strip(".")


class Provenance:
    """Compiled kernels -> modules, from inductor's own metadata.

    While inductor compiles, ``GraphLowering.compile_to_module`` is wrapped: for the wrapper
    file it writes, graphscope keeps {pre-grad FX node name: module path} from the post-grad
    nodes' ``nn_module_stack`` (keyed by their ``from_node`` origin, the names inductor writes
    in the wrapper's ``Source Nodes: [...]`` comments). While a cudagraph tree records, the
    triton launcher is wrapped so each kernel node carries the wrapper line that launched it
    (extern kernels get it from the op mode). A node's module is then read off the comment
    above that line. Inductor's compile caches are turned off for the run: a cache hit compiles
    nothing, and nothing could be learned.
    """

    def __init__(self) -> None:
        self.by_file: dict[str, dict[str, list[str]]] = {}
        self.installed = False
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        if self.installed:
            return
        try:
            import torch._inductor.config as icfg
            from torch._inductor import graph as igraph
            from torch._inductor.runtime import triton_heuristics as th
        except Exception:  # pragma: no cover - no inductor in this torch
            return
        self.installed = True
        old_cache = getattr(icfg, "force_disable_caches", None)
        if old_cache is not None:
            icfg.force_disable_caches = True
            self._undo.append(lambda: setattr(icfg, "force_disable_caches", old_cache))
        real_compile = igraph.GraphLowering.compile_to_module
        prov = self

        def compile_to_module(self: Any) -> Any:
            mod = real_compile(self)
            with contextlib.suppress(Exception):
                prov.learn(getattr(mod, "__file__", None), self.module.graph)
            return mod

        igraph.GraphLowering.compile_to_module = compile_to_module  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(igraph.GraphLowering, "compile_to_module",
                                          real_compile))
        real_run = th.CachingAutotuner.run
        ops = ann.ops

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if state.ACTIVE is None:
                return real_run(self, *args, **kwargs)
            f = sys._getframe(1)
            src = f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})"
            name = getattr(getattr(self, "fn", None), "__name__", "triton")
            prev = native.set_current_op(ops.OPS.intern(ops.OpRecord(f"triton:{name}", "", src)))
            try:
                return real_run(self, *args, **kwargs)
            finally:
                native.set_current_op(prev)

        th.CachingAutotuner.run = run  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(th.CachingAutotuner, "run", real_run))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()
        self.installed = False

    def learn(self, path: Optional[str], graph: Any) -> None:
        if not path:
            return
        table: dict[str, list[str]] = {}
        for n in graph.nodes:
            stack = n.meta.get("nn_module_stack")
            if not stack:
                continue
            origin = n.meta.get("from_node")
            key = origin[0].name if origin else n.name
            path_str = list(stack.values())[-1][0]
            mod = module_path(str(path_str))
            mods = table.setdefault(key, [])
            if mod not in mods:
                mods.append(mod)
        self.by_file[os.path.abspath(path)] = table

    def place(self, source: Optional[str], root: str) -> Optional[dict[str, Any]]:
        """The annotation of a compiled node launched from wrapper line ``source``."""
        if not source:
            return None
        m = re.match(r"^(.*):(\d+)(?: \(.*\))?$", source)
        if not m:
            return None
        path, line = os.path.abspath(m.group(1)), int(m.group(2))
        table = self.by_file.get(path)
        if table is None:
            if "torchinductor_" not in path:
                return None
            return {"module_source": "none",
                    "unplaced_reason": "compiled code whose compilation graphscope did not see "
                                       "(cache hit or compiled before graphscope started)"}
        names: list[str] = []
        for i in range(line - 1, max(0, line - 40), -1):
            text = linecache.getline(path, i)
            hit = _SOURCE_NODES.search(text)
            if hit:
                names = [s.strip() for s in hit.group(1).split(",") if s.strip()]
                break
            if i != line and _CALL_LINE.search(text):
                break  # the previous launch: no comment belongs to this one
        mods: list[str] = []
        for n in names:
            for mod in table.get(n, []):
                if mod not in mods:
                    mods.append(mod)
        if not mods:
            return {"module_source": "none",
                    "unplaced_reason": "inductor recorded no module for this kernel's source "
                                       f"nodes ({', '.join(names) or 'none'})"}
        fqns = [f"{root}.{p}" if p else root for p in mods]
        common = os.path.commonprefix([f.split(".") for f in fqns])
        out: dict[str, Any] = {MODULE_KEY: ".".join(common) or root,
                               "module_source": "inductor"}
        if len(fqns) > 1:
            out["fused_modules"] = fqns  # a fused kernel can belong to several modules
        return out


# ---------------------------------------------------------------- the observer
class Observer:
    """Wraps ``torch.cuda.CUDAGraph`` and records every capture made while installed."""

    def __init__(self, cfg: ObserveConfig) -> None:
        self.cfg = cfg.validate()
        self.graphs: list[Observed] = []
        self.by_id: dict[int, Observed] = {}
        self.sites: dict[str, int] = {}
        self.current: Optional[Observed] = None
        self.module_names = _ModuleNames()
        self.provenance = Provenance()
        self.trace_cols: list[native.ActivityRecords] = []
        self.warnings: list[str] = []
        self._regex = re.compile(cfg.graphs) if cfg.graphs else None
        self._undo: list[Callable[[], None]] = []
        self._window: Optional[contextlib.ExitStack] = None
        self._records: list[Any] = []
        self._torch_dir = ""

    # -- install / uninstall
    def install(self) -> None:
        import torch

        native.ensure_loaded()
        native.watch_profiler()  # the program's own torch.profiler sessions keep CUPTI
        self._torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
        cls = torch.cuda.CUDAGraph
        obs = self
        names = ("__init__", "capture_begin", "capture_end", "instantiate", "replay")
        real = {k: cls.__dict__[k] for k in names if k in cls.__dict__}
        base_init = real.get("__init__") or getattr(cls.__mro__[1], "__init__")  # noqa: B009
        keep_of: dict[int, bool] = {}

        # keep_graph is read by the C++ constructor (__init__, not __new__): every graph keeps
        # its template so it can be inspected; the program's own choice is remembered.
        def __init__(self: Any, keep_graph: bool = False, *a: Any, **k: Any) -> None:
            keep_of[id(self)] = bool(keep_graph)
            base_init(self, True, *a, **k)

        def capture_begin(self: Any, *a: Any, **k: Any) -> None:
            obs._begin(self, keep_of.get(id(self), False))
            try:
                _parent(cls, "capture_begin", real)(self, *a, **k)
            except BaseException:
                obs._abort(self, "capture_begin raised")
                raise

        def capture_end(self: Any) -> None:
            try:
                _parent(cls, "capture_end", real)(self)
            except BaseException as exc:
                obs._abort(self, f"capture failed: {str(exc).splitlines()[0] if str(exc) else exc}")
                raise
            obs._end(self)

        def instantiate(self: Any) -> None:
            _parent(cls, "instantiate", real)(self)
            obs._instantiated(self)

        def replay(self: Any) -> None:
            rec = obs.by_id.get(id(self))
            if rec is None or rec.failed:
                return _parent(cls, "replay", real)(self)
            if rec.exec_id < 0:  # a kept graph replayed without instantiate (torch's AG2)
                instantiate(self)
            rec.replays += 1
            if obs._should_trace(rec):
                obs._traced_replay(rec, lambda: _parent(cls, "replay", real)(self))
            else:
                _parent(cls, "replay", real)(self)

        cls.__init__ = __init__  # type: ignore[method-assign]
        cls.capture_begin = capture_begin  # type: ignore[method-assign]
        cls.capture_end = capture_end  # type: ignore[method-assign]
        cls.instantiate = instantiate  # type: ignore[method-assign]
        cls.replay = replay  # type: ignore[method-assign]

        def undo() -> None:
            for name in names:
                if name in real:
                    setattr(cls, name, real[name])
                else:
                    with contextlib.suppress(AttributeError):
                        delattr(cls, name)

        self._undo.append(undo)
        if "torch._inductor" in sys.modules:
            self.provenance.install()
        real_compile = torch.compile

        def compile(*a: Any, **k: Any) -> Any:  # noqa: A001 - wraps torch.compile
            obs.provenance.install()
            return real_compile(*a, **k)

        torch.compile = compile
        self._undo.append(lambda: setattr(torch, "compile", real_compile))

    def uninstall(self) -> None:
        self._close_window()
        while self._undo:
            self._undo.pop()()
        self.provenance.uninstall()

    # -- capture window
    def _begin(self, cuda_graph: Any, user_keep: bool) -> None:
        site, kind, root = capture_site(self._torch_dir)
        rec = Observed(site=site, kind=kind, user_keep=user_keep, root=root)
        self.graphs.append(rec)
        self.by_id[id(cuda_graph)] = rec
        if self._window is not None or state.ACTIVE is not None:
            rec.failed = "captured while another annotated capture was running: not recorded"
            self.warnings.append(f"{site}: {rec.failed}")
            return
        if kind == "compiled":
            rec.shapes = _compiled_inputs()
        stack = contextlib.ExitStack()
        try:
            self._records = stack.enter_context(ann.session(self.cfg.record_ops))
            hooks = _module_hooks(self) + optimizer_hooks()
            stack.callback(lambda: [h.remove() for h in hooks])
            if state.ACTIVE is not None:
                state.ACTIVE.leaf_scope = _leaf_scopes(self.module_names)
        except GraphscopeError as exc:  # e.g. torch.profiler holds CUPTI: the program goes on
            stack.close()
            rec.failed = str(exc)
            self.warnings.append(f"{site}: not recorded: {exc}")
            return
        except BaseException:
            stack.close()
            raise
        self._window = stack
        self.current = rec

    def _close_window(self) -> Optional[Any]:
        stack, self._window = self._window, None
        self.current = None
        if stack is None:
            return None
        stack.close()  # removes hooks, exits modes, releases CUPTI
        return self._records[0] if self._records else None

    def _abort(self, cuda_graph: Any, why: str) -> None:
        rec = self.by_id.get(id(cuda_graph))
        if rec is not None and rec is self.current:
            rec.failed = why
            self._close_window()

    def _end(self, cuda_graph: Any) -> None:
        rec = self.by_id.get(id(cuda_graph))
        if rec is None or rec is not self.current:
            return
        inspection = None
        dot = ""
        try:
            ptr = cuda_graph.raw_cuda_graph()
            inspection = native.inspect_graph(ptr)
            dot = read_dot(ptr) if self.cfg.dot else ""
        except GraphscopeError as exc:
            rec.failed = f"could not inspect the graph: {exc}"
        finally:
            try:
                if not rec.user_keep:  # what torch's capture_end would have done
                    cuda_graph.instantiate()
            finally:
                records = self._close_window()
        if records is None or inspection is None:
            rec.failed = rec.failed or "no records"
            self.warnings.append(f"{rec.site}: {rec.failed}")
            return
        ordinal = self.sites.get(rec.site, 0)
        self.sites[rec.site] = ordinal + 1
        rec.ordinal = ordinal
        label = rec.site + (" compiled" if rec.kind == "compiled" else "")
        rec.name = f"{label} #{ordinal}" + (f" {rec.shapes}" if rec.shapes else "")
        rec.raw = RawGraph(rec.name, inspection, records, rec.exec_id, dot)
        rec.pool = _pool_id(cuda_graph)
        rec.pool_bytes = _pool_bytes(rec.pool)
        ann.publish(records, cuda_graph)

    def _instantiated(self, cuda_graph: Any) -> None:
        rec = self.by_id.get(id(cuda_graph))
        if rec is None or rec.failed:
            return
        with contextlib.suppress(Exception):
            eid = native.exec_id(cuda_graph.raw_cuda_graph_exec())
            if not rec.exec_ids or rec.exec_ids[-1] != eid:
                rec.exec_ids.append(eid)
            if rec.raw is not None:
                rec.raw.exec_id = eid
                ann.remap_to_exec_graph(cuda_graph)

    # -- replays
    def _should_trace(self, rec: Observed) -> bool:
        if rec.raw is None or rec.traced >= self.cfg.replays:
            return False
        if rec.replays <= self.cfg.skip_replays:
            return False
        return self._regex is None or bool(self._regex.search(rec.name))

    def _traced_replay(self, rec: Observed, replay: Callable[[], None]) -> None:
        import torch

        if native.tracer_active():  # a replay inside another traced replay: run it plainly
            replay()
            return
        with contextlib.ExitStack() as stack:
            try:
                out = stack.enter_context(native.tracing())
            except GraphscopeError as exc:
                # e.g. the program replays under its own torch.profiler, which keeps CUPTI's
                # activity buffers: this replay runs untraced (a later one may be traced), and
                # the program goes on
                if rec.untraced_why is None:
                    rec.untraced_why = str(exc)
                    self.warnings.append(f"{rec.name}: some replays not traced ({exc})")
                replay()
                return
            replay()
            torch.cuda.synchronize()
        rec.traced += 1
        self.trace_cols.extend(out)

    # -- results
    def result(self) -> RawCapture:
        """Everything observed so far, as a raw capture with its traced replays joined."""
        done = [g for g in self.graphs if g.raw is not None and not g.failed
                and len(g.raw.inspection.node_id)]
        raws = []
        for g in done:
            raw = g.raw
            assert raw is not None
            raw.exec_id = g.exec_id
            raw.info = {"site": g.site, "ordinal": g.ordinal, "kind": g.kind,
                        "shapes": g.shapes, "replays": g.replays, "traced_replays": g.traced,
                        "pool_bytes": g.pool_bytes, "keep_graph": g.user_keep}
            if g.pool is not None:  # graphs that share a pool are shown with it once
                raw.info["pool_id"] = [int(x) for x in g.pool]
            if g.kind == "compiled":
                root = g.root or "L"
                raw.place = lambda node, root=root: self.provenance.place(node.source, root)
            else:
                raw.place = unplaced_reason
            raws.append(raw)
        jr = self._join(done) if any(g.traced for g in done) else None
        meta: dict[str, Any] = {
            "observed_captures": len(self.graphs),
            "empty_captures": sum(1 for g in self.graphs if g.raw is not None
                                  and not len(g.raw.inspection.node_id)),
            "failed_captures": [{"site": g.site, "why": g.failed} for g in self.graphs
                                if g.failed],
        }
        if self.warnings:
            meta["warnings"] = list(self.warnings)
        return RawCapture(raws, join=jr, meta=meta)

    def _join(self, done: list[Observed]) -> JoinResult:
        cols = self.trace_cols
        cat = {k: np.concatenate([getattr(c, k) for c in cols]) if cols else np.zeros(0)
               for k in ("graph_node_id", "correlation", "start_ns", "end_ns", "stream", "kind")}
        gnid = cat["graph_node_id"].astype(np.uint64)
        # Rekey records of earlier instantiates of a graph to its last exec id.
        for g in done:
            for old in g.exec_ids[:-1]:
                hit = (gnid >> np.uint64(32)) == np.uint64(old)
                gnid[hit] = (np.uint64(g.exec_id) << np.uint64(32)) | (
                    gnid[hit] & np.uint64(0xFFFFFFFF))
        ids = {}
        for g in done:
            assert g.raw is not None
            local = g.raw.inspection.node_id & np.uint64(0xFFFFFFFF)
            for lid in local.tolist():
                ids[(g.exec_id << 32) | int(lid)] = g.name
        return join(gnid, cat["correlation"], cat["start_ns"], cat["end_ns"], cat["stream"],
                    cat["kind"], ids, self.cfg.keep_events)


def _parent(cls: Any, name: str, real: dict[str, Any]) -> Callable[..., Any]:
    """The method as torch defines it (on the class itself or on its C++ base)."""
    fn = real.get(name)
    if fn is not None:
        return fn
    return getattr(super(cls, cls), name)


def _pool_id(cuda_graph: Any) -> Any:
    with contextlib.suppress(Exception):
        return tuple(cuda_graph.pool())
    return None


def _pool_bytes(pool: Any) -> Optional[int]:
    """Bytes of the segments the caching allocator holds in ``pool`` (shared pools count once
    per graph that uses them)."""
    if pool is None:
        return None
    import torch

    try:
        segs = torch.cuda.memory_snapshot()
    except Exception:
        return None
    total = 0
    for s in segs:
        if tuple(s.get("segment_pool_id", ())) == pool:
            total += int(s.get("total_size", 0))
    return total
