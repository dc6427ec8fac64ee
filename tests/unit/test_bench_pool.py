"""bench/pool_annotation_runs.py on the H200 runs committed in docs/results (overhead target)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "docs", "results")
POOL = os.path.join(ROOT, "bench", "pool_annotation_runs.py")
RUN_B = os.path.join(RESULTS, "bench_annotation_2026-11-30_shared_scope_dicts.json")
RUN_C = os.path.join(RESULTS, "bench_annotation_2026-11-30_shared_scope_dicts_host2.json")
RUN_AA = os.path.join(RESULTS, "bench_annotation_2026-11-30_shared_scope_dicts_aa.json")


def pool(*args):
    return subprocess.run([sys.executable, POOL, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_one_run_pooled_is_that_runs_own_figure():
    # (to 1e-3: the JSON keeps each round's times to the microsecond)
    r = pool(RUN_B)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    with open(RUN_B) as f:
        run = json.load(f)
    assert got["rounds"] == len(run["rounds_ms_wall_cpu"])
    for name in ("annotations", "with_ops"):
        assert got["flatness"][name]["relative_to_mean"] == pytest.approx(
            run["flatness"][name]["relative_to_mean"], rel=1e-3)
    for row in run["rows"]:
        assert got["columns"][str(row["depth"])]["annotated"]["paired_overhead_ratio"] == \
            pytest.approx(row["paired_overhead_ratio"], rel=1e-3)


def test_two_runs_pool_their_rounds(tmp_path):
    out = tmp_path / "pooled.json"
    r = pool(RUN_B, RUN_C, "--out", str(out))
    assert r.returncode == 0, r.stderr
    got = json.loads(out.read_text())
    assert got["rounds"] == 160 and list(got["columns"]) == ["1", "4", "16"]
    lo, hi = got["flatness"]["annotations"]["max_deviation_ci95"]
    assert lo <= got["flatness"]["annotations"]["max_deviation"] <= hi


def test_runs_with_other_columns_are_refused():
    r = pool(RUN_B, RUN_AA)
    assert r.returncode != 0
    want = "shared_scope_dicts_aa.json: columns ['1', '1#2', '1#3'] differ from ['1', '4', '16']"
    assert want in r.stderr
