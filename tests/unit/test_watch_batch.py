"""graphscope run's capture loop pays only for what cannot wait: each graph's nodes are read
just before capture_end (the program's own keep_graph stands: torch may destroy the template in
capture_end), and a finished capture waits in GraphWatch.pending (no demangling, kept template's
DOT, allocator snapshot or publishing inside the loop) until the program replays, resets or
frees a graph, pauses, or the watch ends. CUDA is faked here (recorder, inspection, DOT,
allocator); the watch, the patches and the meter are real."""

import contextlib
import gc
import threading
import types

import numpy as np
import pytest
import torch

from graphscope import native
from graphscope.annotate.session import CountedSession
from graphscope.capture.config import CaptureConfig
from graphscope.capture.run import reading as R
from graphscope.capture.run import watch as W
from graphscope.capture.run.patch import patch_cuda_graph
from graphscope.native import nodecount

U8 = np.uint64


def _nodes(n, threads=None):
    z = np.zeros(0, dtype=U8)
    return native.CreatedNodes(
        node_id=np.arange(n, dtype=U8), graph_id=np.zeros(n, np.uint32),
        node_type=np.zeros(n, np.int32), scope=np.full(n, -1, np.int64),
        op=np.full(n, -1, np.int64),
        # made on the capturing thread unless said otherwise
        thread=np.full(n, threading.get_native_id(), U8) if threads is None
        else np.asarray(threads, U8),
        clone_id=z, clone_origin=z,
        exec_id=np.zeros(0, np.uint32), exec_graph=np.zeros(0, np.uint32), callback_errors=0)


def _graph_read(n, names=("k",)):
    """What native.read_graph answers for an n-node graph: the extension's columns as bytes."""
    def col(dtype, width=1):
        return np.zeros(n * width, dtype=dtype).tobytes()

    return {"graph_id": 1, "node_id": np.arange(n, dtype=U8).tobytes(), "node_type": col("<i4"),
            "grid": col("<i4", 3), "block": col("<i4", 3), "smem": col("<u4"),
            "bytes": col("<u8"), "name_idx": col("<i4"), "names": list(names),
            "demangled": list(names), "edge_from": b"", "edge_to": b""}


class FakeGraph:
    """torch.cuda.CUDAGraph's surface that the patches use: capture_end instantiates and
    destroys the template unless keep_graph=True, as torch's does."""

    alive = 0
    capturing = None  # the graph whose capture is running (native.capture_graph's answer)

    def __init__(self, keep_graph=False):
        self.keep = keep_graph
        self.template = False
        self.exec = False
        FakeGraph.alive += 1

    fail_begin = False

    def capture_begin(self, *a, **k):
        if FakeGraph.fail_begin:
            raise RuntimeError("capture_begin failed")
        FakeGraph.capturing = self

    ends = []  # (what, counting) in order: the patched capture_end's parent call

    fail_end = False

    def capture_end(self):
        FakeGraph.ends.append(("capture_end", native.extension().counting()))
        FakeGraph.capturing = None
        if FakeGraph.fail_end:  # the driver destroys the graph of a failed capture
            raise RuntimeError("operation not permitted when stream is capturing")
        self.template = self.keep
        self.exec = not self.keep

    def instantiate(self):
        self.exec = True

    def replay(self):
        pass

    def reset(self):
        self.template = False

    def raw_cuda_graph(self):
        if not self.template:
            raise AssertionError("template read after reset")
        return 1234

    def raw_cuda_graph_exec(self):
        assert self.exec, "exec graph read before instantiate"
        return 5678

    def pool(self):
        return (0, 9)


