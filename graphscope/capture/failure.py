"""Say what to fix when a model cannot be captured: the op, the module and the line.

A capture that fails says little ("operation failed due to a previous error during capture").
After recovering the process, the step runs once more, eagerly, under a dispatch mode that
knows what a CUDA-graph capture forbids (host syncs, copies from pageable CPU memory, ops whose
output size depends on data); the first such op is reported with the innermost module on the
Python stack and the innermost source line outside torch and graphscope.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Optional

from ..annotate.modules import module_fqn
from ..annotate.ops import default_skip_dirs

# ops whose output shape depends on the data: they read the result on the host
_DATA_DEPENDENT = {"aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique2",
                   "aten::unique_consecutive", "aten::unique_dim", "aten::repeat_interleave"}


def module_names(model: Any, prefix: str = "L") -> dict[int, str]:
    """id(module) -> its path under ``model`` ("L", "L.encoder.0")."""
    out: dict[int, str] = {}
    named = getattr(model, "named_modules", None)
    if named is None:
        return out
    for path, mod in named():
        out.setdefault(id(mod), module_fqn(path, prefix))
    return out


def where(frames: Iterable[tuple[types.FrameType, int]], names: dict[int, str],
          skip: tuple[str, ...]) -> tuple[Optional[str], Optional[str]]:
    """(innermost module path, innermost user source line) over ``(frame, line)`` pairs,
    innermost first."""
    module = source = None
    for f, lineno in frames:
        if module is None:
            owner = f.f_locals.get("self") if "self" in f.f_code.co_varnames[:1] else None
            if owner is not None and id(owner) in names:
                module = names[id(owner)]
        fn = f.f_code.co_filename
        if source is None and not fn.startswith(skip) and not fn.startswith("<"):
            source = f"{fn}:{lineno} ({f.f_code.co_name})"
        if module is not None and source is not None:
            break
    return module, source


def _stack(frame: Optional[types.FrameType]) -> Iterator[tuple[types.FrameType, int]]:
    while frame is not None:
        yield frame, frame.f_lineno
        frame = frame.f_back


def _cuda(t: Any) -> bool:
    return getattr(getattr(t, "device", None), "type", None) == "cuda"


def _pageable_cpu(t: Any) -> bool:
    import torch

    return (isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.numel() > 0
            and not t.is_pinned())


def forbidden(func: Any, args: Any, kwargs: Any) -> Optional[str]:
    """Why ``func`` cannot run inside a CUDA-graph capture, or None."""
    import torch

    name = str(func.name())
    if name == "aten::_to_copy" and args:
        src, dev = args[0], (kwargs or {}).get("device")
        dev_type = getattr(dev, "type", dev)
        if dev_type == "cuda" and _pageable_cpu(src):
            return "copies a CPU tensor (not pinned) to the GPU"
        if _cuda(src) and dev_type == "cpu":
            return "copies a GPU tensor to the CPU (a host sync)"
    if name == "aten::copy_" and len(args) >= 2:
        dst, src = args[0], args[1]
        if _cuda(dst) and _pageable_cpu(src):
            return "copies a CPU tensor (not pinned) to the GPU"
        if isinstance(dst, torch.Tensor) and dst.device.type == "cpu" and _cuda(src):
            return "copies a GPU tensor to the CPU (a host sync)"
    if name in ("aten::_local_scalar_dense", "aten::is_nonzero") and args and _cuda(args[0]):
        return "reads a GPU value on the host (.item(), bool(), int() of a tensor: a host sync)"
    if name in _DATA_DEPENDENT and args and _cuda(args[0]):
        return "has an output size that depends on the data (a host sync)"
    return None


def find_culprit(run_once: Callable[[], Any], model: Any) -> Optional[str]:
    """Run ``run_once`` eagerly and describe the first op a capture forbids, or None."""
    from torch.utils._python_dispatch import TorchDispatchMode

    names = module_names(model)
    skip = default_skip_dirs()
    found: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types_: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if not found:
                why = forbidden(func, args, kwargs)
                if why:
                    module, source = where(_stack(sys._getframe(1)), names, skip)
                    found.append(f"{func.name()} {why}" + (f" in {module}" if module else "")
                                 + (f" at {source}" if source else ""))
            return func(*args, **(kwargs or {}))

    try:
        with Watch():
            run_once()
    except Exception:  # the eager run may fail too; what was found so far still helps
        pass
    return found[0] if found else None


def describe_exception(exc: BaseException, model: Any) -> str:
    """``Type: message (in L.encoder.0 at file:line (fn))`` from the exception's traceback."""
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    module, source = where(reversed(frames), module_names(model), default_skip_dirs())
    lines = str(exc).strip().splitlines()
    where_ = ", ".join(x for x in (f"in {module}" if module else "",
                                   f"at {source}" if source else "") if x)
    return f"{type(exc).__name__}: {lines[0] if lines else ''}" + (f" ({where_})" if where_
                                                                   else "")
