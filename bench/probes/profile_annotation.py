"""Where an annotated capture's time goes: cProfile of bench_annotation's capture (issue 15).

python3 bench/probes/profile_annotation.py [depth] [ops]   prints the top functions by own time
of one annotated capture after warm-ups (ops: record_ops=True), and the plain capture's time.
"""

import cProfile
import os
import pstats
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_annotation as B  # noqa: E402


def main():
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    ops = len(sys.argv) > 2 and sys.argv[2] == "ops"
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    model = B.Deep(depth).cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            B.step(model, x)
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(3):
        B.capture(model, x, False)
        B.capture(model, x, True, record_ops=ops)
    plain = min(B.capture(model, x, False)[1] for _ in range(5))
    annot = min(B.capture(model, x, True, record_ops=ops)[1] for _ in range(5))
    print(f"depth {depth} ops {ops}: plain {plain * 1e3:.1f} ms, annotated {annot * 1e3:.1f} ms")
    prof = cProfile.Profile()
    prof.enable()
    B.capture(model, x, True, record_ops=ops)
    prof.disable()
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats("graphscope", 30)


if __name__ == "__main__":
    main()
