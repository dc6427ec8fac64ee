"""What one module call costs ``graphscope run`` inside a real capture, and what its node-count
notes cost: 1,000 identity modules called in a capture whose graph already holds KERNELS
captured kernels, plain and under the watch (``deps``: a site's later capture, counted by the
stream's dependencies; ``walk``: ``GRAPHSCOPE_COUNT_DEPS=0``; ``fake``: notes made without
asking the driver; ``nomarks``: module scopes without the meter's time marks), and the driver
and CUPTI calls a note makes, each timed alone through ctypes against ``cuDriverGetVersion``.

With ``--launch`` each module launches one kernel (``x.add_(1)``), as a decoder's leaf modules
do: every note then follows a new node, and the module calls are timed with their launches.

Needs a GPU: ``python3 bench/probes/note_cost_gpu.py [KERNELS] [--launch]`` (µs per module call,
the median of 9 captures per variant, shuffled; µs per driver call, the median of 5 batches).
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402
from _measure import shuffled_rounds  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _driver import driver_calls as driver_functions  # noqa: E402
from torch import nn  # noqa: E402

from graphscope import native  # noqa: E402
from graphscope.capture.config import CaptureConfig  # noqa: E402
from graphscope.capture.run import watch as W  # noqa: E402
from graphscope.capture.run.patch import patch_cuda_graph  # noqa: E402
from graphscope.native import nodecount  # noqa: E402

CALLS = 1000
REAL_COUNTING = nodecount.counting
REAL_HOOKS = W.module_hooks


class Id(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Add(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.add_(1)


class Net(nn.Module):
    def __init__(self, launch: bool) -> None:
        super().__init__()
        self.m = nn.ModuleList((Add if launch else Id)() for _ in range(CALLS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.m:
            x = m(x)
        return x


def capture(net: Net, x: torch.Tensor, kernels: int) -> float:
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):  # grad off: a counted capture
        for _ in range(kernels):
            x.add_(1)
        t = time.perf_counter()
        net(x)
        per = (time.perf_counter() - t) / CALLS * 1e6
    return per


class Watched:
    """A watch for a run of captures (the first is the site's verified one, not timed)."""

    def __init__(self, net: Net, x: torch.Tensor, kernels: int, env: dict, fake: bool,
                 marks: bool) -> None:
        self.args = (net, x, kernels)
        self.env, self.fake, self.marks = env, fake, marks

    def __call__(self) -> float:
        os.environ.update(self.env)
        if self.fake:
            nodecount.counting = lambda fake=False, how=0: REAL_COUNTING(fake=True, how=how)
        if not self.marks:
            W.module_hooks = lambda n, d, f, o, m: REAL_HOOKS(n, d, f, o, None)
        w = W.GraphWatch(CaptureConfig(mode="run", replays=0, record_ops=False))
        undo = patch_cuda_graph(w)
        try:
            capture(*self.args)  # the site's first capture: walks and verifies
            return statistics.median(capture(*self.args) for _ in range(3))
        finally:
            undo()
            w._close_window()
            w._release_batch()
            w.pending.clear()
            for k in self.env:
                os.environ.pop(k, None)
            nodecount.counting = REAL_COUNTING
            W.module_hooks = REAL_HOOKS
            w.meter._stop_history()


def per_call_us(f: Any, batches: int, calls: int) -> float:
    """µs per call of ``f``: the median of ``batches`` batches of ``calls`` calls."""
    out = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        out.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(out)


def driver_calls(kernels: int) -> None:
    d = driver_functions()
    cu, info, nodes, node_id = d.cu, d.capture_info, d.graph_nodes, d.node_id
    x = torch.zeros(16, device="cuda")
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(kernels):
            x.add_(1)
        st, cid, graph = ctypes.c_int(), ctypes.c_uint64(), ctypes.c_void_p()
        deps, edges, nd = ctypes.POINTER(ctypes.c_void_p)(), ctypes.c_void_p(), ctypes.c_size_t()
        stream = ctypes.c_void_p(s.cuda_stream)
        n, nid, v = ctypes.c_size_t(), ctypes.c_uint64(), ctypes.c_int()
        assert info(stream, ctypes.byref(st), ctypes.byref(cid), ctypes.byref(graph),
                    ctypes.byref(deps), ctypes.byref(edges), ctypes.byref(nd)) == 0
        dep = ctypes.c_void_p(deps[0])
        calls = {
            "cuDriverGetVersion": lambda: cu.cuDriverGetVersion(ctypes.byref(v)),
            "cuStreamGetCaptureInfo_v3 (all out)": lambda: info(
                stream, ctypes.byref(st), ctypes.byref(cid), ctypes.byref(graph),
                ctypes.byref(deps), ctypes.byref(edges), ctypes.byref(nd)),
            "cuStreamGetCaptureInfo_v3 (deps only)": lambda: info(
                stream, ctypes.byref(st), None, None, ctypes.byref(deps), None,
                ctypes.byref(nd)),
            "cuGraphGetNodes (count)": lambda: nodes(graph, None, ctypes.byref(n)),
            "cuptiGetGraphNodeId": lambda: node_id(dep, ctypes.byref(nid)),
        }
        res = {}
        # each after a captured launch (a new node every time), as a decoder's notes come
        launched = {
            "add_ alone": lambda: x.add_(1),
            "add_ + cuDriverGetVersion": lambda: (x.add_(1), calls["cuDriverGetVersion"]()),
            "add_ + cuStreamGetCaptureInfo_v3 (deps only)": lambda: (
                x.add_(1), calls["cuStreamGetCaptureInfo_v3 (deps only)"]()),
            "add_ + capture info + cuptiGetGraphNodeId (new node)": lambda: (
                x.add_(1), calls["cuStreamGetCaptureInfo_v3 (deps only)"](),
                node_id(ctypes.c_void_p(deps[0]), ctypes.byref(nid))),
            "add_ + cuGraphGetNodes (count)": lambda: (
                x.add_(1), calls["cuGraphGetNodes (count)"]()),
        }
        for name, f in launched.items():
            print(f"{name:55s} {per_call_us(f, 3, 300):.3f} us", flush=True)
        for name, f in calls.items():
            res[name] = per_call_us(f, 5, 2000)
    floor = res["cuDriverGetVersion"]
    for name, us in res.items():
        print(f"{name:40s} {us:.3f} us ({us - floor:+.3f} over cuDriverGetVersion)", flush=True)


def main(kernels: int, launch: bool) -> None:
    native.ensure_loaded()
    net, x = Net(launch).cuda(), torch.zeros(16, device="cuda")
    capture(net, x, kernels)  # warm: module loading, the allocator
    variants = {
        "plain": lambda: statistics.median(capture(net, x, kernels) for _ in range(3)),
        "deps": Watched(net, x, kernels, {}, False, True),
        "walk": Watched(net, x, kernels, {nodecount.DEPS_ENV: "0"}, False, True),
        "fake": Watched(net, x, kernels, {}, True, True),
        "nomarks": Watched(net, x, kernels, {}, False, False),
    }
    res = shuffled_rounds(variants, 9, seed=3, warm=True)
    base = statistics.median(res["plain"])
    print(f"# {kernels} kernels captured before the module calls; us per module call"
          + (" (each launching a kernel)" if launch else ""))
    for k, rs in res.items():
        med = statistics.median(rs)
        print(f"{k:8s} {med:.3f} us per module call ({med - base:+.3f} over plain)", flush=True)
    if not launch:
        driver_calls(kernels)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--launch"]
    main(int(args[0]) if args else 200, "--launch" in sys.argv)
