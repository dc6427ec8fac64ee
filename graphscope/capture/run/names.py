"""Names in a program's captures: the capture site and input shapes that name a graph, and the
module scopes its forward hooks push (named by the one rule of :mod:`graphscope.annotate.modules`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import sys
import threading
import weakref
from typing import Any, Callable, Optional

from ... import native
from ...annotate.modules import ROOT, module_fqn, other_root
from ...annotate.scopes import MODULE_KEY, normalize
from ...annotate.tables import TABLES
from ...annotate.training import leaf_scopes

_HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=4096)  # asked per frame of every capture: the same few files
def _skip_frame(fn: str, torch_dir: str) -> bool:
    return (fn.startswith((torch_dir, _HERE, "<")) or "torchinductor_" in fn
            or os.path.basename(fn) in ("contextlib.py", "runpy.py", "threading.py"))


def capture_site(torch_dir: str) -> tuple[str, str]:
    """(``file:line`` of the program's frame that started the capture, kind)."""
    f: Any = sys._getframe(2)
    compiled = False
    while f is not None:
        fn = f.f_code.co_filename
        if "cudagraph_trees" in fn:
            compiled = True
        if not _skip_frame(fn, torch_dir):
            if compiled:
                site = f"{os.path.basename(fn)}:{f.f_lineno} ({f.f_code.co_name})"
            else:
                site = f"{os.path.basename(fn)}:{f.f_lineno}"
            return site, ("compiled" if compiled else "eager")
        f = f.f_back
    return "?", ("compiled" if compiled else "eager")


def site_function(site: str) -> Optional[str]:
    """The function named in a compiled capture's site (``prog.py:12 (scale)``: ``scale``)."""
    m = re.search(r" \(([^()]+)\)$", site)
    return m.group(1) if m else None


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


def compiled_inputs() -> str:
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


class ModuleNames:
    """Module FQNs of the outermost modules a program calls in its captures.

    The one rule (:mod:`graphscope.annotate.modules`): the first outermost module called in a
    capture is the root ``L`` and its submodules ``L.<path>``; a further outermost module called
    in the same capture (a loss module beside the model) is ``(<class>)``. A root keeps the name
    it got when first seen.
    """

    def __init__(self) -> None:
        # root -> (its prefix, {id(module): (weak reference to the module, fqn)} over its
        # modules, ids of modules called inside it that are none of them) (ids and weak
        # references, not the modules: a table holding its own key would keep every root, and
        # its GPU memory, alive for the whole run)
        self.roots: weakref.WeakKeyDictionary[
            Any, tuple[str, dict[int, tuple[Any, str]], set[int]]] = weakref.WeakKeyDictionary()
        self._in_window: set[int] = set()  # id() of the roots called in the current capture
        # module_hooks' caches (one per depth limit), kept across capture windows (see there)
        self.scope_cache: dict[Optional[int], Any] = {}

    def new_window(self) -> None:
        self._in_window.clear()

    @staticmethod
    def _table(root: Any, prefix: str) -> dict[int, tuple[Any, str]]:
        return {id(m): (weakref.ref(m), module_fqn(p, prefix)) for p, m in root.named_modules()}

    def fqn(self, root: Any, module: Any) -> Optional[str]:
        """``module``'s name under ``root`` (``root`` itself included; a root first seen in a
        window where another root was called is ``(<class>)``), or None where ``module`` is
        not one of ``root``'s modules. A root's table is made when the root is first seen and
        made again when its entry for ``module``'s id is another object's (the program dropped
        a module and a new one got its address: the new one must not take the dead one's name)
        or when a module is missing from it (added to the model since), once per such module."""
        entry = self.roots.get(root)
        if entry is None:
            prefix = other_root(root) if self._in_window else ROOT
            entry = self.roots[root] = (prefix, self._table(root, prefix), set())
        self._in_window.add(id(root))
        prefix, table, outside = entry
        hit = table.get(id(module))
        stale = hit is not None and hit[0]() is not module
        if stale or (hit is None and id(module) not in outside):
            table = self._table(root, prefix)
            outside = set() if stale else outside
            self.roots[root] = (prefix, table, outside)
            hit = table.get(id(module))
            if hit is None:
                outside.add(id(module))  # called inside the root, not one of its modules
        return hit[1] if hit is not None and hit[0]() is module else None

    def leaf_scopes(self) -> Callable[[Any], int]:
        """AccumulateGrad: the parameter's owner module among the modules seen so far."""

        def owner(var: Any) -> Optional[str]:
            for root, (_prefix, table, _outside) in list(self.roots.items()):
                for mod in root.modules():
                    hit = table.get(id(mod))
                    if (hit is not None and hit[0]() is mod
                            and any(p is var for p in mod.parameters(recurse=False))):
                        return hit[1]
            return None

        return leaf_scopes(owner)


class _CallPatch:
    """``nn.Module.__call__`` replaced (graphscope run holds it for a batch of captures);
    ``remove()`` puts it back.

    While dynamo compiles, torch's own ``__call__`` is in place: dynamo inlines a module call
    only through a Python ``__call__`` (a C one is an unsupported call: a graph break per
    module call, and a ``fullgraph=True`` compile fails), and a program's capture loop may
    recompile between two captures of a batch. dynamo's compile start and end callbacks
    (``torch._dynamo.callback.callback_handler``) swap the two; where dynamo is not imported
    yet, its first import runs with torch's own ``__call__`` too (it keeps the ``__call__`` it
    finds as ``unpatched_nn_module_call``), then the callbacks are registered."""

    def __init__(self, cls: Any, real: Any, call: Any) -> None:
        self.cls, self.real, self.call = cls, real, call
        self.removed = False
        self._dynamo: Any = None  # dynamo's callback handler, once hooked
        self._finder: Optional[_DynamoArrival] = None
        cls.__call__ = call
        if "torch._dynamo" in sys.modules:
            self.hook_dynamo()
        else:
            self._finder = _DynamoArrival(self)
            sys.meta_path.insert(0, self._finder)

    def suspend(self, *_: Any) -> None:
        """torch's own ``__call__`` back (dynamo compiles, or imports)."""
        if self.cls.__dict__.get("__call__") is self.call:
            self.cls.__call__ = self.real

    def resume(self, *_: Any) -> None:
        if not self.removed and self.cls.__dict__.get("__call__") is self.real:
            self.cls.__call__ = self.call

    def hook_dynamo(self) -> None:
        if self._dynamo is not None or self.removed:
            return
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:  # a torch without compile callbacks
            return
        callback_handler.register_start_callback(self.suspend)
        callback_handler.register_end_callback(self.resume)
        self._dynamo = callback_handler

    def remove(self) -> None:
        self.removed = True
        if self.cls.__dict__.get("__call__") is self.call:
            self.cls.__call__ = self.real
        if self._finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self._finder)
            self._finder = None
        if self._dynamo is not None:
            for name, fn in (("remove_start_callback", self.suspend),
                             ("remove_end_callback", self.resume)):
                with contextlib.suppress(ValueError, AttributeError):
                    getattr(self._dynamo, name)(fn)
            self._dynamo = None


