"""The native core on a real GPU. Run on the H200."""

import re

import numpy as np
import pytest
import torch

from graphscope import native
from graphscope.capture import capabilities
from graphscope.native import nodecount
from tests.conftest import run_py

pytestmark = pytest.mark.gpu


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))
    return m.cuda(), torch.randn(16, 64, device="cuda")


def _warm(m, x):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            m(x).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def test_node_ids_are_graph_id_and_creation_index_and_match_dot(tmp_path):
    # GIVEN a kept template captured under the recorder
    m, x = _model()
    _warm(m, x)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with native.recording() as out:
        with torch.cuda.graph(g):
            m(x).sum().backward()
    rec = out[0]
    gid = native.graph_id(g.raw_cuda_graph())
    mine = rec.node_id[rec.graph_id == gid]
    # THEN ids are gid << 32 | 0..n-1 in creation order
    assert len(mine) > 5
    assert (mine >> np.uint64(32) == gid).all()
    assert (mine & np.uint64(0xFFFFFFFF)).tolist() == list(range(len(mine)))
    # AND the inspector sees the same ids, and the driver's DOT uses the same local ids
    ins = native.inspect_graph(g.raw_cuda_graph())
    assert sorted(ins.node_id.tolist()) == sorted(mine.tolist())
    dot = tmp_path / "g.dot"
    native.debug_dot_print(g.raw_cuda_graph(), str(dot))
    text = dot.read_text(errors="replace")
    ids = {int(v) for v in re.findall(rf'"graph_{gid}_node_(\d+)"\[', text)}
    assert ids == set((mine & np.uint64(0xFFFFFFFF)).tolist())
    labels = {int(v) for v in re.findall(r"\{ID \| (\d+) \(topoId", text)}
    assert labels == ids
    # AND kernels have names, launch dims and edges
    kern = ins.node_type == 0
    assert kern.any() and (ins.grid[kern] > 0).all()
    assert len(ins.edge_from) > 0
    assert any("gemm" in n.lower() or "Kernel" in n for n in ins.demangled)


def test_the_graph_being_captured_reads_as_its_template_will():
    # GIVEN a capture still running (graphscope run reads a graph before capture_end, where
    # torch destroys the template of a graph the program does not keep)
    m, x = _model()
    _warm(m, x)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    assert native.capture_graph(torch.cuda.current_stream().cuda_stream) == 0  # not capturing
    with torch.cuda.graph(g):
        m(x).sum().backward()
        ptr = native.capture_graph(torch.cuda.current_stream().cuda_stream)
        during = native.inspect_graph(ptr, demangle=False)
    # THEN it is the graph torch keeps: the same nodes, edges and launch dims as the template
    assert ptr == g.raw_cuda_graph()
    after = native.inspect_graph(g.raw_cuda_graph())
    assert during.graph_id == after.graph_id and len(during.node_id) > 5
    for f in ("node_id", "node_type", "grid", "block", "smem", "bytes", "name_idx", "edge_from",
              "edge_to"):
        assert np.array_equal(getattr(during, f), getattr(after, f)), f
    # AND its names are the driver's, demangled later to the same text
    assert during.names == after.names
    assert native.demangled(during, {}).demangled == after.demangled


def test_read_capture_reads_what_inspect_graph_reads_and_detaches_the_count():
    # GIVEN a capture counted by node counts (graphscope run's ladder buckets), just before
    # its capture_end
    m, x = _model()
    _warm(m, x)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    stream = torch.cuda.current_stream().cuda_stream
    assert native.read_capture(stream, False) is None  # not capturing
    nodecount.start(how=nodecount.DEPS)
    try:
        with torch.cuda.graph(g):
            nodecount.attach(torch.cuda.current_stream().cuda_stream)
            with torch.no_grad():
                m(x)
            # WHEN graphscope reads it with one listing of its nodes
            read = native.read_capture(torch.cuda.current_stream().cuda_stream, True)
    finally:
        marks = nodecount.stop()
    # THEN it reads as the template does, and the count was detached there, its last count
    # checked against the listing (no mismatch)
    ins, after = native.as_inspection(read), native.inspect_graph(g.raw_cuda_graph())
    for f in ("node_id", "node_type", "grid", "block", "smem", "bytes", "name_idx", "edge_from",
              "edge_to"):
        assert np.array_equal(getattr(ins, f), getattr(after, f)), f
    assert ins.graph_id == after.graph_id and ins.names == after.names
    assert marks.problem() == "" and marks.mismatches == 0
    assert int(marks.counts[-1]) <= len(after.node_id)


