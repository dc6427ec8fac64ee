"""bench/bench_ladder.py's statistics over its per-process results (the GPU bench itself needs
an H200): what ``run`` added by position in the loop, and the ratio with each loop divided by
its process's own plain loop before it (the ladder on unwatched graphs in the same process)."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bench_ladder as B  # noqa: E402


def test_added_by_position_sums_the_paired_medians_of_first_op_and_later_captures():
    plain = [{"each_capture_ms": [7.0, 4.0, 4.0, 4.0, 4.0]},
             {"each_capture_ms": [9.0, 6.0, 6.0, 6.0, 6.0]},
             {"each_capture_ms": [7.0, 4.0, 4.0, 4.0, 4.0]}]
    run = [{"each_capture_ms": [15.0, 6.0, 4.5, 4.5, 4.5]},
           {"each_capture_ms": [17.0, 8.0, 7.0, 7.0, 7.0]},
           {"each_capture_ms": [15.0, 6.0, 4.5, 4.5, 4.5]}]
    got = B.added_by_position(plain, run)
    assert got["first"] == 8.0 and got["op_captures_after_first"] == 2.0
    assert got["rest"] == 1.5 and got["rest_per_capture"] == 0.5
    assert got["plain_rest_per_capture"] == 4.0
    assert B.added_by_position([{}], [{}]) == {}


def test_an_in_process_ratio_compares_processes_that_got_hosts_of_different_speed():
    # GIVEN a plain process on a fast host and a run process on a host 1.6x slower: the raw
    # ratio says 2.0x, the loops divided by their own process's plain loop before them 1.25x
    plain = [{"capture_s": 0.30, "plain_loops_s": [0.30, 0.27]}]
    run = [{"capture_s": 0.60, "plain_loops_s": [0.48, 0.70]}]
    assert run[0]["capture_s"] / plain[0]["capture_s"] == 2.0
    # (divided by the loop before it: the loop after the replays is not a clean reference)
    assert B.in_process_ratios(plain, run) == [pytest.approx(1.25)]
    # AND a pair without plain loops (an older result) is left out, not guessed
    assert B.in_process_ratios(plain + [{"capture_s": 0.3}], run + [{"capture_s": 0.4}]) == [
        pytest.approx(1.25)]


def test_cpu_lists_parse_as_taskset_writes_them():
    assert B.parse_cpus("8-11") == {8, 9, 10, 11}
    assert B.parse_cpus("2,4,6-7") == {2, 4, 6, 7}


def test_the_median_interval_holds_the_median_and_widens_with_the_spread():
    steady = [1.20, 1.21, 1.19, 1.20, 1.22, 1.18]
    noisy = [0.74, 1.55, 1.02, 1.36, 0.91, 1.46]
    lo, hi = B.median_interval(steady)
    assert lo <= 1.20 <= hi and hi - lo <= 0.03
    nlo, nhi = B.median_interval(noisy)
    assert nlo <= B.statistics.median(noisy) <= nhi and nhi - nlo > 0.3
    assert B.median_interval(noisy) == [nlo, nhi]  # a fixed seed: the same interval again
    assert B.median_interval([1.0, 2.0]) is None


def test_in_process_added_compares_each_capture_with_the_same_bucket_just_before():
    # GIVEN two run processes at different host speeds: each capture against the same bucket
    # of the process's own unwatched ladder just before its loop
    fast = {"each_capture_ms": [12.0, 5.0, 4.4, 4.5, 4.4],
            "plain_loop_each_ms": [5.0, 4.0, 4.0, 4.0, 4.0]}
    slow = {"each_capture_ms": [16.0, 8.0, 6.8, 6.9, 6.8],
            "plain_loop_each_ms": [8.0, 6.0, 6.0, 6.0, 6.0]}
    got = B.in_process_added([fast, slow])
    assert got["processes"] == 2
    assert got["first_ms"] == pytest.approx(7.5)  # the median of 7 and 8
    assert got["op_captures_after_first_ms"] == pytest.approx(1.5)
    assert got["later_per_capture_ms"] == pytest.approx(0.6)  # median of 0.4 and 0.8
    assert got["later_ratio"] == pytest.approx((4.4 / 4.0 + 6.8 / 6.0) / 2, abs=1e-3)
    assert got["loop_ratio_all"] == [round(30.3 / 21, 3), round(44.5 / 32, 3)]
    assert got["loop_ratio_interval"] is None  # fewer than 3 processes: no interval
    # AND processes without both columns, or with columns of other lengths, are left out
    assert B.in_process_added([{"each_capture_ms": [1.0, 2.0, 3.0]}]) is None
    assert B.in_process_added([{**fast, "plain_loop_each_ms": [1.0]}, slow])["processes"] == 1