@pytest.fixture()
def watch(monkeypatch):
    events, counted_windows, threads, count_hows = [], [], [], []
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(W.native, "read_graph",
                        lambda ptr: events.append("inspect") or _graph_read(3))
    monkeypatch.setattr(W.native, "capture_graph",
                        lambda stream: 4321 if FakeGraph.capturing is not None else 0)
    monkeypatch.setattr(FakeGraph, "capturing", None)

    def read_capture(stream, detach_count):  # the extension's one call: detach, then read
        if detach_count:
            W.nodecount.detach()
        ptr = W.native.capture_graph(stream)
        return W.native.read_graph(ptr) if ptr else None

    monkeypatch.setattr(W.native, "read_capture", read_capture)
    def read_dot(ptr):
        events.append("dot")
        return "digraph {}"

    monkeypatch.setattr(W, "read_dot", read_dot)  # a site's first capture's, in the loop
    monkeypatch.setattr(R, "read_dot", read_dot)  # a kept template's, with the batch
    monkeypatch.setattr(W.native, "exec_id", lambda ptr: 7)
    monkeypatch.setattr(W.ann, "publish", lambda recs, g: events.append("publish") or [])

    @contextlib.contextmanager
    def session(record_ops, held=None, counted=False, count_how=0, leaf_scope=None):
        events.append(("ops" if record_ops else "no ops", held is not None))
        if counted:  # the real node counting, its count faked (count_fake_nodes)
            counted_windows.append(len(counted_windows))
            count_hows.append(count_how)
            # an annotated capture for the module scopes (the real session's attribution)
            session = CountedSession()
            session.leaf_scope = leaf_scope
            native.open_session(session)
            try:
                with nodecount.counting(fake=True, how=count_how) as out:
                    yield out
            finally:
                native.close_session()
            return
        out = []
        yield out
        out.append(_nodes(3, threads.pop(0) if threads else None))

    monkeypatch.setattr(W.ann, "session", session)
    # a counted window with no ops (the light one): the same fake, counted
    monkeypatch.setattr(W, "counted_window",
                        lambda count_how: session(False, True, True, count_how))
    monkeypatch.setattr(torch.cuda.memory, "_snapshot",
                        lambda *a, **k: events.append("snapshot") or {"segments": []})
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda *a, **k: None)
    monkeypatch.setattr(W, "optimizer_hooks", lambda: [])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("S", (), {"cuda_stream": 0}))
    w = W.GraphWatch(CaptureConfig(mode="run", replays=0, op_captures=2))
    undo = patch_cuda_graph(w)
    w.events, w.counted_windows, w.threads = events, counted_windows, threads
    w.count_hows = count_hows
    yield w
    w._release_batch()  # a test that leaves its batch open must not leave nn.Module patched
    undo()


def _capture(n=1, keep_graph=False):
    gs = []
    for _ in range(n):
        g = torch.cuda.CUDAGraph(keep_graph=keep_graph)
        g.capture_begin()
        torch.nn.Linear(2, 2)(torch.ones(1, 2))  # modules run in the window
        g.capture_end()
        gs.append(g)
    return gs


def _read(events):
    return [e for e in events if isinstance(e, str)]


