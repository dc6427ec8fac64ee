"""Watching a program's captures: per capture, the CUPTI recorder (or node counting,
graphscope.native.nodecount) records from ``capture_begin`` to the end of ``capture_end`` (torch
instantiates inside it unless the program keeps the template); module scopes are opened in that
window only. What that costs to set up is held across a batch of consecutive
captures and released when the batch is read, a capture fails or a torch.profiler session
starts: CUPTI's subscription (the watch's :class:`graphscope.native.HeldRecorder`), the replaced
``nn.Module.__call__`` (inert outside windows: torch's own call plus one check) and the
optimizer hooks. Inductor hooks are installed for the window only.

Every graph is captured with the program's own ``keep_graph``: a kept template slows the
process's later captures (``bench/probes/keep_graph_gpu.py``: a 67-bucket ladder's loop 1.10x
with ``keep_graph=True``, 1.08x for a plain loop while another ladder's templates are alive), so
graphscope reads the graph's nodes and edges just before ``capture_end``, while the stream is
still capturing (the driver permits reading the graph being captured), and lets torch
instantiate and destroy the template as it would. Names are demangled later. The driver's
verbose DOT (0.8 ms a graph) is read then only for a site's first capture; for a graph the
program keeps, after the loop from its template.

Inside a program's capture loop graphscope does only what cannot wait: the node records, the
scopes, the capture's times, the graph's nodes. Everything else — the demangled names, a kept
template's DOT, the allocator history (kept on across consecutive captures, one snapshot for
all), the published annotations — waits in :attr:`GraphWatch.pending` until the program first
replays a graph, resets or frees a pending one, pauses between captures for ``FLUSH_AFTER_S``,
or the watch ends (:meth:`GraphWatch.flush`). A kept graph freed first has its DOT read in its
``__del__``, while its template still exists. Ops (aten op, shapes, source line) are recorded
in the first ``op_captures`` captures of each capture site; a serving ladder's later buckets
keep their module, phase and memory scopes."""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Optional

from ... import annotate as ann
from ... import native
from ..._errors import GraphscopeError, NativeUnavailableError
from ...annotate.fsdp import FSDPWatch, fsdp_loaded
from ...annotate.session import backward_counter, counted_window
from ...annotate.tables import TABLES
from ...annotate.training import optimizer_hooks
from ...native import nodecount
from ..meter import CaptureMeter, tensor_bytes
from ..source import RawCapture, read_dot
from .counting import CountPolicy
from .graphs import Pending, ProgramGraph
from .names import ModuleNames, capture_site, compiled_inputs, describe_shapes, module_hooks
from .patch import patch_compile, patch_cuda_graph
from .provenance import Provenance
from .reading import note_exec_id, read_batch, read_live
from .results import raw_capture
from .traced import TracedReplays
from .trees import TreeEvents

if TYPE_CHECKING:  # config imports capture's registry (mode names): not back
    from ..config import CaptureConfig

FLUSH_AFTER_S = 2.0  # a pause this long after a capture ends the batch: it is read then