def test_node_ids_read_as_positions_are_cuptis_on_every_kind_of_node():
    # GIVEN a graph with kernels, a device copy and a side stream's work joined back,
    # read while it is still being captured (as graphscope run reads it)
    m, x = _model()
    _warm(m, x)
    side = torch.cuda.Stream()
    buf = torch.empty(4096, device="cuda")
    ext = native.extension()
    g = torch.cuda.CUDAGraph()
    reads = {}
    try:
        with torch.cuda.graph(g):
            buf.zero_()
            y = m(x)
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                z = y.relu() * 2
            torch.cuda.current_stream().wait_stream(side)
            copy = torch.empty_like(buf)
            copy.copy_(buf)
            (z + y).sum()
            ptr = native.capture_graph(torch.cuda.current_stream().cuda_stream)
            ext.set_positional_ids(-1)
            reads["checked"] = native.inspect_graph(ptr, demangle=False)  # node by node
            state = native.positional_ids()
            reads["positions"] = native.inspect_graph(ptr, demangle=False)
            ext.set_positional_ids(0)
            reads["cupti"] = native.inspect_graph(ptr, demangle=False)
    finally:
        ext.set_positional_ids(-1)
    # THEN the driver lists the nodes in creation order: the check held, and ids read as
    # positions are CUPTI's, node for node and edge for edge
    assert state is True
    kinds = set(reads["cupti"].node_type.tolist())
    assert {0, 1} <= kinds, kinds  # kernels and the copy
    for how in ("checked", "positions"):
        for f in ("node_id", "edge_from", "edge_to", "node_type", "name_idx"):
            assert np.array_equal(getattr(reads[how], f), getattr(reads["cupti"], f)), (how, f)


def test_cuptis_graph_ids_are_warmed_on_an_empty_graph_without_a_capture():
    # graphscope run does this at install: the process's first id read is not in the
    # program's first capture. It leaves no graph and no allocation behind.
    before = torch.cuda.memory_allocated()
    assert native.warm_graph_ids() == ""
    assert native.warm_graph_ids() == ""  # again: nothing held
    assert torch.cuda.memory_allocated() == before


def test_clone_map_template_to_exec_and_replays_join_fully():
    m, x = _model()
    _warm(m, x)
    g = torch.cuda.CUDAGraph()  # instantiated at capture_end, inside the window
    with native.recording() as out:
        with torch.cuda.graph(g):
            m(x).sum().backward()
    rec = out[0]
    eid = native.exec_id(g.raw_cuda_graph_exec())
    assert eid in rec.exec_id.tolist()
    clones = dict(zip(rec.clone_id.tolist(), rec.clone_origin.tolist()))
    tmpl = [c for c in clones if c >> 32 == eid]
    assert tmpl, "no GRAPHNODE_CLONED records for the exec graph"
    for c in tmpl:  # exec local id == template local id
        assert c & 0xFFFFFFFF == clones[c] & 0xFFFFFFFF
    # WHEN replayed under the tracer
    g.replay()
    torch.cuda.synchronize()
    with native.tracing() as tr:
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
    t = tr[0]
    ingraph = t.graph_node_id != 0
    assert ingraph.sum() >= 3 * 5
    # THEN every replayed record joins to a cloned exec node (100%)
    assert set(t.graph_node_id[ingraph].tolist()) <= set(tmpl)
    assert (t.graph_id[ingraph] == eid).all()
    assert (t.end_ns[ingraph] > t.start_ns[ingraph]).all()
    assert t.dropped == 0
    assert not native.recorder_active()


def test_failed_capture_releases_subscription_and_next_capture_works():
    import graphscope

    m, x = _model()
    _warm(m, x)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="boom"):
        with graphscope.graph(g, enable_annotations=True):
            m(x)
            raise ValueError("boom")
    assert not native.recorder_active()
    assert not torch.cuda.is_current_stream_capturing()
    g2 = torch.cuda.CUDAGraph()
    with graphscope.graph(g2, enable_annotations=True) as cap:
        with graphscope.mark_kernels("again"):
            m(x).sum()
    assert cap.records is not None and len(cap.records.node_id) > 0
    eid = native.exec_id(g2.raw_cuda_graph_exec())
    assert any(k >> 32 == eid for k in graphscope.get_kernel_annotations())


def test_sync_inside_capture_fails_cleanly_and_process_stays_usable():
    import graphscope

    m, x = _model()
    _warm(m, x)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError):  # torch.AcceleratorError: capture invalidated
        with graphscope.graph(g, enable_annotations=True):
            m(x).sum().item()  # host sync: illegal while capturing
    assert not native.recorder_active()
    assert not torch.cuda.is_current_stream_capturing()
    # RNG and the allocator work again, in eager mode and in a new capture with dropout
    torch.randn(8, device="cuda").sum().item()
    drop = torch.nn.Dropout(0.5)
    g2 = torch.cuda.CUDAGraph()
    with graphscope.graph(g2, enable_annotations=True):
        y = drop(m(x))
    g2.replay()
    torch.cuda.synchronize()
    assert y.shape == (16, 32)


