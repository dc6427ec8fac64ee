"""The two optional compiled modules that observe torch from inside: the op observer
(``graphscope.native._opwatch``, csrc/opwatch.cpp: aten ops, shapes, source lines and backward
attribution from RecordFunction callbacks) and the allocator trace tracker
(``graphscope.native._alloctrace``, csrc/alloctrace.cpp). Each is built only where torch was
importable at build time and is usable only with that same torch: whether it can be used here
is found once per process and cached, with the reason when it cannot."""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Optional

from .loader import import_error, maybe_extension

OP_OBSERVER_ENV = "GRAPHSCOPE_OP_OBSERVER"  # "python" forces the dispatch mode
ALLOC_TRACKER_ENV = "GRAPHSCOPE_ALLOC_TRACKER"  # "history": torch's allocator history instead


def op_observer() -> Optional[ModuleType]:
    """``graphscope._opwatch`` if it can record ops here, else None (:func:`op_observer_why`)."""
    if os.environ.get(OP_OBSERVER_ENV, "native") == "python":
        return None
    return load_opwatch()[0]


def op_observer_why() -> str:
    """Why ops are recorded by the Python dispatch mode ('' when the native observer is used)."""
    if os.environ.get(OP_OBSERVER_ENV, "native") == "python":
        return f"{OP_OBSERVER_ENV}=python"
    return load_opwatch()[1]


@functools.cache
def load_opwatch() -> tuple[Optional[ModuleType], str]:
    """(the op observer, '') where it loads and fits this torch, else (None, why not)."""
    if maybe_extension() is None:
        return None, import_error()
    import importlib.util

    import torch

    if importlib.util.find_spec(f"{__package__}._opwatch") is None:
        return None, ("not built: torch was not importable when graphscope was built (install "
                      "it with --no-build-isolation where torch is installed)")
    try:
        from . import _opwatch as mod
    except ImportError as exc:  # built, but against a torch whose libraries differ from this one
        return None, (f"built for another torch and does not load here ({exc}): reinstall "
                      "graphscope with --no-build-isolation to rebuild it")
    if mod.OP_BASE != 1 << 40:  # annotate/optable.py OP_BASE
        return None, ("graphscope.native._opwatch is from another graphscope build "
                      f"(OP_BASE {mod.OP_BASE})")
    if mod.TORCH_VERSION != torch.__version__:
        return None, (f"built for torch {mod.TORCH_VERSION}, running torch {torch.__version__}: "
                      "reinstall graphscope with --no-build-isolation to rebuild it")
    return mod, ""


def alloc_tracker() -> Optional[ModuleType]:
    """``graphscope._alloctrace`` where it can record the allocator's events, else None."""
    if os.environ.get(ALLOC_TRACKER_ENV, "native") == "history":
        return None
    return load_alloctrace()[0]


def alloc_tracker_why() -> str:
    """Why the allocator's events come from torch's history ('' when the tracker is used)."""
    if os.environ.get(ALLOC_TRACKER_ENV, "native") == "history":
        return f"{ALLOC_TRACKER_ENV}=history"
    return load_alloctrace()[1]


@functools.cache
def load_alloctrace() -> tuple[Optional[ModuleType], str]:
    """(the allocator tracker, '') where it loads, fits this torch and its allocator is torch's
    native one, else (None, why not)."""
    try:
        import torch

        from . import _alloctrace as mod

        if mod.TORCH_VERSION != torch.__version__:
            return None, (f"built for torch {mod.TORCH_VERSION}, running torch "
                          f"{torch.__version__}")
        backend = torch.cuda.get_allocator_backend()
    except Exception as exc:  # noqa: BLE001  (not built here, or no CUDA: the history instead)
        return None, f"not usable here ({exc})"
    if backend != "native":
        return None, (f"allocator backend {backend!r} (the tracker follows torch's native "
                      "allocator)")
    return mod, ""