def test_a_capture_loop_reads_each_graph_before_capture_end_and_the_rest_at_the_first_replay(
        watch):
    gs = _capture(4)
    # inside the loop: each graph's nodes read before its capture_end (its template is gone
    # after it), the driver's DOT for the site's first capture only; nothing else read
    assert len(watch.pending) == 4
    assert _read(watch.events) == ["inspect", "dot"] + ["inspect"] * 3
    assert {e[1] for e in watch.events if isinstance(e, tuple)} == {True}
    assert all(g.raw is None for g in watch.graphs)
    assert {"inspect", "meter"} <= set(watch.overhead)
    # AND the program's keep_graph=False stood: torch instantiated in capture_end, no template
    assert all(not g.keep and not g.template and g.exec for g in gs)
    # its time is the graph's instantiate_s; its exec id and pool are read with the batch
    assert [r.exec_id for r in watch.graphs] == [-1] * 4
    assert all(r.instantiate_s > 0 for r in watch.graphs)
    assert all(r.window.pool is None and "pool_id" not in r.cost for r in watch.graphs)
    gs[0].replay()
    assert [r.exec_id for r in watch.graphs] == [7] * 4
    assert [r.pool for r in watch.graphs] == [(0, 9)] * 4
    # the first replay reads the batch: one allocator snapshot, each graph published once
    assert watch.events.count("snapshot") == 1
    assert watch.events.count("inspect") == watch.events.count("publish") == 4
    assert watch.events.count("dot") == 1 and not watch.warnings
    assert not watch.pending and all(g.raw is not None for g in watch.graphs)
    assert set(watch.read_overhead) >= {"meter", "inspect", "publish"}
    assert [g.name.split(" ")[1] for g in watch.graphs] == ["#0", "#1", "#2", "#3"]
    assert [bool(g.raw.dot) for g in watch.graphs] == [True, False, False, False]
    # --op-captures 2: ops in the site's first two captures, scopes only in the others
    assert [e[0] for e in watch.events if isinstance(e, tuple)] == ["ops"] * 2 + ["no ops"] * 2
    assert [g.info().get("ops_recorded", True) for g in watch.graphs] == [True] * 2 + [False] * 2
    gs[1].replay()
    assert watch.events.count("snapshot") == 1  # read once
    raw = watch.result()
    assert len(raw.graphs) == 4 and raw.meta["read_overhead_s"]
    assert [g.info.get("ops_recorded", True) for g in raw.graphs] == [True] * 2 + [False] * 2
    assert [g.info["keep_graph"] for g in raw.graphs] == [False] * 4


def test_kernel_names_are_demangled_when_the_batch_is_read(watch, monkeypatch):
    # GIVEN graphs whose nodes were read in the loop with their names as the driver gives them
    mangled = "_Z3addPfS_i"
    monkeypatch.setattr(W.native, "read_graph", lambda ptr: (
        watch.events.append("read") or _graph_read(3, [mangled])))
    gs = _capture(2)
    assert watch.events.count("read") == 2  # read raw (read_graph: never demangled) in the loop
    # WHEN the batch is read
    gs[0].replay()
    # THEN they carry the demangled name
    assert [g.raw.inspection.demangled for g in watch.graphs] == [["add(float*, float*, int)"]] * 2


def test_a_graph_the_program_keeps_has_its_dot_read_from_its_template_after_the_loop(watch):
    gs = _capture(3, keep_graph=True)
    # inside the loop: nodes read, no DOT (the template stays), no instantiate (the program
    # instantiates, or torch does at the first replay)
    assert _read(watch.events) == ["inspect"] * 3 and all(g.keep and g.template for g in gs)
    assert [r.exec_id for r in watch.graphs] == [-1] * 3
    gs[0].instantiate()
    assert watch.graphs[0].exec_id == 7
    gs[0].reset()  # the template goes: its DOT read first, with the rest of the batch
    assert watch.events.count("dot") == 3 and not watch.pending
    d, e = _capture(2, keep_graph=True)
    del d  # freed: its __del__ reads its DOT while the template exists
    gc.collect()
    assert watch.events.count("dot") == 5 and not watch.pending
    raw = watch.result()
    assert len(raw.graphs) == 5 and not raw.meta.get("failed_captures") and not watch.warnings
    assert all(g.dot for g in raw.graphs) and all(g.info["keep_graph"] for g in raw.graphs)


def test_a_kept_graph_freed_inside_another_capture_has_its_dot_read_and_the_batch_later(watch):
    (a,) = _capture(1, keep_graph=True)
    g = torch.cuda.CUDAGraph()
    g.capture_begin()
    del a
    gc.collect()
    # its DOT read in its __del__, but the batch is not read inside a capture window
    assert _read(watch.events) == ["inspect", "dot"] and len(watch.pending) == 1
    g.capture_end()
    assert len(watch.pending) == 2 and "snapshot" not in watch.events
    raw = watch.result()
    assert len(raw.graphs) == 2 and watch.events.count("snapshot") == 1


