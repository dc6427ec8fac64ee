"""Where PyTorch's own graph annotations work (torch >= 2.14 with a >= 13.1 driver), graphscope
must tag the same nodes with the same dicts. Skipped elsewhere (the H200 here has torch 2.11 and
a CUDA 13.0 driver)."""

import pytest
import torch

import graphscope
from graphscope import native

pytestmark = pytest.mark.gpu


def _upstream():
    ga = getattr(torch.cuda, "graph_annotations", None)
    if ga is None or not ga.is_available():
        pytest.skip("torch.cuda.graph_annotations unavailable (needs torch >= 2.14 and a CUDA "
                    ">= 13.1 driver)")
    return ga


def _run(mark, graph_ctx, m, x):
    g = torch.cuda.CUDAGraph()
    with graph_ctx(g):
        with mark({"name": "outer", "k": 1}):
            with mark("inner"):
                y = m(x)
        y.sum().backward()
    return g


def test_same_node_set_and_dicts_as_pytorch():
    ga = _upstream()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).cuda()
    x = torch.randn(16, 32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        m(x).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    for p in m.parameters():
        p.grad = None
    g1 = _run(ga.mark_kernels, lambda g: torch.cuda.graph(g, enable_annotations=True), m, x)
    theirs = {k & 0xFFFFFFFF: v for k, v in ga.get_kernel_annotations().items()
              if k >> 32 == native.exec_id(g1.raw_cuda_graph_exec())}
    for p in m.parameters():
        p.grad = None
    graphscope.clear_kernel_annotations()
    _run(graphscope.mark_kernels, lambda g: graphscope.graph(g, enable_annotations=True), m, x)
    ours = {k & 0xFFFFFFFF: v for k, v in graphscope.get_kernel_annotations().items()}

    def merged(v):
        out = {}
        for d in v:
            out.update(d)
        return out

    assert set(ours) == set(theirs)
    assert {k: merged(v) for k, v in ours.items()} == {k: merged(v) for k, v in theirs.items()}