class _DynamoArrival:
    """A meta path finder that finds nothing itself: when ``torch._dynamo`` is first imported
    while a :class:`_CallPatch` is in place, the import runs with torch's own
    ``nn.Module.__call__`` and the patch then hooks dynamo's compile callbacks."""

    def __init__(self, patch: _CallPatch) -> None:
        self.patch = patch
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch._dynamo" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        real_exec, patch = loader.exec_module, self.patch

        def exec_module(module: Any) -> None:
            patch.suspend()
            try:
                real_exec(module)
            finally:
                patch.resume()
                patch.hook_dynamo()

        loader.exec_module = exec_module
        return spec


def module_hooks(names: ModuleNames, depth: Optional[int], first_call: Callable[[Any, Any], None],
                 outer_return: Optional[Callable[[Any, Any], None]] = None,
                 marks: Any = None) -> list[Any]:
    """Module scopes in capture windows: ``nn.Module.__call__`` replaced by
    ``graphscope.native._native.module_call`` (csrc/modulecall.cpp), which opens each module call's
    scope inside an annotated capture on this thread and is inert elsewhere (graphscope run
    holds it across a batch of captures). ``first_call(module,
    args)`` sees the first outermost module called in the window (``args``: the values of its
    positional and keyword arguments, in order), ``outer_return(module,
    output)`` every outermost module's return; ``marks`` (the capture meter's) gets
    ``(time_ns, scope)`` at each scope change (a ``MarkLog``: no Python object made per
    mark; or a list). Returns handles with ``remove()``, as hooks have.

    Not global forward hooks: with any global hook every module call in the window takes
    torch's slow ``_call_impl`` path (the hook lists built and walked per call). Not a Python
    wrapper either: its frame, the arguments packed again and its cache lookups cost about
    4 us per module call (CPU), a fifth of a 16-layer decoder's capture time (150 module calls
    per capture; bench/bench_ladder_parts.py). The replacement runs the module's own
    ``__call__`` (hooks the program registered included) inside the scope, and closes the scope
    however the call ends.

    A module entered inside a root (a submodule call) is looked up in a cache by (module,
    root, the scope it opens in): its scope id, or that it opens none (deeper than ``depth``),
    as the first entry resolved it (:func:`_resolver`); the cache is kept across windows (a
    program's capture loop enters the same modules in the same scopes), so after the first
    capture a call is one lookup and a push.

    While dynamo compiles, torch's own ``__call__`` is in place (:class:`_CallPatch`), and
    graphscope's resolver runs with dynamo's frame callback off (a graph break inside a window
    would otherwise have dynamo compile the resolver's frames)."""
    import torch
    from torch.nn.modules import module as m

    ext = native.extension()
    eval_frame = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    cache = names.scope_cache.get(depth)
    if cache is None:
        cache = names.scope_cache[depth] = ext.module_scope_cache()
    cls = m.Module
    real = cls.__dict__.get("__call__", m.Module._wrapped_call_impl)
    call = ext.module_call(real, _resolver(names, depth, first_call), outer_return, marks,
                           cache, threading.get_ident(),
                           getattr(eval_frame, "set_eval_frame", None))
    return [_CallPatch(cls, real, call)]


def _resolver(names: ModuleNames, depth: Optional[int],
              first_call: Callable[[Any, Any], None]) -> Callable[[Any, Any, Any], Any]:
    """``(module, args, parent root or None) -> (root, scope id or -1)`` by the naming rule:
    the module's root is the parent root where the module is one of its submodules, else the
    module itself (a new outermost module, named by :meth:`ModuleNames.fqn`)."""
    scopes = TABLES.scopes
    current = native.extension().current_scope

    def resolve(module: Any, args: Any, parent_root: Any) -> tuple[Any, int]:
        fqn = names.fqn(parent_root, module) if parent_root is not None else None
        if fqn is None:  # a new outermost module (or one called inside a root it is not in)
            root, fqn = module, names.fqn(module, module) or other_root(module)
            if parent_root is None:
                first_call(module, args)
        else:
            root = parent_root
        if depth is not None and fqn.count(".") > depth:
            return root, -1
        ann_dict, frozen = normalize({MODULE_KEY: fqn, "module_source": "hooks"})
        return root, scopes.child(current(), ann_dict, True, frozen)

    return resolve