def _current_stream() -> int:
    """The handle of this thread's current CUDA stream (torch's raw getter where it exists:
    ``torch.cuda.current_stream()`` builds a Stream object, in a ladder's every capture)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(torch._C._cuda_getDevice()))
    return int(torch.cuda.current_stream().cuda_stream)


class GraphWatch:
    """Records every capture made while installed (``torch.cuda.CUDAGraph`` patched)."""

    def __init__(self, cfg: CaptureConfig) -> None:
        self.cfg = cfg.validate()
        self.graphs: list[ProgramGraph] = []
        self.by_id: dict[int, ProgramGraph] = {}
        self.sites: dict[str, int] = {}
        self.counting = CountPolicy()  # which captures are recorded by node counts
        self.current: Optional[ProgramGraph] = None
        self.module_names = ModuleNames()
        self.provenance = Provenance()
        self.trees = TreeEvents()  # torch.compile's cudagraph trees (trees.py)
        self.warnings: list[str] = []
        self.traced = TracedReplays(self.cfg, self.warnings)
        # the allocator history runs across consecutive captures, read once per batch; the
        # time between scope entries is marked by graphscope's own module hooks
        self.meter = CaptureMeter(scopes=False, keep_history=True)
        self.pending: dict[int, Pending] = {}  # id(CUDAGraph) -> its capture, not read yet
        # CUPTI's subscription, kept across a batch's windows
        self.recorder = native.HeldRecorder()
        self._last_end = 0.0
        # graphscope's own seconds per capture step, summed over the run (what ``run`` adds to
        # a program's capture wall, by cause: bench/bench_ladder.py prints them)
        self.overhead: dict[str, float] = {}
        # and its seconds reading the finished graphs of a batch (flush), outside the loop
        self.read_overhead: dict[str, float] = {}
        # all of its seconds in the patched capture_begin and capture_end (torch's own calls
        # left out): the steps above and what is not timed by cause; with "module_calls",
        # everything graphscope adds to a capture loop in its own code
        self.steps_s = 0.0
        self._undo: list[Callable[[], None]] = []
        # the open capture window: a context manager entered by begin, exited by _close_window
        self._window: Optional[Any] = None
        self._records: list[Any] = []
        self._stream: Optional[int] = None  # the stream the window's capture runs on (begun)
        self._read: Optional[tuple[Any, str, bool]] = None  # ending's (inspection, dot, later)
        self._demangled: dict[str, str] = {}  # raw kernel name -> demangled, across graphs
        self._batch_hooks: list[Any] = []  # module scopes and optimizer hooks (_hold_batch)
        self._batch_main = 0  # the thread they open scopes on
        self._torch_dir = ""
        self.install_s = 0.0  # warming CUPTI's graph ids at install (outside the program)
        self.install_note = ""  # why that could not be done

    @property
    def countable(self) -> dict[str, bool]:
        return self.counting.countable

    @property
    def deps_ok(self) -> dict[str, bool]:
        return self.counting.deps_ok

    # -- install / uninstall
    def install(self) -> None:
        import torch

        native.ensure_loaded()
        t = time.perf_counter()
        # CUPTI's first graph-id read (~15 ms) now, not in the program's first capture
        self.install_note = native.warm_graph_ids()
        self.install_s = time.perf_counter() - t
        native.op_observer()  # loaded now, not inside the program's first capture
        native.watch_profiler()  # the program's own torch.profiler sessions keep CUPTI
        self._torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
        self._undo.append(patch_cuda_graph(self))
        self._undo.append(patch_compile(self.provenance, self.trees))

    def uninstall(self) -> None:
        self._close_window()
        self.flush()
        while self._undo:
            self._undo.pop()()
        self.provenance.uninstall()
        self.trees.uninstall()

    # -- capture window
    def _spent(self, what: str, since: float, later: bool = False) -> float:
        now = time.perf_counter()
        into = self.read_overhead if later else self.overhead
        into[what] = into.get(what, 0.0) + now - since
        return now

    def begin(self, cuda_graph: Any, user_keep: bool) -> None:
        """The program's ``capture_begin`` is about to run: its capture window opens."""
        t = time.perf_counter()
        if self.pending and (id(cuda_graph) in self.pending
                             or t - self._last_end > FLUSH_AFTER_S):
            self.flush()  # a graph captured again, or the program paused: read the batch
            t = time.perf_counter()
        if not self._batch_hooks:  # a batch opens
            self.counting.reread()
        site, kind = capture_site(self._torch_dir)
        rec = ProgramGraph(site=site, kind=kind, user_keep=user_keep)
        self.graphs.append(rec)
        self.by_id[id(cuda_graph)] = rec
        if self._window is not None or native.active_session() is not None:
            rec.failed = "captured while another annotated capture was running: not recorded"
            self.warnings.append(f"{site}: {rec.failed}")
            return
        record_ops = self._plan(rec)
        self.module_names.new_window()
        t = self._spent("site", t)
        try:
            self._open_window(rec, record_ops, t)
        except GraphscopeError as exc:  # e.g. torch.profiler holds CUPTI: the program goes on
            rec.failed = str(exc)
            self.warnings.append(f"{site}: not recorded: {exc}")
            return
        except BaseException:
            self._release_batch()
            raise
        self.current = rec
        t = time.perf_counter()
        self.meter.begin()
        self._spent("meter", t)

    def _plan(self, rec: ProgramGraph) -> bool:
        """What this capture records: its ops (the returned flag) and whether by node counts."""
        site, kind = rec.site, rec.kind
        if kind == "compiled":
            rec.shapes = compiled_inputs()
        # a ladder's later buckets: scopes only (0: every one). Not compiled captures: inductor's
        # kernels are no aten ops the observer sees, their nodes are placed by its metadata
        limit = self.cfg.op_captures if kind != "compiled" else 0
        within = not limit or self.sites.get(site, 0) < limit
        record_ops = self.cfg.record_ops and within
        rec.ops_recorded = within or not self.cfg.record_ops  # False: skipped by the limit
        rec.counted = self.counting.counts(site, kind, record_ops)
        if rec.counted:
            rec.count_how = self.counting.how(site)
        return record_ops

    def _open_window(self, rec: ProgramGraph, record_ops: bool, t: float) -> None:
        """Enter the capture's window (the batch's hooks held first); a window whose entry
        failed is left closed."""
        # held for the batch before the window's session patches autograd's entry (a
        # session puts back what it found)
        self._hold_batch()
        t = self._spent("hooks", t)
        window: Any
        if rec.counted and not record_ops and not TABLES.streams:
            # scopes only: no per-window setup (and no backward to attribute)
            window = counted_window(rec.count_how)
        else:  # AccumulateGrad's scope in a backward: the parameter's module
            window = ann.session(record_ops, held=self.recorder, counted=rec.counted,
                                 count_how=rec.count_how,
                                 leaf_scope=self.module_names.leaf_scopes())
        self._records = window.__enter__()  # (a failed __enter__ undid itself)
        self._window = window
        self._spent("subscribe", t)

    def begun(self, cuda_graph: Any) -> None:
        """The program's capture has begun (its stream is capturing): its stream is noted, and
        a counted window starts counting its graph's nodes now. Never raises: a capture it
        cannot count is reported unrecorded when it ends."""
        rec = self.current
        self._stream = None
        if rec is None or self.by_id.get(id(cuda_graph)) is not rec:
            return
        try:
            self._stream = _current_stream()
            if rec.counted:
                nodecount.attach(self._stream)
        except Exception as exc:  # noqa: BLE001 - the program's capture goes on
            self.warnings.append(f"{rec.site}: node counting failed: {exc}")

    def ending(self, cuda_graph: Any) -> None:
        """The program's ``capture_end`` is about to run: a counted window notes nothing more
        (a failed ``capture_end`` destroys the graph), and the graph is read while it exists
        (torch destroys the template in ``capture_end`` unless the program keeps it)."""
        rec = self.current
        self._read = None
        if rec is None or self.by_id.get(id(cuda_graph)) is not rec:
            return
        t = time.perf_counter()
        stream = self._stream
        try:
            # one listing of the graph's nodes: a counted window's notes stop (a failed
            # capture_end destroys the graph) and are resolved from it, and the graph is read
            ins = native.read_capture(stream, rec.counted) if stream is not None else None
            if stream is None or ins is None:
                raise GraphscopeError("its stream was not capturing when capture_end ran")
            t = self._spent("inspect", t)
            first = self.sites.get(rec.site, 0) == 0
            dot = (read_dot(native.capture_graph(stream))
                   if self.cfg.dot and first and not rec.user_keep else "")
            self._spent("dot", t)
            self._read = (ins, dot, self.cfg.dot and rec.user_keep)
        except GraphscopeError as exc:  # the capture goes on; this graph is reported unread
            rec.failed = rec.failed or f"could not inspect the graph: {exc}"
            self._spent("inspect", t)
        finally:
            if rec.counted and stream is None:  # never attached: no notes to resolve
                try:  # (no contextlib.suppress in a ladder's every capture: 3 Python calls)
                    nodecount.detach()
                except Exception:  # noqa: BLE001 - a missed note is caught by the checks
                    pass

    def _hold_batch(self) -> None:
        """The window's hooks, installed for the batch, not per window (each is inert outside
        an annotated capture): ``nn.Module.__call__`` replaced (names.module_hooks), the
        optimizer hooks and, once the program has imported FSDP2, its collectives' scopes.
        Setting a class attribute of ``nn.Module`` invalidates the type cache of every module
        class; per window, installing and removing these cost ~0.35 ms per capture (CPU), as
        much as a small decode graph's capture takes in Python."""
        main = threading.get_ident()
        if self._batch_hooks and self._batch_main == main:
            return
        self._release_hooks()  # a capture on another thread: its scopes are opened there
        self._batch_main = main
        self._batch_hooks = module_hooks(self.module_names, self.cfg.depth, self._first_call,
                                         self._outer_return, self.meter.marks)
        self._batch_hooks += optimizer_hooks()
        if fsdp_loaded():  # FSDP2's all-gathers and reduce-scatters in (fsdp) scopes
            self._batch_hooks.append(FSDPWatch().arm())
        self._batch_hooks.append(backward_counter())  # a counted window's backward calls

    @property
    def holding(self) -> bool:
        """Whether a batch is open: captures waiting to be read, or what the batch holds."""
        return bool(self.pending or self._batch_hooks or self.recorder.held)

    def _release_hooks(self) -> None:
        hooks, self._batch_hooks = self._batch_hooks, []
        for h in reversed(hooks):
            h.remove()
        if hooks:  # entries for modules the program dropped since
            prune = native.extension().module_scope_cache_prune
            for cache in self.module_names.scope_cache.values():
                prune(cache)

    def _release_batch(self) -> None:
        """What a batch of captures holds, let go: CUPTI's subscription and the hooks."""
        try:
            self._release_hooks()
        finally:
            self.recorder.release()

    def _first_call(self, module: Any, args: Any) -> None:
        """The first outermost module of the window: its inputs name an eager graph."""
        cur = self.current
        if cur is not None and not cur.shapes:
            cur.shapes = describe_shapes(args)
            cur.static_input_bytes = tensor_bytes(args)

    def _outer_return(self, module: Any, output: Any) -> None:
        """An outermost module returned: its tensors are the graph's static outputs."""
        cur = self.current
        if cur is not None:
            cur.outputs.append(output)

    def _close_window(self) -> Optional[Any]:
        window, self._window = self._window, None
        self.current = None
        if window is None:
            return None
        window.__exit__(None, None, None)  # removes hooks, exits modes, releases CUPTI
        try:
            # graphscope's own seconds inside the module calls it scoped in the window (the
            # node-count notes' driver queries among them: "count_queries")
            calls, own_s = native.extension().module_call_stats(True)
            if calls:
                self.overhead["module_calls"] = self.overhead.get("module_calls", 0.0) + own_s
        except NativeUnavailableError:
            pass
        records = self._records[0] if self._records else None
        if isinstance(records, nodecount.CountedNodes) and records.queries:
            self.overhead["count_queries"] = (self.overhead.get("count_queries", 0.0)
                                              + records.query_s)
        return records

    def abort(self, cuda_graph: Any, why: str) -> None:
        rec = self.by_id.get(id(cuda_graph))
        if rec is not None and rec is self.current:
            self._read = None  # what ending read of the failed capture's graph
            rec.failed = why
            rec.outputs = []  # a failed capture's tensors are not kept alive by graphscope
            self.meter.cancel()
            try:
                self._close_window()
            finally:
                self._release_batch()  # a failed capture leaves CUPTI and torch as found

    def end(self, cuda_graph: Any, capture_end_s: float = 0.0) -> None:
        """The program's ``capture_end`` returned after ``capture_end_s`` (for a graph the
        program does not keep, torch instantiated inside it: that time is its instantiate's)."""
        rec = self.by_id.get(id(cuda_graph))
        if rec is None or rec is not self.current:
            return
        read, self._read = self._read, None
        if not rec.user_keep:  # its exec id is read with the batch (_read_live)
            rec.instantiate_s += capture_end_s
            rec.exec_later = True
        t = time.perf_counter()
        # the history is read with the batch, and the graph's pool then (_read_live)
        rec.cost, rec.window = self.meter.stop(cuda_graph, read_pool=False)
        if rec.outputs:
            rec.static_output_bytes = tensor_bytes(rec.outputs)
            rec.outputs = []
        t = self._spent("meter", t)
        backward_calls = getattr(native.active_session(), "backward_calls", 0)
        records = self._close_window()
        t = self._spent("unsubscribe", t)
        if self.recorder.cut:  # a torch.profiler took CUPTI from inside this capture
            self.recorder.cut = False
            rec.failed = rec.failed or ("a profiler started inside the capture and took CUPTI's "
                                        "subscription: the nodes made after it are unrecorded")
            self.warnings.append(f"{rec.site}: {rec.failed}")
            return
        if records is None:
            rec.failed = rec.failed or "no records"
            self.warnings.append(f"{rec.site}: {rec.failed}")
            return
        records = self.counting.learn(rec, records, backward_calls, self.warnings)
        if records is None:
            return
        ordinal = self.sites.get(rec.site, 0)
        self.sites[rec.site] = ordinal + 1
        rec.ordinal = ordinal
        label = rec.site + (" compiled" if rec.kind == "compiled" else "")
        rec.name = f"{label} #{ordinal}" + (f" {rec.shapes}" if rec.shapes else "")
        if read is None:
            rec.failed = rec.failed or "could not inspect the graph"
            self.warnings.append(f"{rec.site}: {rec.failed}")
            return
        ins, dot, later = read
        self.pending[id(cuda_graph)] = Pending(rec, weakref.ref(cuda_graph), records, ins, dot,
                                               later)
        self._last_end = time.perf_counter()

    # -- reading finished graphs (outside the program's capture loop: reading.py)
    def graph_going(self, cuda_graph: Any) -> None:
        """``cuda_graph`` is being reset or freed: its kept template's DOT is read now, if it
        is waiting."""
        p = self.pending.get(id(cuda_graph))
        if p is None:
            return
        read_live(p, cuda_graph, self.meter, self._spent, self.warnings)
        if self._window is None:  # not inside another capture: read the batch now
            self.flush()

    def flush(self) -> None:
        """Read every pending capture (reading.read_batch), with what the batch holds let go."""
        if self._window is not None:
            return
        self._release_batch()
        if not self.pending:
            return
        batch, self.pending = list(self.pending.values()), {}
        read_batch(batch, self.meter, self._demangled, self._spent, self.warnings)

    def instantiated(self, cuda_graph: Any, seconds: float = 0.0) -> None:
        """A graph the program keeps was instantiated (``instantiate``, or a replay): its time
        and exec id."""
        rec = self.by_id.get(id(cuda_graph))
        if rec is not None:
            rec.instantiate_s += seconds
        if rec is None or rec.failed:
            return
        rec.exec_later = False
        note_exec_id(rec, cuda_graph)

    # -- results
    def result(self) -> RawCapture:
        """Everything observed so far, as a raw capture with its traced replays joined."""
        self.flush()
        return raw_capture(self)
