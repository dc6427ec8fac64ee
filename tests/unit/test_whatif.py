"""The contention-aware what-if: occupancy rules, the mean-field simulation on small DAGs with
known answers, the interference term's calibration, and the prediction against spans
measured on the H200 (tests/data: the branches sample on one stream, on two by hand, and
re-captured by capture --try-streams)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from graphscope.analysis.dag import Dag
from graphscope.analysis.diagnosis import diagnose
from graphscope.analysis.occupancy import (
    ARCHS,
    Device,
    device_of,
    device_share,
    resident_blocks,
    worst_registers,
)
from graphscope.analysis.whatif import (
    PRIOR,
    Calibration,
    Resources,
    calibrate,
    overlap,
    simulate,
)
from graphscope.model.bundle_io import read_bundle
from graphscope.model.graph import CapturedGraph, Node
from tests.conftest import DATA

H200 = Device("NVIDIA H200", 132, (9, 0), "name_table")
NONE = Calibration("prior", 0.0, 0.0, 0.0, 0.0, 0, 0.0)


def _b(name):
    return read_bundle(os.path.join(DATA, name))


# ---------------------------------------------------------------- occupancy

def test_device_from_properties_name_table_or_assumed():
    assert device_of({"versions": {"gpu": "NVIDIA H200"}}).sm_count == 132
    a100 = device_of({"versions": {"gpu": "NVIDIA A100-SXM4-80GB"}})
    assert (a100.sm_count, a100.compute_capability, a100.source) == (108, (8, 0), "name_table")
    pcie = device_of({"versions": {"gpu": "NVIDIA H100 PCIe"}})
    assert pcie.sm_count == 114
    rec = device_of({"versions": {"gpu": "NVIDIA H200", "gpu_properties": {
        "sm_count": 120, "major": 9, "minor": 0}}})
    assert (rec.sm_count, rec.source) == (120, "properties")
    unknown = device_of({})
    assert unknown.source == "assumed" and unknown.sm_count == 132


def test_resident_blocks_follow_the_occupancy_rules():
    h = ARCHS[(9, 0)]
    # threads: 2048 per SM / 256 per block = 8 (32 registers: no register limit below it)
    assert resident_blocks(256, 0, 32, h) == 8
    # 64 registers per thread: 64 * 32 * 8 warps = 16384 per block -> 4 blocks
    assert resident_blocks(256, 0, 64, h) == 4
    # shared memory: 100 KiB + 1 KiB reserved per block -> 2 per SM (228 KiB)
    assert resident_blocks(128, 100 * 1024, 32, h) == 2
    # the block limit: 32 tiny blocks
    assert resident_blocks(32, 0, 16, h) == 32
    # worst case: as many registers as let one block fit; 255 at most
    assert worst_registers(1024, h) == 64 and worst_registers(64, h) == 255
    assert resident_blocks(1024, 0, None, h) == 1
    assert resident_blocks(64, 0, None, h) == 4  # 255 -> 256 per thread: 8 warps -> 4 blocks


def test_device_share_counts_waves():
    # one full wave of 8-per-SM blocks fills the device; 1.5 waves fill 75% on average
    assert device_share((132 * 8, 1, 1), (256, 1, 1), 0, 32, H200) == pytest.approx(1.0)
    assert device_share((132 * 12, 1, 1), (256, 1, 1), 0, 32, H200) == pytest.approx(0.75)
    assert device_share((1, 1, 1), (128, 1, 1), 0, 32, H200) == pytest.approx(1 / (132 * 16))
    assert device_share((0, 0, 0), (0, 0, 0), 0, None, H200) == 0.0


# ---------------------------------------------------------------- the simulation

def _res(sm, ce=None):
    sm = np.asarray(sm, float)
    return Resources(sm, sm, np.zeros(len(sm)) if ce is None else np.asarray(ce, float))


def test_overlap_phi_and_the_others_share():
    st, en = np.array([0.0, 5.0, 20.0]), np.array([10.0, 15.0, 30.0])
    phi, others = overlap(st, en, np.array([0.5, 0.2, 1.0]))
    assert phi.tolist() == pytest.approx([0.5, 0.5, 0.0])
    assert others.tolist() == pytest.approx([0.1, 0.25, 0.0])


def test_two_kernels_that_each_fill_the_device_take_the_sum():
    # two independent 10 us kernels, each a full wave: side by side they share the SMs
    solo, lat = np.array([10_000.0, 10_000.0]), np.zeros(2)
    s = simulate([0, 1], np.zeros(0, np.int64), np.zeros(0, np.int64), solo, lat,
                 _res([1.0, 1.0]), NONE)
    assert s.solo_span_ns == 10_000
    assert s.span_ns == pytest.approx(20_000, rel=0.05)
    # kernels of a tenth of the device each: they overlap for free
    s = simulate([0, 1], np.zeros(0, np.int64), np.zeros(0, np.int64), solo, lat,
                 _res([0.1, 0.1]), NONE)
    assert s.span_ns == pytest.approx(10_000)


def test_interference_and_latency_terms_apply_to_overlapped_nodes_only():
    # 0 -> 1 and an independent 2: nodes 0 and 2 overlap
    solo, lat = np.array([10_000.0, 10_000.0, 10_000.0]), np.array([0.0, 1_000.0, 0.0])
    cal = Calibration("prior", 0.1, 500.0, 400.0, 0.0, 0, 50.0)
    s = simulate([0, 1, 2], np.array([0]), np.array([1]), solo, lat, _res([0.1] * 3), cal)
    # 0 and 2 side by side: ~10% + 0.5 us longer; node 1 follows 0 after its latency
    assert 10_000 < s.end[2] <= 11_500 + 1
    assert s.span_ns > 21_000 and s.interference_on_path_ns > 0
    # nothing side by side: no term at all
    s = simulate([0, 1, 2], np.array([0, 1]), np.array([1, 2]), solo, lat, _res([0.1] * 3),
                 cal)
    assert s.span_ns == pytest.approx(31_000) and s.interference_on_path_ns == 0


# ---------------------------------------------------------------- calibration

def test_calibration_from_a_bundles_concurrent_nodes():
    # branches_2s_forward (H200): the branches on two streams; its memset, GEMM and ReLU
    # signatures ran both alone (before the side stream started) and beside the other branch
    b = _b("branches_2s_forward")
    g = b.graphs[0]
    dag = Dag(g)
    from graphscope.analysis.replays import event_columns

    rp, pos, st, en, _ = event_columns(b.events, dag.exec_ids)
    sig = [(x.type, x.kernel, x.grid, x.block, x.smem, x.bytes) for x in g.nodes]
    cal = calibrate(sig, rp, pos, st, en)
    assert cal.source == "bundle" and cal.groups == 3
    # a node beside others: a few hundred ns and a few % longer (the prior's order)
    assert 200 < cal.added_ns < 1_000 and 0 <= cal.slowdown_per_overlap < 0.1
    # a one-stream bundle has nothing to calibrate from
    b1 = _b("branches_forward")
    rp, pos, st, en, _ = event_columns(b1.events, Dag(b1.graphs[0]).exec_ids)
    assert calibrate(sig, rp, pos, st, en) is PRIOR


# ---------------------------------------------------------------- against the H200

def test_branches_prediction_lands_on_the_spans_measured_on_two_streams():
    """branches_forward (one stream) predicted on more streams, against the same model
    measured on two: by hand (branches_2s_forward) and by capture --try-streams 4
    (branches_try_streams, alternated with its one-stream graph)."""
    one = diagnose(_b("branches_forward")).graphs[0]
    two = diagnose(_b("branches_2s_forward")).graphs[0]
    tried = diagnose(_b("branches_try_streams")).graphs[0]
    wi = one.what_if
    assert wi is not None and wi.streams == 2 and wi.calibration.source == "prior"
    measured = [two.span_ns, tried.what_if_measured.span_ns]
    for m in measured:
        assert abs(wi.predicted_span_ns / m - 1) <= 0.15, (wi.predicted_span_ns, m)
        assert wi.low_ns <= m <= wi.high_ns, (wi.low_ns, m, wi.high_ns)
    # the bound without contention promised more than either measurement gives
    assert wi.no_contention_ns < min(measured)
    # the --try-streams bundle's own prediction, scaled to its alternated one-stream span
    m = tried.what_if_measured
    assert m.within_interval and abs(m.off_prediction_pct) <= 15


def test_the_model_reproduces_a_measured_two_stream_span():
    # the two-stream bundle modelled as captured (its own streams, durations deflated by its
    # calibrated term, then simulated again) comes back to its measured span
    from graphscope.analysis.diagnosis.graph import measure
    from graphscope.analysis.replays import launches_of, node_gaps
    from graphscope.analysis.whatif import _signatures, deflate, resources

    b = _b("branches_2s_forward")
    g = b.graphs[0]
    dag = Dag(g)
    w = measure(b, g, dag, b.events, launches_of(b), {})
    rp, pos, st, en = w.cols
    cal = calibrate(_signatures(dag), rp, pos, st, en)
    res = resources(dag, H200)
    lat = node_gaps(dag, *w.cols)
    s_, e_ = np.full(dag.n, np.nan), np.full(dag.n, np.nan)
    s_[pos], e_[pos] = st, en
    solo, lat_solo = deflate(w.d, lat, s_, e_, res, cal)
    assert (solo <= w.d + 1e-9).all() and solo.sum() < w.d.sum()
    model = simulate(dag.order, dag.src, dag.dst, solo, lat_solo, res, cal, path=False)
    span = float(np.median(w.spans))
    assert abs(model.span_ns / span - 1) <= 0.05, (model.span_ns, span)


def test_a_bundle_without_its_gpu_name_says_the_device_was_assumed():
    b = _b("branches_forward")
    b = dataclasses.replace(b, manifest={**b.manifest, "versions": {}})
    wi = diagnose(b).graphs[0].what_if
    assert wi.device_source == "assumed" and wi.registers == "worst_case"


def test_what_if_of_a_synthetic_graph_is_between_its_bound_and_its_span():
    # GIVEN two chains of 20 x 10 us kernels captured on one stream (the second writes fresh
    # outputs into the blocks the first freed), 1 us dependency gaps
    n = 40
    nodes, evs = [], []
    t = 0
    for i in range(n):
        chain = i // 20
        src = (1 << 20) * chain + (i % 20) * 4096
        reads = [(src, src + 4096)] if i % 20 else [(9 << 30, (9 << 30) + 4096)]
        nodes.append(Node("g", i, (1 << 32) + i, "kernel", grid=(64, 1, 1), block=(128, 1, 1),
                          durations_ns=(10_000,) * 3, reads=tuple(reads),
                          writes=((src + 4096, src + 8192),)))
        t += 1_000
        evs.append({"graph": "g", "replay": 0, "exec_node_id": (1 << 32) + i, "start_ns": t,
                    "dur_ns": 10_000, "stream": 7})
        t += 10_000
    g = CapturedGraph("g", 1, 1, tuple(nodes), tuple((i, i + 1) for i in range(n - 1)))
    from graphscope.model.bundle import Bundle

    o = diagnose(Bundle("/x", {"versions": {"gpu": "NVIDIA H200"}}, (g,), 3,
                        events=tuple(evs))).graphs[0]
    wi = o.what_if
    # THEN the chains go side by side: near half the span, above the no-contention bound
    assert o.stream_order.stream_order_only_edges == 1 and wi.streams == 2
    assert wi.no_contention_ns < wi.predicted_span_ns < 0.6 * o.span_ns
    assert wi.low_ns <= wi.predicted_span_ns <= wi.high_ns


def test_a_training_step_predicted_on_the_streams_try_streams_measured():
    """try_streams_step (H200): the branches sample's training step (forward, backward,
    optimizer) captured with --try-streams 2; the what-if plans as many streams as were
    measured."""
    o = diagnose(_b("try_streams_step")).graphs[0]
    wi, m = o.what_if, o.what_if_measured
    assert wi.max_streams == m.max_streams == 2 and wi.streams == 2
    # within 15% of the span measured on two streams, and a gain predicted where one was found
    assert abs(m.off_prediction_pct) <= 15, m
    assert wi.gain_pct > 0 and m.gain_pct > 0


def test_fusion_saving_against_a_measured_compile():
    """try_compile_chain (H200): 128 ~1 us elementwise kernels, compiled by --try-compile L
    into one kernel; the fusion finding predicted from the eager graph alone lands within 25%
    of the saving measured (compile.json: eager against compiled span)."""
    import json

    from graphscope.analysis.diagnosis import diagnose as diag

    d = diag(_b("try_compile_chain"))
    (f,) = d.findings.findings
    with open(os.path.join(DATA, "try_compile_chain", "compile.json")) as fh:
        g = json.load(fh)["graphs"][0]
    measured = g["eager"]["median_span_ns"] - g["compiled"]["median_span_ns"]
    assert f.kind == "fusion" and f.kernels == 127
    assert abs(f.saving_ns / measured - 1) <= 0.25, (f.saving_ns, measured)
    assert f.action.argv[-2:] == ("--try-compile", "L")


def test_recorded_registers_replace_the_worst_case():
    # GIVEN the branches GEMM (160 blocks of 64 threads, 6.75 KiB shared memory): no registers
    # recorded, the worst case (255 per thread: 4 blocks per SM) and the best (32 per thread:
    # shared memory's 29 blocks) differ
    from graphscope.analysis.occupancy import resources

    g = _b("branches_forward").graphs[0]
    gemm = next(i for i, n in enumerate(g.nodes) if n.type == "kernel" and n.grid == (1, 32, 5))
    r = resources(Dag(g), H200)
    assert r.registers_assumed
    assert r.sm_worst[gemm] == pytest.approx(160 / (132 * 4))
    assert r.sm_best[gemm] == pytest.approx(160 / (132 * 29))
    # WHEN a node carries its kernel's registers per thread (CUPTI's registersPerThread)
    node = dataclasses.replace(g.nodes[gemm])
    node.registers = 40  # 40 -> 1280 per warp, 2 warps a block: 25 blocks per SM
    nodes = g.nodes[:gemm] + (node,) + g.nodes[gemm + 1:]
    r = resources(Dag(dataclasses.replace(g, nodes=nodes)), H200)
    # THEN that kernel's share is the same in both cases
    assert r.sm_worst[gemm] == r.sm_best[gemm] == pytest.approx(160 / (132 * 25))


def test_a_kernels_registers_travel_with_its_node_and_are_checked():
    from graphscope._errors import BundleError
    from graphscope.model.bundle_check import _check_node
    from graphscope.model.graph import Node

    # GIVEN a kernel node whose capture asked the driver for its registers per thread
    g = _b("branches_forward").graphs[0]
    k = next(n for n in g.nodes if n.type == "kernel")
    node = dataclasses.replace(k, registers=40)
    d = node.to_json()
    # THEN graph.json keeps them, and reading it back gives them to the occupancy model
    assert d["registers"] == 40
    assert Node.from_json(g.name, d, ()).registers == 40
    # AND a node without them (an older bundle) has none, and writes none
    assert "registers" not in k.to_json()
    assert Node.from_json(g.name, k.to_json(), ()).registers is None
    # AND a value no GPU has is refused, naming the node
    _check_node({**d, "registers": 40}, "graph.json", g.name)
    with pytest.raises(BundleError, match=r"node \d+ registers must be an integer in \[0, 255\]"):
        _check_node({**d, "registers": 300}, "graph.json", g.name)


def test_event_columns_read_streams_recorded_missing_or_null():
    from graphscope.analysis.replays import event_columns

    ids = np.array([10, 11], np.int64)
    base = {"replay": 0, "start_ns": 100, "dur_ns": 5}
    evs = [{**base, "exec_node_id": 10, "stream": 7}, {**base, "exec_node_id": 11}]
    assert event_columns(evs, ids)[4].tolist() == [7, -1]
    # a stream recorded as null is no stream either (the slower walk)
    evs[0]["stream"] = None
    rp, pos, st, en, sm = event_columns(evs, ids)
    assert sm.tolist() == [-1, -1] and pos.tolist() == [0, 1] and en.tolist() == [105, 105]
