"""What ``graphscope run``'s watch itself costs per capture, on a CPU (no GPU needed): the
bench_ladder.py decoder's shape (16 layers, 150 module calls and ~220 aten ops per forward, at
hidden 64 so the CPU's own compute stays small) run at 67 batch sizes, each forward inside a
"capture" whose CUDA parts are faked (``torch.cuda.CUDAGraph`` replaced by a stand-in; no
CUPTI, no allocator history, no template to inspect). What runs for real is graphscope's part:
the watch's begin/end, the annotated session, the native op observer, the module scopes
(``nn.Module.__call__`` replaced), the capture meter's marks, the batch held across captures,
the node counting of a site's captures past its op captures (its count faked).

Variants, alternated in shuffled order per round: ``plain`` (the loop alone), ``watch``
(``graphscope run``'s default: ops recorded in a site's first 2 captures), ``watch_all_ops``
(``--op-captures all``). Prints the median loop time, the ratio to plain and graphscope's
milliseconds per capture; then the watch's own seconds by cause (the bundle's
``capture_overhead_s``), per capture. GPU-only costs (CUPTI's callbacks, keep_graph and the
separate instantiate) come on top: bench_ladder.py and bench_ladder_parts.py measure those.

    .venv/bin/python bench/bench_watch_cpu.py [ROUNDS] [SIZES]

(``SIZES``: the ladder's first N batch sizes only; tests/unit/test_bench_watch.py runs 1 round
of 3 so the bench keeps working.)
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time

import numpy as np
import torch
from _measure import shuffled_rounds  # run as python bench/bench_watch_cpu.py
from torch import nn

from graphscope import native
from graphscope.capture import meter as M
from graphscope.capture.config import CaptureConfig
from graphscope.capture.run import watch as W
from graphscope.capture.run.patch import patch_cuda_graph
from graphscope.native import nodecount


def cpu_model() -> tuple[nn.Module, torch.Tensor, list[int]]:
    """bench_ladder.py's decoder and inputs, on the CPU in fp32 at hidden 64 and a vocabulary
    of 1000 (its 16 layers, module calls and ops unchanged), and its 67 sizes."""
    from bench_ladder import MODEL  # run as python bench/bench_watch_cpu.py

    src = MODEL
    for old, new in (("LAYERS, HIDDEN, HEADS, CTX = 16, 1024, 8, 128",
                      "LAYERS, HIDDEN, HEADS, CTX = 16, 64, 4, 8"),
                     ('dtype=torch.float16, device="cuda"', "dtype=torch.float32"),
                     ('torch.device("cuda")', 'torch.device("cpu")'),
                     ("Decoder().half().eval()", "Decoder().eval()"),
                     ("32000", "1000"),
                     ('dtype=torch.long, device="cuda"', "dtype=torch.long")):
        assert old in src, old
        src = src.replace(old, new)
    ns: dict = {}
    exec(src, ns)
    return ns["model"], ns["tokens"], ns["SIZES"]


class FakeGraph:
    """torch.cuda.CUDAGraph's surface that graphscope's patches use, without CUDA."""

    def __init__(self, keep_graph: bool = False) -> None:
        pass

    def capture_begin(self, *a: object, **k: object) -> None:
        pass

    def capture_end(self) -> None:
        pass

    def instantiate(self) -> None:
        pass

    def replay(self) -> None:
        pass

    def reset(self) -> None:
        pass

    def raw_cuda_graph(self) -> int:
        return 1

    def raw_cuda_graph_exec(self) -> int:
        return 2

    def pool(self) -> tuple[int, int]:
        return (0, 9)


def _nodes(n: int) -> native.CreatedNodes:
    z = np.zeros(0, dtype=np.uint64)
    return native.CreatedNodes(
        node_id=np.arange(n, dtype=np.uint64), graph_id=np.zeros(n, np.uint32),
        node_type=np.zeros(n, np.int32), scope=np.full(n, -1, np.int64),
        op=np.full(n, -1, np.int64), thread=np.zeros(n, np.uint64), clone_id=z,
        clone_origin=z, exec_id=np.zeros(0, np.uint32), exec_graph=np.zeros(0, np.uint32),
        callback_errors=0)


class NoCupti:
    """native.HeldRecorder's surface: the recorder's windows, with no CUPTI subscription."""

    held = False
    cut = False

    @contextlib.contextmanager
    def window(self):  # type: ignore[no-untyped-def]
        out: list = []
        yield out
        out.append(_nodes(0))

    def release(self) -> None:
        pass


def fake_cuda() -> None:
    native.HeldRecorder = NoCupti  # type: ignore[misc,assignment]
    # a site's captures past --op-captures count nodes (graphscope.native.nodecount): the count
    # faked
    real_start = nodecount.start
    nodecount.start = lambda fake=True, how=0: real_start(True, how)  # type: ignore[misc]
    stream = type("S", (), {"cuda_stream": 0})  # made once: the GPU's raw getter makes none
    torch.cuda.current_stream = lambda *a: stream  # type: ignore
    torch.cuda.CUDAGraph = FakeGraph  # type: ignore[misc,assignment]
    torch.cuda.memory._record_memory_history = lambda *a, **k: None
    torch.cuda.memory._snapshot = lambda *a, **k: {"segments": []}
    torch.cuda.current_device = lambda: 0
    M._reserved = lambda: 0
    W.native.capture_graph = lambda stream: 1
    # the graph's nodes are read in the loop (before capture_end): that call is the driver's,
    # faked here; what graphscope does with the answer is timed
    read = {"graph_id": 1, "node_id": np.arange(4, dtype="<u8").tobytes(),
            "node_type": bytes(16), "grid": bytes(48), "block": bytes(48), "smem": bytes(16),
            "bytes": bytes(32), "name_idx": bytes(16), "names": ["k"], "demangled": ["k"],
            "edge_from": b"", "edge_to": b""}  # the extension's answer: columns as bytes
    W.native.read_graph = lambda ptr: read
    W.native.read_capture = lambda stream, detach: (nodecount.detach() if detach else None,
                                                    read)[1]
    W.read_dot = lambda ptr: ""
    W.native.exec_id = lambda ptr: 7


def loop(model: nn.Module, tokens: torch.Tensor, watched: bool, sizes: list[int]) -> float:
    graphs, outs = [], []
    t = time.perf_counter()
    with torch.inference_mode():
        for bs in reversed(sizes):  # largest first, as the GPU bench
            g = torch.cuda.CUDAGraph()
            graphs.append(g)  # graphs and outputs kept, as a serving engine keeps them
            if watched:
                g.capture_begin()
            outs.append(model(tokens[:bs]))
            if watched:
                g.capture_end()
    return time.perf_counter() - t


def watched(model: nn.Module, tokens: torch.Tensor, op_captures: int, sizes: list[int],
            causes: dict[str, float] | None = None) -> float:
    w = W.GraphWatch(CaptureConfig(mode="run", replays=0, op_captures=op_captures))
    undo = patch_cuda_graph(w)
    try:
        s = loop(model, tokens, True, sizes)
        if causes is not None:
            causes.update(w.overhead)
            causes["steps_total"] = w.steps_s
        return s
    finally:
        undo()
        w._close_window()
        w._release_batch()
        w.pending.clear()


def main(rounds: int = 9, n_sizes: int = 0) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    fake_cuda()
    model, tokens, sizes = cpu_model()
    sizes = sizes[:n_sizes] if n_sizes else sizes
    variants = {"plain": lambda: loop(model, tokens, False, sizes),
                "watch": lambda: watched(model, tokens, 2, sizes),
                "watch_all_ops": lambda: watched(model, tokens, 0, sizes)}
    res = shuffled_rounds(variants, rounds, seed=1, warm=True)
    plain = statistics.median(res["plain"])
    out: dict[str, dict[str, float]] = {}
    for k, v in res.items():
        m = statistics.median(v)
        out[k] = {"loop_s": round(m, 4), "ratio": round(m / plain, 3),
                  "ms_per_capture": round((m - plain) / len(sizes) * 1e3, 3)}
    causes: dict[str, float] = {}
    watched(model, tokens, 2, sizes, causes)
    out["watch_causes_ms_per_capture"] = {k: round(v / len(sizes) * 1e3, 4)
                                          for k, v in causes.items()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9,
         int(sys.argv[2]) if len(sys.argv) > 2 else 0)
