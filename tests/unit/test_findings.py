"""Ranked findings: savings per replay, time claimed once, the floor, and the command that
tries each (recorded H200 fixtures and synthetic graphs with known answers)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from graphscope.analysis.diagnosis import diagnose
from graphscope.model.bundle import Bundle
from graphscope.model.bundle_io import read_bundle
from graphscope.model.graph import CapturedGraph, Node
from tests.conftest import DATA

GID = 1 << 32


def _b(name):
    return read_bundle(os.path.join(DATA, name))


def tiny_chain(n, dur=1_000, gap=300, module=None, manifest=None, name="g"):
    """``n`` elementwise kernels of ``dur`` ns (or a list, one per kernel) in one chain,
    ``gap`` ns apart, 3 replays."""
    durs = dur if isinstance(dur, list) else [dur] * n
    nodes = [Node(name, i, GID + i, "kernel", kernel="elementwise_kernel", grid=(4, 1, 1),
                  block=(128, 1, 1), durations_ns=(durs[i],) * 3,
                  annotation={"module_name": module} if module else {}) for i in range(n)]
    evs = []
    for r in range(3):
        t = 10_000_000 * r
        for i in range(n):
            evs.append({"graph": name, "replay": r, "exec_node_id": GID + i, "start_ns": t,
                        "dur_ns": durs[i], "stream": 7})
            t += durs[i] + gap
    g = CapturedGraph(name, 1, 1, tuple(nodes), tuple((i, i + 1) for i in range(n - 1)))
    return Bundle("/x", manifest or {"mode": "run"}, (g,), 3, events=tuple(evs))


def test_thousands_of_tiny_kernels_without_modules_get_a_fusion_finding():
    # GIVEN 2,000 ~1 us kernels of a program (no modules), 0.3 us apart: idle is 23% of the
    # span... and a verdict-free graph once the gaps shrink to 0.1 us
    for gap in (300, 100):
        d = diagnose(tiny_chain(2_000, gap=gap))
        o = d.graphs[0]
        (f,) = d.findings.findings
        # THEN fusing them is the finding: 1,999 kernels, each its floor (1 us) and its gap
        assert f.kind == "fusion" and f.kernels == 1_999
        assert f.saving_ns == pytest.approx(1_999 * (1_000 + gap))
        assert f.saving_ns < o.span_ns and f.saving_pct == pytest.approx(
            100 * f.saving_ns / o.span_ns)
        assert f.floor_ns == 1_000 and f.gap_ns == gap
        # a program's graph: compiled by hand, not by graphscope capture
        assert f.action.kind == "by_hand" and f.action.by_hand == "compile_function"


def test_a_captured_model_is_told_the_try_compile_command():
    b = tiny_chain(50, module="L.blocks.0.act", manifest={
        "mode": "forward", "command": ["graphscope", "capture", "m.py", "--mode", "forward"]})
    (f,) = diagnose(b).findings.findings
    assert f.action.argv == ("graphscope", "capture", "m.py", "--mode", "forward",
                             "--try-compile", "L.blocks.0")
    # library kernels (GEMMs) and graphscope's pseudo modules are not fused
    for kernel, module in (("sm90_xmma_gemm_bf16", "L.fc"), ("elementwise_kernel", "(loss)")):
        g = b.graphs[0]
        nodes = tuple(dataclasses.replace(x, kernel=kernel, annotation={"module_name": module})
                      for x in g.nodes)
        b2 = dataclasses.replace(b, graphs=(dataclasses.replace(g, nodes=nodes),))
        assert not [f for f in diagnose(b2).findings.findings if f.kind == "fusion"]


def test_nothing_to_gain_above_noise_is_said():
    # long kernels back to back, and two small ones: fusing those saves under 2% of the span
    d = diagnose(tiny_chain(10, dur=[200_000] * 8 + [1_000, 1_000], gap=50))
    assert d.findings.findings == () and d.findings.nothing_above_noise
    assert d.findings.below_floor == 1
    # long kernels only: no candidate at all
    d = diagnose(tiny_chain(3, dur=200_000, gap=50))
    assert d.findings.nothing_above_noise and d.findings.below_floor == 0


def test_streams_and_fusion_claim_time_once_and_rank_by_saving():
    # gpt_step_eager (H200): stream-order-only edges and small kernels on the same path
    d = diagnose(_b("gpt_step_eager"))
    o = d.graphs[0]
    fs = d.findings.findings
    assert [f.kind for f in fs] == ["streams", "fusion"]
    assert fs[0].saving_ns >= fs[1].saving_ns
    assert sum(f.saving_ns for f in fs) <= o.span_ns
    # the fusion kept only what the streams finding left of its nodes' time
    assert fs[1].saving_ns + fs[1].shared_ns == pytest.approx(fs[1].predicted_ns)
    assert fs[0].action.argv[-2:] == ("--try-streams", "4")
    assert fs[0].action.argv[2:5] == ("sample_models/gpt.py", "--mode", "step")
    # every finding is over the floor: 2% of its graph's span
    assert all(f.saving_pct >= d.findings.floor_pct for f in fs)


def test_a_measured_try_streams_gain_is_what_the_finding_claims():
    d = diagnose(_b("branches_try_streams"))
    (f,) = d.findings.findings
    m = d.graphs[0].what_if_measured
    assert f.kind == "streams" and f.measured_ns == pytest.approx(m.one_stream_ns - m.span_ns)
    assert f.saving_ns == pytest.approx(f.measured_ns)
    assert f.predicted_ns == pytest.approx(d.graphs[0].what_if.gain_ns)
    assert f.evidence.edges == ((95, 96),) and f.evidence.edge_count == 1


def test_run_bundles_say_what_to_try_by_hand():
    # run_decode (H200): a program's decode graphs; fusion is by hand, named by module
    d = diagnose(_b("run_decode"))
    fs = d.findings.findings
    assert fs and all(f.action.kind == "by_hand" for f in fs)
    assert {f.action.target for f in fs} == {"L.blocks.*"}


def test_a_host_gap_seen_twice_is_no_finding_and_its_verdict_says_its_figure():
    # GIVEN the decode loop run by the program (run_decode, H200): two gaps between replays,
    # 3.16 ms median, measured between a 75 us and a 94 us graph
    d = diagnose(_b("demo/run_decode"))
    btw = d.between_replays
    assert btw is not None and btw.pairs == 2 and btw.note is None
    # THEN no host finding is listed from two gaps
    assert "host" not in [f.kind for f in d.findings.findings]
    (u,) = [f for f in d.findings.under_floor if f.kind == "host"]
    # AND its figure is no more than the time between replays per replay, its share of one
    # replay's start to the next's
    assert u.saving_ns <= btw.total_gap_ns / btw.pairs
    assert u.saving_pct == pytest.approx(100 * u.saving_ns / btw.median_cycle_ns)
    assert btw.median_cycle_ns > btw.median_gap_ns
    # AND the host-bound verdict says that figure, not listed
    (v,) = [v for v in d.verdicts if v.code == "host_bound"]
    assert v.listed is False and v.unlisted == "few_gaps" and v.saving_ns == u.saving_ns
