"""Per-capture times of bench_ladder.py's 67-bucket ladder in fresh processes, plain and under
``graphscope run`` (and ``--no-ops``): is ``run``'s overhead in the first captures (one-time
costs: loading, a full garbage collection, CUPTI's first subscription) or in every capture?
Also lists the modules first imported between the loop's start and the program's end. Needs a
GPU: ``python3 bench/probes/first_capture_gpu.py`` (prints one line per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_ladder as B  # noqa: E402


def program() -> str:
    prog = B.PROGRAM.replace(
        "    t = time.perf_counter()\n    for bs in reversed(SIZES):",
        "    mods0 = set(sys.modules); per = []\n    t = time.perf_counter()\n"
        "    for bs in reversed(SIZES):\n        t_c = time.perf_counter()")
    prog = prog.replace("        graphs[bs] = g\n",
                        "        graphs[bs] = g\n        per.append(time.perf_counter() - t_c)\n")
    prog = prog.replace('print("RESULT", json.dumps({',
                        'print("RESULT", json.dumps({"per": [round(x * 1e3, 2) for x in per], '
                        '"new_mods": sorted(set(sys.modules) - mods0)[:60], ')
    assert "per.append" in prog and "new_mods" in prog
    return prog


def main() -> None:
    d = tempfile.mkdtemp()
    path = os.path.join(d, "ladder.py")
    with open(path, "w") as f:
        f.write(program())
    run = ["-m", "graphscope", "run", "-o", path + ".run", "--force", "--replays", "3"]
    for label, pre in [("plain", []), ("run", run), ("plain", []), ("run", run),
                       ("no-ops", run + ["--no-ops"])]:
        out = subprocess.run([sys.executable, *pre, path, "3", "20"], capture_output=True,
                             text=True)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")]
        if not line:
            print(label, "FAILED", out.stderr[-2000:])
            continue
        r = json.loads(line[0].split(" ", 1)[1])
        per = r["per"]
        print(f"{label}: loop {r['capture_s']:.3f} s, first 5 captures {per[:5]} ms, median "
              f"{sorted(per)[len(per) // 2]} ms, the rest {sum(per[5:]) / 1e3:.3f} s; "
              f"imported after the loop began: {r['new_mods'][:20]}", flush=True)


if __name__ == "__main__":
    main()
