"""Module-FQN scopes through *global* module hooks (per-module hooks would trip CG5), and the
one rule every capture source names modules by.

The rule (PyTorch's ``register_fqn_annotation_hooks`` convention): the model's root module is
``L`` and a module below it ``L.<path>``, its path in ``named_modules()`` (``L.blocks.0.attn``).
The model is the module registered here (``graphscope capture``, ``make_graphed_callables``)
or, in ``graphscope run``, the first outermost module the program calls in a capture; a further
outermost module called in the same capture (a loss module beside the model) is
``(<class>)`` and its submodules ``(<class>).<path>``, like graphscope's other scopes outside
the model (``(loss)``, ``(optimizer)``). Compiled kernels placed by inductor's provenance get
the same names. So the same model gives the same module paths under ``capture`` and ``run``.
"""

from __future__ import annotations

import pickle
from typing import Any, Optional

from .modulehooks import ModuleHooks
from .scopes import MODULE_KEY
from .tables import TABLES


class ModuleAnnotations:
    """Handle returned by :func:`register_module_annotations`; ``remove()`` undoes it."""

    def __init__(self, hooks: ModuleHooks, modules: list[Any]) -> None:
        self._hooks = hooks
        self._modules = modules

    def remove(self) -> None:
        hooks = self._hooks
        for mod in self._modules:
            hooks.names.pop(mod, None)
        hooks.uninstall_if_idle()

    def __enter__(self) -> ModuleAnnotations:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


ROOT = "L"  # the model's root module (PyTorch's helper's prefix)


def module_fqn(path: str, prefix: str = ROOT) -> str:
    """The name of the module at ``path`` (``named_modules()``) below a root named ``prefix``."""
    return f"{prefix}.{path}" if path else prefix


def other_root(module: Any) -> str:
    """The name of an outermost module called beside the model in one capture: ``(<class>)``."""
    return f"({type(module).__name__})"


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
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                              or depth < 0):
        raise ValueError(f"register_module_annotations: depth must be None or an int >= 0, "
                         f"not {depth!r}")
    hooks = TABLES.modules
    mods = []
    for path, mod in model.named_modules():
        level = 0 if not path else path.count(".") + 1
        if depth is not None and level > depth:
            continue
        ann = {MODULE_KEY: module_fqn(path, prefix)}
        hooks.names[mod] = (ann, pickle.dumps(ann, protocol=4), backward)
        mods.append(mod)
    hooks.install()
    return ModuleAnnotations(hooks, mods)
