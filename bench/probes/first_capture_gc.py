"""Why a program's first capture under ``graphscope run`` was slow on a fresh process: the
collector's full collections, timed with ``gc.callbacks``. CPU only (CUDA faked as in
bench_watch_cpu.py): five "captures" of bench_ladder.py's decoder (hidden 64) at batch 64,
plain, under graphscope's watch, and under the watch after ``runner.settled_heap`` (a full
collection, then ``gc.freeze``), each in a fresh process, three times.

    .venv/bin/python bench/probes/first_capture_gc.py

Prints per variant the milliseconds of each capture and the full (generation 2) collections
that ran during them, with their milliseconds.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(variant: str) -> None:
    sys.path.insert(0, os.path.dirname(HERE))
    import bench_watch_cpu as B
    import torch

    from graphscope.capture.run.runner import settled_heap

    B.fake_cuda()
    torch.set_num_threads(1)
    model, tokens, _ = B.cpu_model()
    B.native.op_observer()  # graphscope run loads it at install, before the program
    with torch.inference_mode():
        model(tokens[:64])
    full: list[tuple[int, float]] = []
    per: list[float] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            note.t = time.perf_counter()  # type: ignore[attr-defined]
        elif info["generation"] == 2:
            full.append((len(per), round((time.perf_counter() - note.t) * 1e3, 1)))  # type: ignore[attr-defined]

    stack = settled_heap() if variant == "watch_settled" else None
    if stack is not None:
        stack.__enter__()
    gc.callbacks.append(note)
    w = undo = None
    if variant != "plain":
        w = B.W.GraphWatch(B.CaptureConfig(mode="run", replays=0))
        undo = B.patch_cuda_graph(w)
    graphs = []
    with torch.inference_mode():
        for _ in range(5):
            t = time.perf_counter()
            g = torch.cuda.CUDAGraph()
            graphs.append(g)
            if w is not None:
                g.capture_begin()
            model(tokens[:64])
            if w is not None:
                g.capture_end()
            per.append(round((time.perf_counter() - t) * 1e3, 2))
    gc.callbacks.remove(note)
    if undo is not None:
        undo()
        w._close_window()
        w._release_batch()  # nn.Module.__call__ as found (the hooks hold the meter's marks)
    if stack is not None:
        stack.__exit__(None, None, None)
    print(f"{variant:14s} captures ms {per}  full collections (capture #, ms) {full}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    for _ in range(3):
        for v in ("plain", "watch", "watch_settled"):
            subprocess.run([sys.executable, __file__, "--child", v], check=True)


if __name__ == "__main__":
    main()