def test_a_graph_freed_inside_another_capture_has_its_exec_id_and_pool_read_as_it_goes(watch):
    # GIVEN a captured graph (torch instantiated it in capture_end) waiting to be read
    (a,) = _capture(1)
    g = torch.cuda.CUDAGraph()
    g.capture_begin()
    # WHEN the program frees it inside another capture (the batch is not read there)
    del a
    gc.collect()
    assert len(watch.pending) == 1
    g.capture_end()
    # THEN its exec id and pool were read from it while it existed
    raw = watch.result()
    assert len(raw.graphs) == 2
    assert [r.exec_id for r in watch.graphs] == [7, 7]
    assert [r.pool for r in watch.graphs] == [(0, 9)] * 2


def test_a_graph_that_cannot_be_read_before_capture_end_is_reported_and_the_program_goes_on(
        watch, monkeypatch):
    from graphscope._errors import GraphscopeError

    def refuse(ptr):
        raise GraphscopeError("cuGraphGetNodes failed: CUDA_ERROR_INVALID_VALUE")

    monkeypatch.setattr(W.native, "read_graph", refuse)
    (g,) = _capture(1)
    # THEN the capture is reported unread, its instantiate went on as torch's
    assert g.exec and not watch.pending
    assert "could not inspect the graph: cuGraphGetNodes failed" in watch.graphs[0].failed
    assert any("could not inspect" in w for w in watch.warnings)
    # AND the next capture is read as usual
    monkeypatch.undo()


def test_a_pause_between_captures_reads_the_batch(watch, monkeypatch):
    kept = _capture(2)
    assert "snapshot" not in watch.events
    monkeypatch.setattr(W, "FLUSH_AFTER_S", 0.0)
    kept += _capture(1)  # begins after a "long" pause: the first two are read first
    assert watch.events.count("snapshot") == 1 and len(watch.pending) == 1


def test_uninstall_reads_what_is_left(watch):
    kept = _capture(2)
    assert "publish" not in watch.events
    watch.uninstall()
    assert kept
    assert not watch.pending and watch.events.count("publish") == 2


def test_a_batch_installs_its_hooks_once_and_lets_go_when_read(watch, monkeypatch):
    # GIVEN graphscope run's module scopes and optimizer hooks, counted
    real_call = torch.nn.Module.__call__
    made = []
    real_hooks = W.module_hooks
    monkeypatch.setattr(W, "module_hooks", lambda *a, **k: made.append(1) or real_hooks(*a, **k))
    # WHEN a program captures three graphs in a loop
    gs = _capture(3)
    # THEN nn.Module.__call__ was replaced once for the batch (per window, the class attribute
    # set and reset invalidated every module class's type cache twice per capture)
    assert len(made) == 1 and torch.nn.Module.__call__ is not real_call
    # AND the first replay reads the batch and puts torch back as it was
    gs[0].replay()
    assert torch.nn.Module.__call__ is real_call
    # AND a capture that fails lets go of what the new batch held
    g = torch.cuda.CUDAGraph()
    g.capture_begin()
    assert torch.nn.Module.__call__ is not real_call and len(made) == 2
    watch.abort(g, "boom")
    assert torch.nn.Module.__call__ is real_call


def test_no_ops_records_none_and_flags_none(watch, monkeypatch):
    # GIVEN graphscope run --no-ops (no ops anywhere: not a limit that skipped some)
    watch.cfg.record_ops = False
    _capture(4)
    # THEN no window records ops, and no graph is marked as skipped by --op-captures
    assert {e[0] for e in watch.events if isinstance(e, tuple)} == {"no ops"}
    assert all("ops_recorded" not in g.info() for g in watch.graphs)


