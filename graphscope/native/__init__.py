"""The one door to the compiled extension ``graphscope._native``.

Nothing else imports the extension. Loading is lazy and never raises on import: a machine with
no GPU, no driver and no CUPTI still imports graphscope, and
:func:`graphscope.capture.capabilities.probe` says what is missing.

libcupti is chosen so that one process never holds two copies: the copy torch already loaded
(found in ``/proc/self/maps``) wins; otherwise the pip package ``nvidia-cuda-cupti``, then
``$CUDA_HOME``.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._errors import (
    CuptiError,
    CuptiPrivilegesError,
    CuptiSubscriberError,
    GraphscopeError,
    NativeUnavailableError,
    NoGPUError,
    ProfilerActiveError,
)
from .profilers import BEFORE_PROFILER, watch_profiler
from .profilers import profiler_active as _profiler_active

try:  # the compiled module: the only import of it in the package
    from . import _native as _ext

    _IMPORT_ERROR = ""
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    _ext = None  # type: ignore[assignment]
    _IMPORT_ERROR = (f"graphscope.native._native did not import: {exc} "
                     "(reinstall with `make install`)")

_lock = threading.Lock()
_loaded = False

ANNOTATED_TYPES = frozenset({0, 1, 2})  # MK2: kernel, memcpy and memset nodes
BODY_TYPES = frozenset({4, 13})  # child graph and conditional: bodies in another cudaGraph_t

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


def extension() -> Any:
    """Return the compiled module or raise :class:`NativeUnavailableError`."""
    if _ext is None:
        raise NativeUnavailableError(_IMPORT_ERROR)
    return _ext


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


def _call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except RuntimeError as exc:
        raise translate(exc) from None


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
    """Open libcuda and libcupti (torch's copy) in the extension; raise if that cannot be done."""
    global _loaded
    if _loaded and _ext is not None:  # no lock once loaded: a capture loop asks several times
        return _ext
    ext = extension()
    with _lock:
        if _loaded:
            return ext
        torch = _import_torch_cuda()
        if not torch.cuda.is_available():
            raise NoGPUError(f"no CUDA GPU is visible to PyTorch (torch {torch.__version__}, "
                             f"built for CUDA {torch.version.cuda})")
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
                _loaded = True
                return ext
            errors.append(why)
        raise NativeUnavailableError(
            "libcupti not found: install the pip package nvidia-cuda-cupti or set CUDA_HOME"
            + (f" ({'; '.join(errors)})" if errors else "")
        )


# ------------------------------------------------------------------ columns
def _col(buf: bytes, dtype: str, width: int = 1) -> np.ndarray:
    a = np.frombuffer(buf, dtype=dtype)
    return a.reshape(-1, width) if width > 1 else a


@dataclass(frozen=True)
class CreatedNodes:
    """GRAPHNODE_CREATED and clone records of one recorder window, as columns."""

    node_id: np.ndarray
    graph_id: np.ndarray
    node_type: np.ndarray
    scope: np.ndarray
    op: np.ndarray
    thread: np.ndarray
    clone_id: np.ndarray
    clone_origin: np.ndarray
    exec_id: np.ndarray
    exec_graph: np.ndarray
    callback_errors: int


def _records() -> CreatedNodes:
    d = extension().recorder_records()
    return CreatedNodes(
        node_id=_col(d["node_id"], "<u8"),
        graph_id=_col(d["graph_id"], "<u4"),
        node_type=_col(d["node_type"], "<i4"),
        scope=_col(d["scope"], "<i8"),
        op=_col(d["op"], "<i8"),
        thread=_col(d["thread"], "<u8"),
        clone_id=_col(d["clone_id"], "<u8"),
        clone_origin=_col(d["clone_origin"], "<u8"),
        exec_id=_col(d["exec_id"], "<u4"),
        exec_graph=_col(d["exec_graph"], "<u4"),
        callback_errors=int(d["callback_errors"]),
    )


@contextmanager
def recording() -> Iterator[list[CreatedNodes]]:
    """Hold the CUPTI resource-callback subscription for the ``with`` body only.

    Yields a list that holds the records once the body ends (also when it raises). The
    subscription is released on every path. A subscription :data:`HELD` across captures is
    released first.
    """
    ext = ensure_loaded()
    HELD.release()
    _refuse_under_profiler()
    _call(ext.recorder_start, True)
    out: list[CreatedNodes] = []
    try:
        yield out
    finally:
        try:
            _call(ext.recorder_stop)
        finally:
            out.append(_records())


def _refuse_under_profiler() -> None:
    if _profiler_active():
        raise ProfilerActiveError(
            "torch.profiler is active: graphscope cannot subscribe to CUPTI while it runs; "
            "capture outside the profiler's `with` block"
        )


class HeldRecorder:
    """The CUPTI resource-callback subscription held across consecutive capture windows
    (``graphscope run``'s batch of a program's capture loop): subscribing and unsubscribing
    cost about 0.5 ms per capture on the H200, a tenth of a small decode graph's capture.
    Between windows the callbacks are off (the recorder's gate shut disables them in CUPTI: with
    them on, a counted capture between two windows had CUPTI deliver a record for every node it
    created and instantiate cloned, for the gate to drop). Released by
    :meth:`release`: when the batch is read (the program's first replay, a pause, the end),
    when a capture fails, before a torch.profiler session starts (CUPTI has one subscriber;
    Kineto needs it) and before any other :func:`recording`."""

    def __init__(self) -> None:
        self.held = False
        self.open = False  # a window is open
        # released while a window was open (a profiler started inside a capture): the nodes
        # made after that went unrecorded; the window's owner reads and resets it
        self.cut = False

    @contextmanager
    def window(self) -> Iterator[list[CreatedNodes]]:
        """One capture window's records (the list holds them once the body ends)."""
        ext = ensure_loaded()
        self.cut = False
        if not self.held:
            _refuse_under_profiler()
            _call(ext.recorder_start, True)
            self.held = True
        else:
            ext.recorder_clear()
            _call(ext.recorder_gate, True)  # CUPTI's callbacks on again (off between windows)
        out: list[CreatedNodes] = []
        self.open = True
        try:
            yield out
        finally:
            self.open = False
            ext.recorder_gate(False)
            try:
                out.append(_records())
            finally:
                ext.recorder_clear()

    def release(self) -> None:
        if self.held:
            self.held = False
            self.cut = self.open
            _call(extension().recorder_stop)


HELD = HeldRecorder()
BEFORE_PROFILER.append(HELD.release)


def tracer_active() -> bool:
    return _ext is not None and bool(_ext.tracer_active())


def cupti_detach() -> str:
    """Detach CUPTI from the process (``cuptiFinalize`` at a driver call's exit, as Kineto's
    teardown does): once activity records have been on, an attached CUPTI slows the program's
    later captures. The next CUPTI call attaches it again. Returns '' or why it did not (the
    tracer or recorder running, PM sampling on, another subscriber such as torch.profiler's)."""
    if _ext is None:
        return "the graphscope extension is not loaded"
    return str(_call(_ext.cupti_detach))


def recorder_active() -> bool:
    return _ext is not None and bool(_ext.recorder_active())


# Scope stack: per thread, in the extension. Cheap enough for module hooks.
def push_scope(scope_id: int) -> None:
    extension().push_scope(scope_id)


def pop_scope() -> int:
    return int(extension().pop_scope())


def current_scope() -> int:
    return -1 if _ext is None else int(_ext.current_scope())


def retire_slots() -> None:
    """Retire every thread's backward slot (after a backward call, at capture end)."""
    if _ext is not None:
        _ext.retire_slots()


def set_current_op(op_id: int) -> int:
    return int(extension().set_current_op(op_id))


# The native op observer (graphscope._opwatch, csrc/opwatch.cpp): a second compiled module,
# built only where torch was importable at build time and usable only with that same torch.
OP_OBSERVER_ENV = "GRAPHSCOPE_OP_OBSERVER"  # "python" forces the dispatch mode
NODE_IDS_ENV = "GRAPHSCOPE_NODE_IDS"  # "cupti": every node's id asked of CUPTI, none positional
_opwatch_loaded: Any = None
_opwatch_why: str | None = None


def op_observer() -> Any:
    """``graphscope._opwatch`` if it can record ops here, else None (:func:`op_observer_why`)."""
    global _opwatch_loaded, _opwatch_why
    if os.environ.get(OP_OBSERVER_ENV, "native") == "python":
        return None
    if _opwatch_loaded is None and _opwatch_why is None:
        _opwatch_why = _load_opwatch()
    return _opwatch_loaded


def op_observer_why() -> str:
    """Why ops are recorded by the Python dispatch mode ('' when the native observer is used)."""
    if os.environ.get(OP_OBSERVER_ENV, "native") == "python":
        return f"{OP_OBSERVER_ENV}=python"
    op_observer()
    return _opwatch_why or ""


def _load_opwatch() -> str | None:
    global _opwatch_loaded
    if _ext is None:
        return _IMPORT_ERROR
    import importlib.util

    import torch

    if importlib.util.find_spec(f"{__package__}._opwatch") is None:
        return ("not built: torch was not importable when graphscope was built (install it "
                "with --no-build-isolation where torch is installed)")
    try:
        from . import _opwatch as mod
    except ImportError as exc:  # built, but against a torch whose libraries differ from this one
        return (f"built for another torch and does not load here ({exc}): reinstall graphscope "
                "with --no-build-isolation to rebuild it")
    if mod.OP_BASE != 1 << 40:  # annotate/ops.py OP_BASE
        return ("graphscope.native._opwatch is from another graphscope build "
                f"(OP_BASE {mod.OP_BASE})")
    if mod.TORCH_VERSION != torch.__version__:
        return (f"built for torch {mod.TORCH_VERSION}, running torch {torch.__version__}: "
                "reinstall graphscope with --no-build-isolation to rebuild it")
    _opwatch_loaded = mod
    return None


# The allocator trace tracker (graphscope._alloctrace, csrc/alloctrace.cpp): built only against
# a CUDA build of torch, usable only with that torch and its native caching allocator.
ALLOC_TRACKER_ENV = "GRAPHSCOPE_ALLOC_TRACKER"  # "history": torch's allocator history instead
_alloctrace_loaded: Any = None
_alloctrace_why: str | None = None


def alloc_tracker() -> Any:
    """``graphscope._alloctrace`` where it can record the allocator's events, else None."""
    global _alloctrace_loaded, _alloctrace_why
    if os.environ.get(ALLOC_TRACKER_ENV, "native") == "history":
        return None
    if _alloctrace_loaded is None and _alloctrace_why is None:
        _alloctrace_why = _load_alloctrace()
    return _alloctrace_loaded


def _load_alloctrace() -> str | None:
    global _alloctrace_loaded
    try:
        import torch

        from . import _alloctrace as mod

        if mod.TORCH_VERSION != torch.__version__:
            return f"built for torch {mod.TORCH_VERSION}, running torch {torch.__version__}"
        backend = torch.cuda.get_allocator_backend()
    except Exception as exc:  # noqa: BLE001  (not built here, or no CUDA: the history instead)
        return f"not usable here ({exc})"
    if backend != "native":
        return f"allocator backend {backend!r} (the tracker follows torch's native allocator)"
    _alloctrace_loaded = mod
    return None


@dataclass(frozen=True)
class GraphInspection:
    """Nodes (creation order) and edges of one template ``cudaGraph_t``."""

    graph_id: int
    node_id: np.ndarray
    node_type: np.ndarray
    grid: np.ndarray
    block: np.ndarray
    smem: np.ndarray
    bytes: np.ndarray
    name_idx: np.ndarray
    names: list[str]
    demangled: list[str]
    edge_from: np.ndarray
    edge_to: np.ndarray


def inspect_graph(graph_ptr: int, demangle: bool = True) -> GraphInspection:
    """Walk a graph: a template (kept with ``keep_graph=True``) or one still being captured
    (:func:`capture_graph`). ``demangle=False`` leaves ``demangled`` as the raw names (see
    :func:`demangled`)."""
    return as_inspection(_call(ensure_loaded().inspect_graph, int(graph_ptr), bool(demangle)))


def read_graph(graph_ptr: int) -> Any:
    """:func:`inspect_graph` with ``demangle=False``, its columns left as the extension's bytes
    until :func:`as_inspection` makes them a :class:`GraphInspection`: ``graphscope run`` reads
    each graph inside the program's capture loop and builds the arrays after it."""
    return _call(ensure_loaded().inspect_graph, int(graph_ptr), False)


def as_inspection(d: Any) -> GraphInspection:
    """A :class:`GraphInspection` from :func:`read_graph`'s answer."""
    return GraphInspection(
        graph_id=int(d["graph_id"]),
        node_id=_col(d["node_id"], "<u8"),
        node_type=_col(d["node_type"], "<i4"),
        grid=_col(d["grid"], "<i4", 3),
        block=_col(d["block"], "<i4", 3),
        smem=_col(d["smem"], "<u4"),
        bytes=_col(d["bytes"], "<u8"),
        name_idx=_col(d["name_idx"], "<i4"),
        names=list(d["names"]),
        demangled=list(d["demangled"]),
        edge_from=_col(d["edge_from"], "<u8"),
        edge_to=_col(d["edge_to"], "<u8"),
    )


def read_capture(stream: int, detach_count: bool) -> Any:
    """:func:`read_graph` of the graph being captured on ``stream``, with the graph's nodes
    listed once: with ``detach_count``, node counting is detached at the same listing (its
    waiting notes resolved from it, :func:`graphscope.native.nodecount.detach`). None when the
    stream
    is not capturing (counting is detached all the same). ``graphscope run`` calls it just
    before the program's ``capture_end``."""
    return _call(ensure_loaded().read_capture, int(stream), bool(detach_count))


def capture_graph(stream: int) -> int:
    """The graph being captured on ``stream`` (a ``cudaStream_t`` handle), 0 when the stream is
    not capturing. Valid until the capture ends; nodes may be read, not removed."""
    return int(_call(ensure_loaded().capture_graph, int(stream)))


def positional_ids() -> bool | None:
    """Whether graph node ids are read as the nodes' positions in the driver's list (checked
    against CUPTI node by node on the process's first graph, then on each graph's first and
    last node; csrc/inspect.h): None until a graph was read."""
    state = int(extension().positional_ids())
    return None if state < 0 else bool(state)


def warm_graph_ids() -> str:
    """Read CUPTI's ids of an empty graph made and dropped now: a process's first id read
    costs ~15 ms, which ``graphscope run`` takes at its start rather than in the program's
    first capture. Returns why it could not ('' when done)."""
    return str(_call(ensure_loaded().warm_graph_ids))


def demangled(ins: GraphInspection, cache: dict[str, str]) -> GraphInspection:
    """``ins`` with its kernel names demangled, through ``cache`` (raw name -> demangled),
    which a capture loop's graphs share: a ladder's buckets launch the same kernels."""
    out = []
    for name in ins.names:
        d = cache.get(name)
        if d is None:
            d = cache[name] = demangle(name)
        out.append(d)
    return replace(ins, demangled=out)


def exec_id(graph_exec_ptr: int) -> int:
    return int(_call(ensure_loaded().exec_id, int(graph_exec_ptr)))


def graph_id(graph_ptr: int) -> int:
    return int(_call(ensure_loaded().graph_id, int(graph_ptr)))


def debug_dot_print(graph_ptr: int, path: str) -> None:
    _call(ensure_loaded().debug_dot_print, int(graph_ptr), str(path))


def demangle(name: str) -> str:
    return str(_ext.demangle(name)) if _ext is not None else name


@dataclass(frozen=True)
class ActivityRecords:
    """Kernel (kind 0), memcpy (1) and memset (2) activity records, as columns."""

    kind: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    graph_id: np.ndarray
    graph_node_id: np.ndarray
    grid: np.ndarray
    block: np.ndarray
    name_idx: np.ndarray
    bytes: np.ndarray
    names: list[str]
    dropped: int
    flush_ns: int = 0  # cuptiActivityFlushAll at stop (CUPTI completing its records)
    decode_ns: int = 0  # graphscope reading records into these columns (mostly during replays)
    tail_decode_ns: int = 0  # the part of decode_ns done inside the flush
    # cudaGraphLaunch's host interval per launch (runtime-API records, CUPTI's clock) and the
    # correlation id its nodes carry; empty where this CUPTI cannot record single APIs
    launch_start_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    launch_end_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    launch_correlation: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    runtime_records: int = 0  # runtime-API records seen while tracing (launches among them)


@contextmanager
def tracing() -> Iterator[list[ActivityRecords]]:
    """Collect CUPTI activity records for the ``with`` body; the list holds them afterwards."""
    ext = ensure_loaded()
    watch_profiler()
    if _profiler_active():
        raise ProfilerActiveError(
            "torch.profiler is active: graphscope's tracer would take its CUPTI activity "
            "buffers; trace outside the profiler's `with` block"
        )
    _call(ext.tracer_start)
    out: list[ActivityRecords] = []
    try:
        yield out
    finally:
        d = _call(ext.tracer_stop)
        out.append(
            ActivityRecords(
                kind=_col(d["kind"], "<i4"),
                start_ns=_col(d["start"], "<u8"),
                end_ns=_col(d["end"], "<u8"),
                device=_col(d["device"], "<u4"),
                stream=_col(d["stream"], "<u4"),
                correlation=_col(d["correlation"], "<u4"),
                graph_id=_col(d["graph_id"], "<u4"),
                graph_node_id=_col(d["graph_node_id"], "<u8"),
                grid=_col(d["grid"], "<i4", 3),
                block=_col(d["block"], "<i4", 3),
                name_idx=_col(d["name_idx"], "<i4"),
                bytes=_col(d["bytes"], "<u8"),
                names=list(d["names"]),
                dropped=int(d["dropped"]),
                flush_ns=int(d["flush_ns"]),
                decode_ns=int(d["decode_ns"]),
                tail_decode_ns=int(d["tail_decode_ns"]),
                launch_start_ns=_col(d["launch_start"], "<u8"),
                launch_end_ns=_col(d["launch_end"], "<u8"),
                launch_correlation=_col(d["launch_correlation"], "<u4"),
                runtime_records=int(d["runtime_records"]),
            )
        )
