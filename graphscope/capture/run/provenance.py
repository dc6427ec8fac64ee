"""Compiled kernels -> modules, from inductor's own metadata (``graphscope run`` on programs
that use ``torch.compile(mode="reduce-overhead")``)."""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import sys
from typing import Any, Callable, Optional

from ... import native
from ...annotate.modules import ROOT, module_fqn
from ...annotate.optable import OpRecord
from ...annotate.scopes import MODULE_KEY
from .names import site_function

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
        active = native.active_session

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            session = active()
            if session is None:
                return real_run(self, *args, **kwargs)
            f = sys._getframe(1)
            src = f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})"
            name = getattr(getattr(self, "fn", None), "__name__", "triton")
            op = session.tables.ops.intern(OpRecord(f"triton:{name}", "", src))
            prev = native.set_current_op(op)
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

    def place(self, source: Optional[str], root: str = ROOT,
              site: str = "") -> Optional[dict[str, Any]]:
        """The annotation of a compiled node launched from wrapper line ``source``; its module
        paths are below ``root`` (the model's root, ``L``: annotate/modules.py). ``site``: the
        graph's capture site, which names the compiled function (``prog.py:12 (scale)``); where
        inductor saw no module at all in the compilation (a function compiled outside any
        module), that function is the nodes' scope, ``(scale)``, as a loss's is ``(loss)``."""
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
        function = site_function(site)
        if not table and function:
            return {MODULE_KEY: f"({function})", "module_source": "compiled function"}
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
        fqns = [module_fqn(p, root) for p in mods]
        common = os.path.commonprefix([f.split(".") for f in fqns])
        out: dict[str, Any] = {MODULE_KEY: ".".join(common) or root,
                               "module_source": "inductor"}
        if len(fqns) > 1:
            out["fused_modules"] = fqns  # a fused kernel can belong to several modules
        return out
