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

import contextlib
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Optional

from ... import annotate as ann
from ... import native
from ..._errors import GraphscopeError, NativeUnavailableError
from ...annotate.fsdp import FSDPWatch, fsdp_loaded
from ...annotate.session import backward_counter, counted_window, resolve_accumulation
from ...annotate.tables import TABLES
from ...annotate.training import optimizer_hooks
from ...model.bundle_files import TREES_FILE
from ...native import nodecount
from ..meter import CaptureMeter, tensor_bytes
from ..source import RawCapture, RawGraph, read_dot, unplaced_reason
from .graphs import Pending, ProgramGraph
from .names import ModuleNames, capture_site, compiled_inputs, describe_shapes, module_hooks
from .patch import patch_compile, patch_cuda_graph
from .provenance import Provenance
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
        # site -> its CUPTI captures so far made every node on the capturing thread: the next
        # ones may be counted (False: a site that must stay on CUPTI)
        self.countable: dict[str, bool] = {}
        # site -> whether its counted captures may count by the stream's dependencies (True:
        # a capture that walked the graph at every note found the two counts equal at each;
        # False: they differed, walk; absent: the next counted capture compares them)
        self.deps_ok: dict[str, bool] = {}
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
        # the environment's node-count settings, read as a batch opens, not per capture
        self._count_mode = nodecount.mode()
        self._deps_allowed = nodecount.deps_allowed()

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
        t = time.perf_counter()
        if self.pending and (id(cuda_graph) in self.pending
                             or t - self._last_end > FLUSH_AFTER_S):
            self.flush()  # a graph captured again, or the program paused: read the batch
            t = time.perf_counter()
        if not self._batch_hooks:  # a batch opens
            self._count_mode = nodecount.mode()
            self._deps_allowed = nodecount.deps_allowed()
        site, kind = capture_site(self._torch_dir)
        rec = ProgramGraph(site=site, kind=kind, user_keep=user_keep)
        self.graphs.append(rec)
        self.by_id[id(cuda_graph)] = rec
        if self._window is not None or native.active_session() is not None:
            rec.failed = "captured while another annotated capture was running: not recorded"
            self.warnings.append(f"{site}: {rec.failed}")
            return
        if kind == "compiled":
            rec.shapes = compiled_inputs()
        # a ladder's later buckets: scopes only (0: every one). Not compiled captures: inductor's
        # kernels are no aten ops the observer sees, their nodes are placed by its metadata
        limit = self.cfg.op_captures if kind != "compiled" else 0
        within = not limit or self.sites.get(site, 0) < limit
        record_ops = self.cfg.record_ops and within
        rec.ops_recorded = within or not self.cfg.record_ops  # False: skipped by the limit
        rec.counted = self._counts(site, kind, record_ops)
        if rec.counted and self._deps_allowed:
            ok = self.deps_ok.get(site)
            rec.count_how = (nodecount.VERIFY if ok is None else
                             nodecount.DEPS if ok else nodecount.WALK)
        self.module_names.new_window()
        t = self._spent("site", t)
        entered: Any = None  # the window, once its __enter__ returned
        try:
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
            self._records = window.__enter__()
            entered = window
            t = self._spent("subscribe", t)
        except GraphscopeError as exc:  # e.g. torch.profiler holds CUPTI: the program goes on
            if entered is not None:  # (a failed __enter__ undid itself)
                entered.__exit__(None, None, None)
            rec.failed = str(exc)
            self.warnings.append(f"{site}: not recorded: {exc}")
            return
        except BaseException:
            if entered is not None:
                entered.__exit__(None, None, None)
            self._release_batch()
            raise
        self._window = entered
        self.current = rec
        self.meter.begin()
        self._spent("meter", t)

    def _counts(self, site: str, kind: str, record_ops: bool) -> bool:
        """Whether this capture records by node counts, with no CUPTI subscription in it
        (graphscope.native.nodecount): any capture begun with grad off (no backward to run on
        autograd's thread; one that runs anyway is caught), ops included, unless
        ``GRAPHSCOPE_NODE_COUNTS=learned``; and past a site's op captures once its CUPTI
        captures made every node on the capturing thread."""
        mode = self._count_mode
        known = self.countable.get(site)
        if kind != "eager" or mode == "off" or known is False:
            return False
        if not record_ops and known:
            return True
        if mode == "all":
            import torch

            return not torch.is_grad_enabled()
        return False

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
        records = self._counted_ok(rec, records, backward_calls)
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

    def _counted_ok(self, rec: ProgramGraph, records: Any, backward_calls: int) -> Any:
        """Learn whether the site's next captures may be counted: every CUPTI window so far made
        all its nodes on the capturing thread (this one: ``end`` runs where the capture does).
        Returns the window's records to keep, or None when a counted window is unrecorded; a
        counted window where other threads made nodes keeps them unscoped."""
        if not isinstance(records, nodecount.CountedNodes):
            own = set(records.thread.tolist()) <= {threading.get_native_id()}
            self.countable[rec.site] = self.countable.get(rec.site, True) and own
            return records
        why = records.problem()
        if why:
            self.countable[rec.site] = False
            rec.failed = rec.failed or f"not recorded: {why}"
            self.warnings.append(f"{rec.site}: {rec.failed}")
            return None
        if records.how == nodecount.VERIFY:
            self.deps_ok[rec.site] = records.mismatches == 0
        others = []
        if backward_calls:
            others.append(f"{backward_calls} backward call(s) (autograd's thread makes nodes)")
        if records.foreign:
            others.append(f"{records.foreign} scope change(s) on other threads")
        missed = records.how == nodecount.DEPS and records.mismatches
        if missed:
            # another stream's newest work was unjoined where the stream's dependencies were
            # read: nodes may carry a later scope than theirs, so none is given one
            self.deps_ok[rec.site] = False
        if not others and not missed:
            return records
        if others:
            self.countable[rec.site] = False
            later = "are recorded by CUPTI"
        else:
            later = "walk the graph"
        rec.scopes_unknown = "; ".join(others + (
            ["the capture stream's dependencies missed nodes made on another stream"]
            if missed else []))
        self.warnings.append(
            f"{rec.site}: a capture recorded by node counts saw {rec.scopes_unknown}: its "
            f"nodes are left without module scopes (the site's later captures {later})")
        return records.unplaced()

    # -- reading finished graphs (outside the program's capture loop)
    def _read_live(self, p: Pending, cuda_graph: Any) -> None:
        """What a finished capture's ``CUDAGraph`` gives while it exists (the exec id of
        torch's instantiate in ``capture_end``, its pool, a kept template's DOT), read with the
        batch or as the graph goes, not in the program's loop (~25 us a capture on the H200)."""
        rec = p.rec
        if rec.exec_later:
            rec.exec_later = False
            self._exec_id(rec, cuda_graph)
        if rec.window is not None and rec.window.pool is None and not rec.window.pool_read:
            rec.window.pool_read = True
            self.meter.set_pool(rec.cost, rec.window, cuda_graph)
        self._read_dot(p, cuda_graph)

    def _read_dot(self, p: Pending, cuda_graph: Any) -> None:
        """A kept template's DOT, while it exists."""
        if not p.dot_later:
            return
        p.dot_later = False
        t = time.perf_counter()
        try:
            p.dot = read_dot(cuda_graph.raw_cuda_graph())
        except Exception as exc:  # noqa: BLE001 - the DOT is optional; the graph is read
            self.warnings.append(f"{p.rec.site}: the driver's DOT could not be read: {exc}")
        self._spent("dot", t, later=True)

    def graph_going(self, cuda_graph: Any) -> None:
        """``cuda_graph`` is being reset or freed: its kept template's DOT is read now, if it
        is waiting."""
        p = self.pending.get(id(cuda_graph))
        if p is None:
            return
        self._read_live(p, cuda_graph)
        if self._window is None:  # not inside another capture: read the batch now
            self.flush()

    def flush(self) -> None:
        """Read every pending capture: one allocator snapshot for the batch, each graph's names
        demangled, a kept template's DOT, the annotations published (and rekeyed where
        instantiated)."""
        if self._window is not None:
            return
        self._release_batch()
        if not self.pending:
            return
        batch, self.pending = list(self.pending.values()), {}
        graphs = [p.graph() for p in batch]
        t = time.perf_counter()
        for p, g in zip(batch, graphs):
            if g is not None:
                self._read_live(p, g)
        t = self._spent("live", t, later=True)
        self.meter.read([(p.rec.cost, p.rec.window) for p in batch if p.rec.window is not None])
        t = self._spent("meter", t, later=True)
        for p, g in zip(batch, graphs):
            rec = p.rec
            rec.window = None
            t = time.perf_counter()
            p.inspection = native.demangled(native.as_inspection(p.inspection), self._demangled)
            self._spent("inspect", t, later=True)
            records = p.records
            if isinstance(records, nodecount.CountedNodes):  # its nodes are the template's
                records = resolve_accumulation(nodecount.as_created(records, p.inspection),
                                               TABLES.scopes)
            rec.raw = RawGraph(rec.name, p.inspection, records, rec.exec_id, p.dot)
            pool = rec.cost.get("pool_id")
            rec.pool = tuple(pool) if pool is not None else None
            rec.pool_bytes = rec.cost.get("pool_bytes")
            t = time.perf_counter()
            ann.publish(records, g)
            if g is not None and rec.exec_ids and not len(records.exec_id):
                with contextlib.suppress(Exception):  # instantiated after its window
                    ann.remap_to_exec_graph(g)
            self._spent("publish", t, later=True)

    def instantiated(self, cuda_graph: Any, seconds: float = 0.0) -> None:
        """A graph the program keeps was instantiated (``instantiate``, or a replay): its time
        and exec id."""
        rec = self.by_id.get(id(cuda_graph))
        if rec is not None:
            rec.instantiate_s += seconds
        if rec is None or rec.failed:
            return
        rec.exec_later = False
        self._exec_id(rec, cuda_graph)

    def _exec_id(self, rec: ProgramGraph, cuda_graph: Any) -> None:  # (rec not failed)
        try:
            eid = native.exec_id(cuda_graph.raw_cuda_graph_exec())
            if not rec.exec_ids or rec.exec_ids[-1] != eid:
                rec.exec_ids.append(eid)
            if rec.raw is not None:
                rec.raw.exec_id = eid
                ann.remap_to_exec_graph(cuda_graph)
        except Exception:  # noqa: BLE001 - the exec id is optional; the program goes on
            pass

    # -- results
    def result(self) -> RawCapture:
        """Everything observed so far, as a raw capture with its traced replays joined."""
        self.flush()
        done = [g for g in self.graphs if g.raw is not None and not g.failed
                and len(g.raw.inspection.node_id)]
        raws = []
        for g in done:
            raw = g.raw
            assert raw is not None
            raw.exec_id = g.exec_id
            raw.info = g.info()
            if g.kind == "compiled":
                raw.place = lambda n, site=g.site: self.provenance.place(n.source, site=site)
            else:
                raw.place = unplaced_reason
            raws.append(raw)
        meta: dict[str, Any] = {
            "observed_captures": len(self.graphs),
            "empty_captures": sum(1 for g in self.graphs if g.raw is not None
                                  and not len(g.raw.inspection.node_id)),
            "failed_captures": [{"site": g.site, "why": g.failed} for g in self.graphs
                                if g.failed],
        }
        if self.overhead:
            meta["capture_overhead_s"] = {k: round(v, 6) for k, v in self.overhead.items()}
        if self.steps_s:
            meta["capture_steps_s"] = round(self.steps_s, 6)
        if self.read_overhead:
            meta["read_overhead_s"] = {k: round(v, 6) for k, v in self.read_overhead.items()}
        if self.install_s:
            meta["install_warm_s"] = round(self.install_s, 6)
        if self.install_note:
            meta["install_warm_failed"] = self.install_note
        if self.warnings:
            meta["warnings"] = list(self.warnings)
        join = self.traced.join(done)  # closes the open window: its facts are complete
        windows = self.traced.facts()
        if windows:
            meta["tracing_windows"] = windows
        raw_capture = RawCapture(raws, join=join, meta=meta)
        trees = self.trees.doc()
        if trees is not None:
            raw_capture.extra_files[TREES_FILE] = lambda: trees
        return raw_capture

