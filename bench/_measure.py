"""Run a script or module in a fresh process and report its wall time and peak RSS."""

import subprocess
import sys

RUNNER = r"""
import resource, runpy, sys, time
t0 = time.perf_counter()
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    if e.code:
        raise
print("BENCH", time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      file=sys.stderr)
"""


def measure(argv):
    """argv[0] is a script path; returns {"wall_s", "peak_rss_mb"} of running it."""
    r = subprocess.run([sys.executable, "-c", RUNNER, *argv], capture_output=True, text=True)
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("BENCH ")]
    if r.returncode != 0 or not line:
        raise SystemExit(f"{argv[0]} failed: {r.stderr[-2000:]}")
    _, secs, rss_kb = line[0].split()
    return {"wall_s": float(secs), "peak_rss_mb": int(rss_kb) / 1024}


def write_json(path, obj):
    import json

    text = json.dumps(obj, indent=1)
    if path:
        with open(path, "w") as f:
            f.write(text)
    print(text)


def shuffled_rounds(variants, rounds, seed, warm=False, each=None):
    """Every variant (name -> callable) once per round, in an order shuffled per round (seeded),
    after one untimed call of each when ``warm``; ``each(round, name, result)`` sees every
    result. Returns {name: [results]}, a result of None left out (a child that failed)."""
    import random

    res = {k: [] for k in variants}
    if warm:
        for f in variants.values():
            f()
    random.seed(seed)
    for i in range(rounds):
        names = list(variants)
        random.shuffle(names)
        for k in names:
            r = variants[k]()
            if r is None:
                continue
            res[k].append(r)
            if each is not None:
                each(i, k, r)
    return res


def variant_probe(source, name, variants, rounds, seed, digits=3):
    """Write ``source`` to a temporary script ``name`` and run it once per variant per round, in
    fresh processes, shuffled (``python3 SCRIPT VARIANT``; it prints ``RESULT {...}``); print
    each result as ``ROUND VARIANT {...}``, then per variant ``MED VARIANT {...}``, the median of
    each numeric field. Returns {variant: [results]}."""
    import json
    import os
    import statistics
    import tempfile

    path = os.path.join(tempfile.mkdtemp(), name)
    with open(path, "w") as f:
        f.write(source)
    res = shuffled_rounds(
        {k: (lambda k=k: child_result([sys.executable, path, k], label=k)) for k in variants},
        rounds, seed, each=lambda i, k, r: print(i, k, json.dumps(
            {a: round(b, digits) if isinstance(b, float) else b for a, b in r.items()}),
            flush=True))
    for k, rs in res.items():
        if rs:
            num = [a for a in rs[0] if isinstance(rs[0][a], (int, float))
                   and not isinstance(rs[0][a], bool)]
            print("MED", k, json.dumps({a: round(statistics.median(r[a] for r in rs), digits)
                                        for a in num}), flush=True)
    return res


def child_result(cmd, env=None, label=""):
    """Run ``cmd`` in a fresh process; the JSON of its ``RESULT {...}`` line, or None (said on
    stdout with the end of its stderr)."""
    import json

    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")]
    if not line:
        print(label or cmd[-1], "FAILED", out.stderr[-2000:], flush=True)
        return None
    return json.loads(line[0].split(" ", 1)[1])