def test_a_profiler_taking_cupti_inside_a_capture_fails_that_capture(watch, monkeypatch):
    # GIVEN a capture inside which torch.profiler started (its window notes the cut)
    g = torch.cuda.CUDAGraph()
    g.capture_begin()
    monkeypatch.setattr(watch.recorder, "cut", True)
    g.capture_end()
    # THEN the capture says its later nodes went unrecorded, instead of looking complete
    rec = watch.graphs[-1]
    assert rec.failed and "profiler started inside the capture" in rec.failed
    assert not watch.recorder.cut and id(g) not in watch.pending


def test_compiled_captures_are_not_limited_by_op_captures(watch, monkeypatch):
    # GIVEN a site of torch.compile's cudagraph trees (inductor's kernels: no aten ops for the
    # observer; their nodes are placed by inductor's metadata)
    monkeypatch.setattr(W, "capture_site", lambda torch_dir: ("model.py:9 (forward)", "compiled"))
    monkeypatch.setattr(W, "compiled_inputs", lambda: "")
    _capture(4)
    # THEN --op-captures 2 changes nothing there: every window as before, none marked skipped
    assert [e[0] for e in watch.events if isinstance(e, tuple)] == ["ops"] * 4
    assert all("ops_recorded" not in g.info() for g in watch.graphs)