def test_torch_profiler_still_records_gpu_events_after_graphscope():
    r = run_py(
        "import torch, graphscope\n"
        "from graphscope import native\n"
        "m = torch.nn.Linear(64, 64).cuda(); x = torch.randn(8, 64, device='cuda')\n"
        "m(x).sum().backward(); torch.cuda.synchronize()\n"
        "g = torch.cuda.CUDAGraph()\n"
        "with graphscope.graph(g, enable_annotations=True):\n"
        "    y = m(x)\n"
        "with native.tracing() as t:\n"
        "    g.replay(); torch.cuda.synchronize()\n"
        "assert not native.recorder_active()\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:\n"
        "    g.replay(); m(x); torch.cuda.synchronize()\n"
        "n = sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)\n"
        "print('GPU_EVENTS', n)\n"
    )
    assert r.returncode == 0, r.stderr
    n = int(r.stdout.split("GPU_EVENTS")[1].split()[0])
    assert n > 0


def test_subscriber_error_39_after_profiler_names_the_fix():
    r = run_py(
        "import torch, graphscope\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "x = torch.randn(8, 8, device='cuda')\n"
        "with profile(activities=[ProfilerActivity.CUDA]):\n"
        "    (x @ x).sum(); torch.cuda.synchronize()\n"
        "g = torch.cuda.CUDAGraph()\n"
        "try:\n"
        "    with graphscope.graph(g, enable_annotations=True):\n"
        "        x @ x\n"
        "except graphscope.GraphscopeError as e:\n"
        "    print('ERR', type(e).__name__, e)\n"
    )
    assert r.returncode == 0, r.stderr
    assert "ERR CuptiSubscriberError" in r.stdout
    assert "torch.profiler" in r.stdout and "fresh process" in r.stdout


def test_cupti_detached_after_tracing_attaches_again_with_the_same_ids():
    """graphscope run detaches CUPTI after each tracing window (an attached CUPTI slowed later
    captures and eager launches, bench/probes/after_trace_gpu.py): the graphs captured before
    keep their exec ids, their replays traced after the detach still key by them, a capture
    under the recorder still gets its nodes, and torch.profiler, started after, still records
    the GPU; once the profiler holds CUPTI, the detach says so and leaves it attached."""
    r = run_py(
        "import torch\n"
        "from graphscope import native\n"
        "m = torch.nn.Linear(64, 64).cuda(); x = torch.randn(8, 64, device='cuda')\n"
        "m(x); torch.cuda.synchronize()\n"
        "g = torch.cuda.CUDAGraph()\n"
        "with native.recording():\n"
        "    with torch.cuda.graph(g):\n"
        "        y = m(x)\n"
        "eid = native.exec_id(g.raw_cuda_graph_exec())\n"
        "with native.tracing() as t:\n"
        "    g.replay(); torch.cuda.synchronize()\n"
        "print('DETACH1', repr(native.cupti_detach()))\n"
        "with native.tracing() as t2:\n"
        "    g.replay(); torch.cuda.synchronize()\n"
        "ids = {int(v) >> 32 for v in t2[0].graph_node_id.tolist() if v}\n"
        "print('SAME_EXEC', ids == {eid} and native.exec_id(g.raw_cuda_graph_exec()) == eid)\n"
        "print('DETACH2', repr(native.cupti_detach()))\n"
        "g2 = torch.cuda.CUDAGraph()\n"
        "with native.recording() as rec:\n"
        "    with torch.cuda.graph(g2):\n"
        "        m(x)\n"
        "print('NODES', len(rec[0].node_id))\n"
        "print('DETACH3', repr(native.cupti_detach()))\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:\n"
        "    g.replay(); m(x); torch.cuda.synchronize()\n"
        "n = sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)\n"
        "print('GPU_EVENTS', n)\n"
        "print('AFTER_PROFILER', repr(native.cupti_detach()))\n"
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "DETACH1 ''" in out and "DETACH2 ''" in out and "DETACH3 ''" in out, out
    assert "SAME_EXEC True" in out, out
    assert int(out.split("NODES")[1].split()[0]) > 0
    assert int(out.split("GPU_EVENTS")[1].split()[0]) > 0
    assert "AFTER_PROFILER 'cuptiSubscribe" in out, out


def test_probe_on_gpu():
    caps = capabilities.probe(try_subscribe=True)
    assert caps.can_capture, caps.reason
    assert caps.details["cupti_api_version"] >= 19
    assert "libcupti" in caps.details["cupti_path"]
    assert native.loaded_cupti_paths() == [caps.details["cupti_path"]]  # one copy only
