"""Reference semantics on the GPU: MK*, AG*, CG* of SPEC.md."""

import pickle

import pytest
import torch

import graphscope
from graphscope import native

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fresh():
    graphscope.clear_kernel_annotations()
    yield
    assert not native.recorder_active()


def _mlp():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    m = m.cuda()
    x = torch.randn(16, 32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            m(x).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for p in m.parameters():
        p.grad = None
    return m, x


def _by_name():
    out = {}
    for k, v in graphscope.get_kernel_annotations().items():
        out.setdefault((v[0].get("name"), v[0].get("autograd_phase")), []).append(k)
    return out


def _annotations_for(cap):
    eid_nodes = {}
    for k, v in graphscope.get_kernel_annotations().items():
        eid_nodes[k] = v[0]
    return eid_nodes


def test_mk2_kernel_memcpy_memset_nodes_in_scope_are_tagged():  # MK2
    a = torch.randn(1024, device="cuda")
    host = torch.randn(1024).pin_memory()
    b = torch.empty_like(a)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with graphscope.graph(g, enable_annotations=True) as cap:
        with graphscope.mark_kernels("region"):
            b.copy_(host, non_blocking=True)  # H2D from pinned memory: a memcpy node
            c = a * 2  # kernel node
        d = a + 1  # outside the scope
    del c, d
    g.instantiate()
    graphscope.remap_to_exec_graph(g)
    rec = cap.records
    work = [(int(t), int(s)) for t, s in zip(rec.node_type, rec.scope) if int(t) in (0, 1, 2)]
    in_scope = [t for t, s in work if s >= 0]
    assert len(in_scope) == 2  # the copy (memcpy or copy kernel) and the multiply
    anns = graphscope.get_kernel_annotations()
    eid = native.exec_id(g.raw_cuda_graph_exec())
    assert all(k >> 32 == eid for k in anns)
    assert len(anns) == len(in_scope) and all(v[0] == {"name": "region"} for v in anns.values())
    assert len(work) - len(in_scope) == 1  # the kernel outside the scope is not tagged


def test_mk1_mk3_noop_outside_annotated_capture():  # MK1, MK3
    m, x = _mlp()
    with graphscope.mark_kernels("eager"):  # outside capture: nothing happens
        m(x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # plain torch capture: annotations disabled
        with graphscope.mark_kernels("plain"):
            m(x)
    g2 = torch.cuda.CUDAGraph()
    with graphscope.graph(g2, enable_annotations=False):
        with graphscope.mark_kernels("off"):
            m(x)
    assert dict(graphscope.get_kernel_annotations()) == {}
    assert native.current_scope() == -1


def test_mk4_nested_scopes_merge_inner_wins():  # MK4
    m, x = _mlp()
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True):
        with graphscope.mark_kernels({"name": "outer", "a": 1, "b": 1}):
            with graphscope.mark_kernels({"name": "inner", "b": 2}):
                m(x)
    anns = [v[0] for v in graphscope.get_kernel_annotations().values()]
    assert anns and all(a == {"name": "inner", "a": 1, "b": 2} for a in anns)


def test_mk5_mk6_backward_tagged_with_phase_in_same_capture():  # MK5, MK6
    m, x = _mlp()
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True):
        with graphscope.mark_kernels({"name": "fwd", "autograd_phase": "mine"}):
            y = m(x)
        y.sum().backward()
    by = _by_name()
    assert by.get(("fwd", "mine")), "forward kernels keep the user's value"
    assert by.get(("fwd", "backward")), "backward kernels tagged with autograd_phase=backward"
    assert len(by[("fwd", "backward")]) >= 3  # two weight grads + input grad at least


def test_mk5_backward_in_a_later_capture():  # MK5
    m, x = _mlp()
    x.requires_grad_(True)
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    pool = torch.cuda.graph_pool_handle()
    with graphscope.graph(g1, pool=pool, enable_annotations=True):
        with graphscope.mark_kernels("layer"):
            y = m(x)
    with graphscope.graph(g2, pool=pool, enable_annotations=True):
        y.sum().backward()
    e2 = native.exec_id(g2.raw_cuda_graph_exec())
    bwd = [v[0] for k, v in graphscope.get_kernel_annotations().items() if k >> 32 == e2]
    assert bwd and any(a == {"name": "layer", "autograd_phase": "backward"} for a in bwd)