class MakesNodes(torch.nn.Module):
    """A module inside which the (faked) capture graph reaches ``n`` nodes."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        native.extension().count_fake_nodes(self.n)
        return x


def _ladder(n, during=None):
    m, gs = MakesNodes(2), []
    for i in range(n):
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        m(torch.ones(1))  # nodes 0 and 1 made inside m
        native.extension().count_fake_nodes(3)  # node 2 outside any module
        if during is not None:
            during(i)
        g.capture_end()
        gs.append(g)
    return gs


@pytest.fixture()
def published(watch, monkeypatch):
    out = []
    monkeypatch.setattr(W.ann, "publish", lambda recs, g: out.append(recs) or [])
    return out


def test_captures_past_a_sites_op_captures_are_counted_not_subscribed(watch, published):
    # GIVEN a ladder of 4 captures at one site, ops in the first 2 (--op-captures 2)
    gs = _ladder(4)
    # THEN the first 2 windows are CUPTI's, the later 2 count nodes instead (no subscription)
    assert watch.counted_windows == [0, 1]
    assert [g.counted for g in watch.graphs] == [False, False, True, True]
    assert [g.info().get("scopes_from") for g in watch.graphs] == [None, None] + [
        "node_counts"] * 2
    # AND once read, a counted graph's nodes carry the scope open when each was made: the
    # first two inside the module, the third outside any
    gs[0].replay()
    counted = published[2:]
    assert len(counted) == 2
    for rec in counted:
        assert rec.scope[0] >= 0 and rec.scope[0] == rec.scope[1] and rec.scope[2] == -1
        assert (rec.op == -1).all() and not len(rec.exec_id)
    assert counted[0].scope.tolist() == counted[1].scope.tolist()
    assert not watch.warnings


def test_a_site_with_nodes_from_two_threads_stays_on_cupti(watch, published):
    # GIVEN a site whose first capture made nodes on two threads (a backward: autograd's
    # device thread), which node counts on the capturing thread cannot place
    watch.threads.append([1, 2, 1])
    _ladder(4)
    # THEN none of its captures is counted
    assert watch.counted_windows == [] and not any(g.counted for g in watch.graphs)


def test_a_site_whose_nodes_came_from_one_other_thread_stays_on_cupti(watch, published):
    # GIVEN a site whose captures so far made every node on one thread, not the capturing one
    # (make_graphed_callables' backward graphs: autograd's device thread makes their nodes)
    other = threading.get_native_id() + 1
    watch.threads.extend([[other] * 3, [other] * 3])
    _ladder(4)
    # THEN its later captures are not counted on the capturing thread
    assert watch.counted_windows == [] and not any(g.counted for g in watch.graphs)


def test_a_scope_change_on_another_thread_during_a_counted_capture_is_reported(watch,
                                                                             published):
    def other_thread(i):
        if i == 2:  # the first counted capture
            t = threading.Thread(target=lambda: (native.push_scope(5), native.pop_scope()))
            t.start()
            t.join()

    _ladder(4, during=other_thread)
    # THEN that capture says what it cannot know and leaves its nodes unscoped (another
    # thread may have made some), and the site's later captures use CUPTI
    assert [g.counted for g in watch.graphs] == [False, False, True, False]
    assert any("scope change(s) on other threads" in w for w in watch.warnings)
    assert "2 scope change(s) on other threads" in watch.graphs[2].info()["scopes_unknown"]
    assert watch.countable == {watch.graphs[0].site: False}
    watch.flush()
    assert published[2].scope.tolist() == [-1, -1, -1]


def test_a_backward_in_a_counted_capture_leaves_its_nodes_unscoped(watch, published):
    def backward(i):  # the session counts backward calls (its _engine_run_backward wrapper)
        if i == 2:
            native.active_session().backward_calls = 1

    _ladder(4, during=backward)
    assert [g.counted for g in watch.graphs] == [False, False, True, False]
    assert watch.graphs[2].scopes_unknown.startswith("1 backward call(s)")
    watch.flush()
    assert published[2].scope.tolist() == [-1, -1, -1]


def test_a_counted_capture_stops_noting_before_capture_end_runs(watch, monkeypatch):
    # GIVEN a counted capture (a failed capture_end destroys the graph being counted)
    _ladder(2)
    real_detach = W.nodecount.detach
    monkeypatch.setattr(W.nodecount, "detach", lambda: FakeGraph.ends.append(
        ("detach", native.extension().counting())) or real_detach())
    monkeypatch.setattr(FakeGraph, "ends", [])
    _ladder(1)
    # THEN it was detached, counting still on, before torch's capture_end ran
    assert FakeGraph.ends == [("detach", True), ("capture_end", True)]
    assert watch.graphs[-1].counted


def test_node_counts_can_be_turned_off(watch, monkeypatch):
    monkeypatch.setenv("GRAPHSCOPE_NODE_COUNTS", "0")
    _ladder(4)
    assert watch.counted_windows == [] and not any(g.counted for g in watch.graphs)


def test_a_capture_that_cannot_be_counted_is_unrecorded_and_the_program_goes_on(
        watch, monkeypatch):
    from graphscope._errors import GraphscopeError

    def refuse(stream):
        raise GraphscopeError("cuStreamGetCaptureInfo failed")

    monkeypatch.setattr(W.nodecount, "attach", refuse)
    gs = _ladder(4)
    # THEN the uncounted capture is reported unrecorded; the site's next capture uses CUPTI
    assert len(gs) == 4
    assert [bool(g.failed) for g in watch.graphs] == [False, False, True, False]
    assert "not found for node counting" in watch.graphs[2].failed
    assert any("node counting failed" in w for w in watch.warnings)
    assert not native.extension().counting()


def test_a_counted_capture_that_fails_leaves_counting_off(watch, monkeypatch):
    # GIVEN a site past its op captures (the next window is counted)
    _ladder(2)
    # WHEN the program's next capture fails to begin
    monkeypatch.setattr(FakeGraph, "fail_begin", True)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError):
        g.capture_begin()
    # THEN the capture is failed, counting is off
    assert watch.graphs[-1].failed and not native.extension().counting()
    # AND the next capture is counted as before
    monkeypatch.setattr(FakeGraph, "fail_begin", False)
    _ladder(1)
    assert watch.graphs[-1].counted and not watch.graphs[-1].failed


def test_node_counts_count_every_capture_begun_with_grad_off(watch, monkeypatch):
    # GIVEN the default node counts (GRAPHSCOPE_NODE_COUNTS unset)
    monkeypatch.delenv("GRAPHSCOPE_NODE_COUNTS", raising=False)
    # WHEN a ladder is captured with grad off (inference: no backward can run on autograd's
    # thread; one that ran anyway would leave that capture unscoped)
    with torch.no_grad():
        _ladder(4)
    # THEN every capture is counted, the first 2 with their ops, none subscribes CUPTI
    assert watch.counted_windows == [0, 1, 2, 3]
    assert [g.ops_recorded for g in watch.graphs] == [True, True, False, False]
    # AND with grad on, the site's first captures still go to CUPTI
    watch.flush()
    watch.countable.clear()
    watch.sites.clear()
    _ladder(4)
    assert [g.counted for g in watch.graphs[4:]] == [False, False, True, True]


def test_learned_node_counts_keep_a_grad_off_sites_first_captures_on_cupti(watch, monkeypatch):
    # GIVEN GRAPHSCOPE_NODE_COUNTS=learned
    monkeypatch.setenv("GRAPHSCOPE_NODE_COUNTS", "learned")
    # WHEN a ladder is captured with grad off
    with torch.no_grad():
        _ladder(4)
    # THEN its op captures subscribe CUPTI and only the captures after them are counted
    assert [g.counted for g in watch.graphs] == [False, False, True, True]
    assert len(watch.counted_windows) == 2


def test_a_sites_first_counted_capture_verifies_the_cheap_count_and_the_rest_use_it(
        watch, monkeypatch, published):
    # GIVEN a grad-off ladder, every capture counted
    monkeypatch.delenv("GRAPHSCOPE_NODE_COUNTS", raising=False)
    monkeypatch.delenv("GRAPHSCOPE_COUNT_DEPS", raising=False)
    with torch.no_grad():
        _ladder(4)
    # THEN the first walks the graph at every note and compares the stream's dependencies;
    # they agreed (one stream), so the others count by the dependencies alone
    assert watch.count_hows == [nodecount.VERIFY] + [nodecount.DEPS] * 3
    assert [g.info()["node_counts_by"] for g in watch.graphs] == [
        "walk_verified", "stream_deps", "stream_deps", "stream_deps"]
    watch.flush()
    assert all(r.scope.tolist() == published[0].scope.tolist() for r in published)
    assert published[0].scope[0] >= 0 and not watch.warnings


def test_a_site_whose_streams_dependencies_missed_nodes_keeps_walking(watch, monkeypatch,
                                                                    published):
    # GIVEN a site whose first counted capture had another stream's newest work unjoined at a
    # note (the stream's dependencies counted fewer nodes than the graph had)
    def side_stream(i):
        if i == 0:
            native.extension().count_fake_nodes(3, 2)
            native.push_scope(5)
            native.pop_scope()

    with torch.no_grad():
        _ladder(3, during=side_stream)
    # THEN its later captures walk the graph, and every capture keeps its scopes
    assert watch.count_hows == [nodecount.VERIFY, nodecount.WALK, nodecount.WALK]
    assert watch.deps_ok == {watch.graphs[0].site: False} and not watch.warnings


def test_a_capture_counted_by_dependencies_that_missed_nodes_is_left_unscoped(
        watch, monkeypatch, published):
    # GIVEN a site verified on one stream, whose third capture ends with another stream's
    # newest node unjoined (the end's walk finds more nodes than the dependencies say)
    def late_side_stream(i):
        if i == 2:
            native.extension().count_fake_nodes(3, 2)

    with torch.no_grad():
        _ladder(4, during=late_side_stream)
    assert watch.count_hows == [nodecount.VERIFY] + [nodecount.DEPS] * 2 + [nodecount.WALK]
    # THEN that capture says why its nodes are unscoped, and the next walks the graph
    assert "dependencies missed nodes made on another stream" in watch.graphs[2].scopes_unknown
    assert any("later captures walk the graph" in w for w in watch.warnings)
    watch.flush()
    assert published[2].scope.tolist() == [-1, -1, -1]
    assert published[3].scope.tolist() == published[0].scope.tolist()


def test_counting_by_dependencies_can_be_turned_off_for_a_run(watch, monkeypatch):
    monkeypatch.setenv("GRAPHSCOPE_COUNT_DEPS", "0")
    with torch.no_grad():
        _ladder(3)
    assert watch.count_hows == [nodecount.WALK] * 3
    assert {g.info()["node_counts_by"] for g in watch.graphs} == {"walk"}


def test_a_capture_end_that_fails_after_its_graph_was_read_keeps_nothing_of_it(watch,
                                                                              monkeypatch):
    # GIVEN a capture whose graph was read before capture_end, and capture_end then fails
    (ok,) = _capture(1)
    monkeypatch.setattr(FakeGraph, "fail_end", True)
    g = torch.cuda.CUDAGraph()
    g.capture_begin()
    with pytest.raises(RuntimeError, match="not permitted"):
        g.capture_end()
    # THEN the capture is failed with torch's reason, nothing of it waits to be read
    assert watch.graphs[-1].failed.startswith("capture failed: operation not permitted")
    assert id(g) not in watch.pending and watch._read is None
    # AND the next capture is read as usual
    monkeypatch.setattr(FakeGraph, "fail_end", False)
    (nxt,) = _capture(1)
    raw = watch.result()
    assert len(raw.graphs) == 2 and [bool(r.failed) for r in watch.graphs] == [False, True, False]


def test_a_dependency_count_miss_with_another_threads_scope_change_sends_the_site_to_cupti(
        watch, published):
    def both(i):
        if i == 2:  # a capture counted by the stream's dependencies
            native.extension().count_fake_nodes(3, 2)
            t = threading.Thread(target=lambda: (native.push_scope(5), native.pop_scope()))
            t.start()
            t.join()

    with torch.no_grad():
        _ladder(4, during=both)
    why = watch.graphs[2].scopes_unknown
    assert "scope change(s) on other threads" in why and "dependencies missed" in why
    # THEN the site goes back to CUPTI (another thread's nodes cannot be counted at all)
    assert [g.counted for g in watch.graphs] == [True, True, True, False]
    assert watch.countable[watch.graphs[0].site] is False


def test_replays_traced_in_one_window_then_cupti_detached_as_it_closes(watch, monkeypatch):
    """Through the real patches: the first 2 replays of each graph in one tracing window, the
    window closed at the first untraced replay (synchronized, the tracer stopped) and CUPTI
    detached there, before that replay runs, and the manifest says so."""
    from graphscope.capture.run import traced as T

    events, now = [], [100.0]

    @contextlib.contextmanager
    def tracing():
        events.append("open")
        yield []
        events.append("close")

    monkeypatch.setattr(T.native, "tracing", tracing)
    monkeypatch.setattr(T.native, "tracer_active", lambda: False)
    monkeypatch.setattr(T.native, "cupti_detach", lambda: events.append("detach") or "")
    monkeypatch.setattr(T, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: events.append("sync"))
    monkeypatch.setattr(watch.cfg, "replays", 2)
    monkeypatch.setattr(W.TracedReplays, "join", lambda self, done: self.close())
    a, b = _capture(2)
    for g in (a, b, a, b):
        g.replay()
    assert events == ["open"]
    a.replay()  # untraced: the window closes and CUPTI is detached, then it runs
    assert events == ["open", "sync", "close", "sync", "detach"]
    b.replay()
    a.replay()
    assert events.count("detach") == 1
    assert [g.traced for g in watch.graphs] == [2, 2]
    tw = watch.result().meta["tracing_windows"]
    assert tw["windows"] == 1 and tw["cupti_detached"] == 1 and "attached_at_end" not in tw
