"""bench/bench_watch_cpu.py, the CPU part of graphscope run's capture cost (the watch, its
session, module scopes, op observer and node counting, with CUDA faked), keeps running: one
round over the ladder's first 3 sizes, in a fresh process (the bench fakes CUDA process-wide)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_cpu_watch_bench_runs_and_reports_every_cause():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_watch_cpu.py"), "1",
                        "3"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert set(out) == {"plain", "watch", "watch_all_ops", "watch_causes_ms_per_capture"}
    assert out["plain"]["ratio"] == 1.0 and out["watch"]["loop_s"] > 0
    # graphscope's own steps of each capture, the graph read before capture_end among them
    causes = out["watch_causes_ms_per_capture"]
    # and graphscope's time inside the module calls it scoped (their count notes' driver
    # questions among it; faked here, still counted)
    assert {"site", "subscribe", "meter", "inspect", "unsubscribe", "module_calls",
            "count_queries"} <= set(causes)
    assert all(v > 0 for v in causes.values()), causes
    # all of graphscope's time in the patched capture_begin/capture_end holds its steps there
    steps = sum(v for k, v in causes.items()
                if k not in ("module_calls", "count_queries", "steps_total"))
    assert causes["steps_total"] >= steps * 0.999, causes