def test_mk7_backward_outside_capture_does_nothing():  # MK7
    m, x = _mlp()
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True):
        with graphscope.mark_kernels("f"):
            y = m(x)
    before = dict(graphscope.get_kernel_annotations())
    y.sum().backward()  # eager backward after the capture (y's graph was captured)
    torch.cuda.synchronize()
    assert native.current_scope() == -1
    assert dict(graphscope.get_kernel_annotations()) == before


def test_mk8_higher_order_gradients_inherit():  # MK8
    torch.manual_seed(0)
    w = torch.randn(16, 16, device="cuda", requires_grad=True)
    x = torch.randn(8, 16, device="cuda", requires_grad=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up off the legacy stream, as capture requires
        for _ in range(2):
            gx, = torch.autograd.grad(torch.tanh(x @ w).sum(), x, create_graph=True)
            gx.pow(2).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    w.grad = None
    x.grad = None
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True) as cap:
        with graphscope.mark_kernels("tanh_layer"):
            y = torch.tanh(x @ w).sum()
        gx, = torch.autograd.grad(y, x, create_graph=True)
        n_first = len(graphscope.get_kernel_annotations())
        gx.pow(2).sum().backward()  # grad of grad: nodes made by the first backward
    del n_first
    anns = [v[0] for v in graphscope.get_kernel_annotations().values()]
    bwd = [a for a in anns if a.get("autograd_phase") == "backward"]
    rec = cap.records
    work = sum(1 for t in rec.node_type if int(t) in (0, 1, 2))
    # the double-backward kernels (tanh backward-of-backward, matmuls) are attributed
    assert len(bwd) >= 6, (len(bwd), work)


def test_mk9_accumulate_grad_kernels_not_tagged_by_forward_scope():  # MK9
    m, x = _mlp()
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True) as cap:
        with graphscope.mark_kernels("f"):
            y = m(x)
        loss = y.sum()
        loss.backward()
    rec = cap.records
    untagged_work = sum(
        1 for t, s in zip(rec.node_type, rec.scope) if int(t) in (0, 1, 2) and s < 0)
    # sum + its backward fill, and grad accumulation copies, are outside any scope
    assert untagged_work >= 1


def test_mk10_backward_false_annotates_forward_only():  # MK10
    m, x = _mlp()
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True):
        with graphscope.mark_kernels("fo", backward=False):
            y = m(x)
        y.sum().backward()
    phases = {v[0].get("autograd_phase") for v in graphscope.get_kernel_annotations().values()}
    assert phases == {None}


def test_mk13_work_on_another_capturing_stream_is_tagged():  # MK13 (graphscope goes further)
    a = torch.randn(256, 256, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True):
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with graphscope.mark_kernels("both"):
            with torch.cuda.stream(side):
                s = a @ a
            m_ = a + 1
        main.wait_stream(side)
        out = s + m_
    del out
    names = [v[0]["name"] for v in graphscope.get_kernel_annotations().values()]
    assert names.count("both") >= 2


def test_mark_stream_tags_side_stream_work():
    a = torch.randn(128, 128, device="cuda")
    side = torch.cuda.Stream()
    graphscope.mark_stream(side, "side")
    try:
        g = torch.cuda.CUDAGraph()
        with graphscope.graph(g, enable_annotations=True):
            main = torch.cuda.current_stream()
            side.wait_stream(main)
            with torch.cuda.stream(side):
                s = a @ a
            main.wait_stream(side)
            t = a + s
        del t
    finally:
        graphscope.mark_stream(side, None)
    streams = [v[0].get("stream") for v in graphscope.get_kernel_annotations().values()]
    assert "side" in streams


def test_remap_each_instantiate_mints_new_exec_id_and_pickle_shape(tmp_path):
    m, x = _mlp()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with graphscope.graph(g, enable_annotations=True):
        with graphscope.mark_kernels("k"):
            m(x)
    g.instantiate()
    n1 = graphscope.remap_to_exec_graph(g)
    e1 = native.exec_id(g.raw_cuda_graph_exec())
    keys1 = set(graphscope.get_kernel_annotations())
    g.instantiate()
    n2 = graphscope.remap_to_exec_graph(g)
    e2 = native.exec_id(g.raw_cuda_graph_exec())
    keys2 = set(graphscope.get_kernel_annotations())
    assert e1 != e2 and n1 == n2 > 0
    assert all(k >> 32 == e2 for k in keys2) and {k & 0xFFFFFFFF for k in keys1} == {
        k & 0xFFFFFFFF for k in keys2}
    p = graphscope.save_kernel_annotations(tmp_path / "ann.pkl")
    with open(p, "rb") as f:
        loaded = pickle.load(f)
    assert all(isinstance(k, int) and isinstance(v, list) and isinstance(v[0], dict)
               for k, v in loaded.items())
    with pytest.raises(TypeError):
        graphscope.get_kernel_annotations()[1] = []  # read-only view


