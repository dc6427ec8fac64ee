"""Loading the compiled extension ``graphscope.native._native`` and the CUDA libraries it opens.

Nothing else imports the extension. Loading is lazy and never raises on import: a machine with
no GPU, no driver and no CUPTI still imports graphscope, and
:func:`graphscope.capture.capabilities.probe` says what is missing.

libcupti is chosen so that one process never holds two copies: the copy torch already loaded
(found in ``/proc/self/maps``) wins; otherwise the pip package ``nvidia-cuda-cupti``, then
``$CUDA_HOME``.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import sys
import threading
from typing import Any

import numpy as np

from .._errors import (
    CuptiError,
    CuptiPrivilegesError,
    CuptiSubscriberError,
    GraphscopeError,
    NativeUnavailableError,
    NoGPUError,
)

try:  # the compiled module: the only import of it in the package
    from . import _native as _ext

    _IMPORT_ERROR = ""
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    _ext = None  # type: ignore[assignment]
    _IMPORT_ERROR = (f"graphscope.native._native did not import: {exc} "
                     "(reinstall with `make install`)")

NODE_IDS_ENV = "GRAPHSCOPE_NODE_IDS"  # "cupti": every node's id asked of CUPTI, none positional

SUBSCRIBER_HINT = (
    "another CUPTI client holds this process's one callback subscription: torch.profiler "
    "already ran in this process, or the program runs under Nsight Systems/Compute or "
    "cuda-gdb. Run graphscope before any torch.profiler use, or in a fresh process, and not "
    "under another profiler"
)
PRIVILEGES_HINT = (
    "the driver refuses GPU profiling to this user: run as root, or set the nvidia module "
    "option NVreg_RestrictProfilingToAdminUsers=0 and reload the driver"
)

_lock = threading.Lock()  # one loader at a time (the first capture of two threads)


def extension() -> Any:
    """Return the compiled module or raise :class:`NativeUnavailableError`."""
    if _ext is None:
        raise NativeUnavailableError(_IMPORT_ERROR)
    return _ext


def maybe_extension() -> Any:
    """The compiled module, or None where it did not import."""
    return _ext


def import_error() -> str:
    """Why the compiled module did not import ('' when it did)."""
    return _IMPORT_ERROR


def translate(exc: BaseException) -> GraphscopeError:
    """Turn a ``RuntimeError('<domain>:<code>:<text>')`` from the extension into our errors."""
    msg = str(exc)
    m = re.match(r"^(\w+):(-?\d+):(.*)$", msg, re.S)
    if not m:
        return GraphscopeError(msg)
    domain, code, text = m.group(1), int(m.group(2)), m.group(3).strip()
    if domain == "cupti":
        if code == 39:
            return CuptiSubscriberError(f"{text}. {SUBSCRIBER_HINT}.", code)
        if code == 35:
            return CuptiPrivilegesError(f"{text}. {PRIVILEGES_HINT}.", code)
        return CuptiError(text, code)
    if domain == "notloaded":
        return NativeUnavailableError(text)
    return GraphscopeError(text)


def call(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with the extension's RuntimeErrors as graphscope's errors."""
    try:
        return fn(*args)
    except RuntimeError as exc:
        raise translate(exc) from None


def column(buf: bytes, dtype: str, width: int = 1) -> np.ndarray:
    """One column the extension handed over as bytes (``width`` > 1: rows of that many)."""
    a = np.frombuffer(buf, dtype=dtype)
    return a.reshape(-1, width) if width > 1 else a


def loaded_cupti_paths() -> list[str]:
    """libcupti files mapped into this process right now."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libcupti" in line and "/" in line}
    except OSError:
        return []
    return sorted(paths)


def candidate_cupti_paths() -> list[str]:
    """Where libcupti could be loaded from, best first (the already-mapped copy wins)."""
    cands = loaded_cupti_paths()
    if cands:
        return cands[:1]
    for p in sys.path:
        cands += sorted(glob.glob(os.path.join(p, "nvidia", "cu*", "lib", "libcupti.so*")))
        cands += sorted(glob.glob(os.path.join(p, "nvidia", "cuda_cupti", "lib", "libcupti.so*")))
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            for sub in ("lib64", "lib", "extras/CUPTI/lib64"):
                cands += sorted(glob.glob(os.path.join(root, sub, "libcupti.so*")))
    return [c for c in dict.fromkeys(cands) if os.path.exists(c)]


def _import_torch_cuda() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise NoGPUError(f"PyTorch is not installed ({exc})") from None
    return torch


def ensure_loaded() -> Any:
    """Open libcuda and libcupti (torch's copy) in the extension; raise if that cannot be done.
    Done once per process (a failure is tried again at the next call)."""
    ext = extension()
    with _lock:
        return _loaded(ext)


@functools.cache  # the extension once loaded (a capture loop asks several times a capture)
def _loaded(ext: Any) -> Any:
    torch = _import_torch_cuda()
    if not torch.cuda.is_available():
        built = (f"built for CUDA {torch.version.cuda}" if torch.version.cuda
                 else "a CPU-only build")
        raise NoGPUError(f"no CUDA GPU is visible to PyTorch (torch {torch.__version__}, "
                         f"{built})")
    torch.cuda.init()  # loads torch's libcupti through kineto
    if os.environ.get(NODE_IDS_ENV, "").strip().lower() == "cupti":
        ext.set_positional_ids(0)
    why = ext.load_driver()
    if why:
        raise NoGPUError(why)
    errors = []
    for path in candidate_cupti_paths():
        why = ext.load_cupti(path)
        if not why:
            return ext
        errors.append(why)
    raise NativeUnavailableError(
        "libcupti not found: install the pip package nvidia-cuda-cupti or set CUDA_HOME"
        + (f" ({'; '.join(errors)})" if errors else "")
    )