def test_ag_graph_context_manager_keep_graph_pool_debug_dump_reset(tmp_path):  # AG1-AG7
    m, x = _mlp()
    s = torch.cuda.Stream()
    g = graphscope.Graph(keep_graph=True, enable_annotations=True)
    s.wait_stream(torch.cuda.current_stream())
    g.enable_debug_mode()
    with torch.cuda.stream(s), g:  # AG1: captures the current stream
        with graphscope.mark_kernels("ag"):
            y = m(x)
    torch.cuda.current_stream().wait_stream(s)
    g.debug_dump(str(tmp_path / "g.dot"))  # AG6
    assert "digraph" in (tmp_path / "g.dot").read_text(errors="replace")
    assert not graphscope.get_kernel_annotations()  # AG2: nothing instantiated yet
    x.copy_(torch.randn_like(x))
    g.replay()  # AG2: first replay instantiates
    torch.cuda.synchronize()
    assert torch.allclose(y, m(x), atol=1e-5)
    assert graphscope.get_kernel_annotations()  # keyed at that instantiate
    g2 = graphscope.Graph(pool=g.pool(), capture_error_mode="relaxed")  # AG3, AG4
    with torch.cuda.stream(s), g2:
        z = m(x) * 2
    g2.replay()
    torch.cuda.synchronize()
    assert torch.allclose(z, m(x) * 2, atol=1e-5)
    g2.reset()  # AG7
    with torch.cuda.stream(s), g2:
        z = m(x) * 3
    g2.replay()
    torch.cuda.synchronize()
    assert torch.allclose(z, m(x) * 3, atol=1e-5)
    with pytest.raises(ValueError):
        graphscope.Graph(capture_error_mode="bogus")


def test_cg4_make_graphed_callables_annotated_by_module():  # CG4
    torch.manual_seed(0)
    m1 = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU()).cuda()
    m2 = torch.nn.Linear(64, 4).cuda()
    x = torch.randn(8, 32, device="cuda", requires_grad=True)
    h = torch.randn(8, 64, device="cuda", requires_grad=True)
    graphscope.clear_kernel_annotations()
    g1, g2 = graphscope.make_graphed_callables((m1, m2), ((x,), (h,)))  # upstream's signature
    anns = dict(graphscope.get_kernel_annotations())
    mods = {(v[0]["module_name"], v[0].get("autograd_phase")) for v in anns.values()}
    assert ("L.0", None) in mods and ("L.0", "backward") in mods
    assert any(mn == "L" for mn, _ in mods)
    assert len({k >> 32 for k in anns}) == 4  # fwd1, fwd2, bwd2, bwd1: four exec graphs
    # numerics match eager
    xr = torch.randn(8, 32, device="cuda", requires_grad=True)
    out = g2(g1(xr))
    out.sum().backward()
    ref_x = xr.detach().clone().requires_grad_(True)
    ref = m2(m1(ref_x))
    assert torch.allclose(out, ref, atol=1e-4)


def test_cg4_graph_callables_hands_back_the_graphs():  # CG4, the callables source's door
    from graphscope.capture.cuda_graphs import graph_callables

    m1 = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU()).cuda()
    x = torch.randn(8, 32, device="cuda", requires_grad=True)
    graphscope.clear_kernel_annotations()
    made = graph_callables(m1, (x,), module_depth=0)
    assert len(made.graphs) == 2 and made.records is not None  # forward, backward
    anns = graphscope.get_kernel_annotations()
    execs = {native.exec_id(g.raw_cuda_graph_exec()) for g in made.graphs}
    assert {k >> 32 for k in anns} <= execs
    assert {v[0]["module_name"] for v in anns.values()} == {"L"}  # depth 0: the root only


def test_cg5_restrictions_raise():  # CG5
    m = torch.nn.Linear(8, 8).cuda()
    m.register_forward_hook(lambda *a: None)
    x = torch.randn(2, 8, device="cuda", requires_grad=True)
    with pytest.raises(Exception, match="hook"):
        graphscope.make_graphed_callables(m, (x,))
    assert not native.recorder_active()
    m2 = torch.nn.Linear(8, 8).cuda()
    with pytest.raises((TypeError, AssertionError, RuntimeError)):
        graphscope.make_graphed_callables(m2, (3,))  # non-tensor sample args
