"""Hardware counters: PM samples -> nodes by time overlap, modules, phases, verdicts;
counters.json in the bundle; the report's Counters section and diff deltas. CPU only."""

import json
import os
import shutil

import numpy as np
import pytest

from graphscope.analysis import counters as ct

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
US = 1000


def _samples(n, values, t0=0, dt=20 * US):
    start = np.arange(n, dtype=np.int64) * dt + t0
    return ct.Samples(start, start + dt, {k: np.asarray(v, dtype=float) for k, v in values.items()})


def _one(nc, nid):
    i = int(np.nonzero(nc.node_ids == nid)[0][0])
    return ct.rates(nc.time_ns[i], {k: v[i] for k, v in nc.quantity.items()}), i


def test_serialized_nodes_spanning_whole_samples_are_exact():
    s = _samples(4, {"dram_pct": [80, 80, 10, 10], "sm_active_pct": [50, 50, 100, 100],
                     "dram_read_bytes": [1e6, 1e6, 2e5, 2e5]})
    nc = ct.attribute(s, [1, 2], [0, 40 * US], [40 * US, 80 * US])
    r1, i1 = _one(nc, 1)
    r2, _ = _one(nc, 2)
    assert r1["dram_pct"] == 80 and r1["sm_active_pct"] == 50
    assert r2["dram_pct"] == 10 and r2["sm_active_pct"] == 100
    assert r1["dram_GBps"] == pytest.approx(2e6 / 40e3, rel=1e-6)
    assert nc.shared_ns[i1] == 0 and nc.concurrent_ns[i1] == 0
    assert ct.verdict(r1) == "memory bound" and ct.verdict(r2) == "compute bound"


def test_sample_overlapping_two_nodes_splits_by_overlap_time():
    # one 20 us sample: node 1 runs 5 us, node 2 15 us; 4 MB read in the sample
    s = _samples(1, {"dram_read_bytes": [4e6], "dram_pct": [40], "warps_active_pct": [30]})
    nc = ct.attribute(s, [1, 2], [0, 5 * US], [5 * US, 20 * US])
    i1 = int(np.nonzero(nc.node_ids == 1)[0][0])
    i2 = int(np.nonzero(nc.node_ids == 2)[0][0])
    assert nc.quantity["dram_read_bytes"][i1] == pytest.approx(1e6)
    assert nc.quantity["dram_read_bytes"][i2] == pytest.approx(3e6)
    # the same rate for both (the sample cannot tell them apart), and flagged as shared
    assert _one(nc, 1)[0]["dram_pct"] == _one(nc, 2)[0]["dram_pct"] == 40
    assert nc.shared_ns[i1] == 5 * US and nc.shared_ns[i2] == 15 * US


def test_idle_part_of_a_sample_goes_to_the_node_for_elapsed_metrics_only():
    # the node runs 10 us of a 20 us sample: an elapsed rate of 30 % over the sample is 60 %
    # while the node ran; an active-normalized rate is already the node's
    s = _samples(1, {"dram_pct": [30], "warps_active_pct": [40]})
    nc = ct.attribute(s, [7], [0], [10 * US])
    r, _ = _one(nc, 7)
    assert r["dram_pct"] == 60 and r["warps_active_pct"] == 40


def test_concurrent_nodes_are_flagged_approximate():
    s = _samples(3, {"dram_pct": [20, 20, 20]})
    nc = ct.attribute(s, [1, 2, 3], [0, 10 * US, 45 * US], [30 * US, 40 * US, 60 * US])
    conc = dict(zip(nc.node_ids.tolist(), nc.concurrent_ns.tolist()))
    assert conc == {1: 20 * US, 2: 20 * US, 3: 0}


def test_concurrency_sweep_counts_union_not_sum():
    # node 0 overlapped by two others whose overlaps coincide: union 10 us, not 20
    c = ct._concurrent(np.array([0, 10, 10]), np.array([30, 20, 20]))
    assert c.tolist() == [10, 10, 10]


def test_events_of_several_replays_accumulate_per_node():
    s = _samples(4, {"dram_pct": [90, 0, 70, 0]})
    nc = ct.attribute(s, [5, 5], [0, 40 * US], [20 * US, 60 * US])
    r, i = _one(nc, 5)
    assert nc.time_ns[i] == 40 * US and r["dram_pct"] == 80


def test_stale_and_empty_samples_are_dropped():
    s = ct.Samples(np.array([-10**9, 0, 20, 40]), np.array([20, 20, 40, 40]),
                   {"dram_pct": np.array([1.0, 2.0, 3.0, 4.0])})
    clean, dropped = s.clean()
    assert dropped == 2 and clean.start_ns.tolist() == [0, 20]


def _real():
    with open(os.path.join(DATA, "pm_samples_gemm_slice.json")) as f:
        cols = json.load(f)
    return ct.Samples.from_columns(cols)


def test_real_h200_gemm_samples_read_compute_bound():
    """The probe's real samples (bf16 8192^3 GEMM on the H200): a node over the GEMM's
    samples reads compute bound; a node in the idle lead-in reads latency bound."""
    samples, dropped = _real().clean()
    assert dropped == 1  # CUPTI's stale first sample, 1.3 s long
    s0, e = samples.start_ns, samples.end_ns
    gemm = (int(s0[27]), int(e[-1]))
    tiny = (int(s0[5]) + 2000, int(s0[5]) + 5000)
    nc = ct.attribute(samples, [1, 2], [gemm[0], tiny[0]], [gemm[1], tiny[1]])
    g, _ = _one(nc, 1)
    t, _ = _one(nc, 2)
    assert ct.verdict(g) == "compute bound", g
    assert g["tensor_pct"] > 90 and g["dram_pct"] < 40
    assert ct.verdict(t) == "latency bound", t


# ------------------------------------------------------------------ bundle, report, diff
def _bundle_with_counters(tmp_path, name="mlp_step", dram=85.0, sm=40.0):
    """A recorded bundle plus a counters.json made by attributing synthetic samples over its
    work nodes laid out one after another (each node's median duration)."""
    from graphscope.model.bundle_io import read_bundle

    dst = tmp_path / name
    shutil.copytree(os.path.join(DATA, name), dst)
    b = read_bundle(str(dst))
    work = [n for n in b.work_nodes() if n.durations_ns]
    dur = np.array([max(1, int(np.median(n.durations_ns))) for n in work], dtype=np.int64)
    st = np.concatenate([[0], np.cumsum(dur)[:-1]])
    total = int(st[-1] + dur[-1])
    n = -(-total // 1000)
    s = _samples(n, {"dram_pct": [dram] * n, "sm_active_pct": [sm] * n,
                     "warps_active_pct": [20] * n, "dram_read_bytes": [1e5] * n}, dt=1000)
    s.end_ns[-1] = total  # the samples cover the nodes exactly: no idle time to fold in
    nc = ct.attribute(s, [x.exec_node_id for x in work], st, st + dur)
    data = ct.to_json(nc, meta={"method": "pm_sampling", "replays": 1, "interval_ns": 1000,
                                "samples": n, "samples_dropped": 0, "metrics": {}})
    (dst / "counters.json").write_text(json.dumps({"schema_version": 1, **data}))
    return str(dst), b


def test_counters_json_round_trip_and_module_aggregation(tmp_path):
    from graphscope.model.bundle_files import read_counters

    path, b = _bundle_with_counters(tmp_path)
    data = read_counters(path)
    assert data is not None
    a = ct.analyze(b, data)
    assert a["modules"] and a["phases"] and a["nodes"]
    for row in a["modules"]:
        assert row["dram_pct"] == pytest.approx(85.0, abs=0.05)
        assert row["verdict"] == "memory bound"
    top = [r for r in a["modules"] if r["level"] == 0]
    assert sum(r["time_ns"] for r in top) == pytest.approx(
        sum(r["time_ns"] for r in a["phases"]), rel=1e-6)


def test_read_counters_absent_is_none_and_bad_is_one_line(tmp_path):
    from graphscope._errors import GraphscopeError
    from graphscope.model.bundle_files import read_counters

    path, _ = _bundle_with_counters(tmp_path)
    data = json.loads(open(os.path.join(path, "counters.json")).read())
    data["nodes"]["time_ns"] = data["nodes"]["time_ns"][:-1]
    with open(os.path.join(path, "counters.json"), "w") as f:
        json.dump(data, f)
    with pytest.raises(GraphscopeError, match="counters.json.*time_ns"):
        read_counters(path)
    assert read_counters(os.path.join(DATA, "mlp_step")) is None


def test_report_shows_counters_section(tmp_path, capsys):
    from graphscope.cli.main import main

    path, _ = _bundle_with_counters(tmp_path)
    assert main(["report", path, "--json"]) == 0
    c = json.loads(capsys.readouterr().out)["counters"]
    assert c["modules"][0]["verdict"] == "memory bound"
    assert main(["report", path]) == 0
    out = capsys.readouterr().out
    assert "Counters" in out and "memory bound" in out
    # without counters.json: no section
    assert main(["report", os.path.join(DATA, "mlp_step"), "--json"]) == 0
    assert "counters" not in json.loads(capsys.readouterr().out)


def test_diff_counters_deltas(tmp_path, capsys):
    from graphscope.cli.main import main

    a, _ = _bundle_with_counters(tmp_path / "a", dram=85.0, sm=40.0)
    b, _ = _bundle_with_counters(tmp_path / "b", dram=30.0, sm=90.0)
    d = ct.diff(ct.analyze(*_read(a)), ct.analyze(*_read(b)))
    assert d and all(r["d_dram_pct"] == pytest.approx(-55, abs=0.1) for r in d)
    assert {(r["verdict_a"], r["verdict_b"]) for r in d} == {("memory bound", "compute bound")}
    assert main(["diff", a, b, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counters"][0]["verdict_b"] == "compute bound"
    assert main(["diff", a, b]) == 0
    out = capsys.readouterr().out
    assert "Counters A → B" in out and "memory bound →" in out


def _read(path):
    from graphscope.model.bundle_files import read_counters
    from graphscope.model.bundle_io import read_bundle

    return read_bundle(path), read_counters(path)


# ------------------------------------------------------------------ capture side (faked CUPTI)
def _fake_cupti(monkeypatch, fail_first=False):
    """native.tracing / pm_sampling replaced: two nodes of one graph (plus a node of no
    captured graph) traced, 20 us samples over them; the first PM setup may fail."""
    import contextlib

    import torch

    from graphscope import native
    from graphscope._errors import CuptiError
    from graphscope.native import pmsampling

    monkeypatch.setattr(pmsampling, "pm_sampling_why", lambda: "")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    calls = {"setup": [], "replays": 0}
    a, b, other = (1 << 32) | 1, (1 << 32) | 2, (9 << 32) | 1
    n = 3
    z = np.zeros(n, dtype=np.uint32)
    recs = native.ActivityRecords(
        kind=np.zeros(n, dtype=np.int32), start_ns=np.array([0, 40, 80], dtype=np.uint64) * US,
        end_ns=np.array([40, 80, 100], dtype=np.uint64) * US, device=z, stream=z,
        correlation=z, graph_id=z, graph_node_id=np.array([a, b, other], dtype=np.uint64),
        grid=np.zeros((n, 3), dtype=np.int32), block=np.zeros((n, 3), dtype=np.int32),
        name_idx=np.zeros(n, dtype=np.int32), bytes=np.zeros(n, dtype=np.uint64), names=[],
        dropped=0)

    @contextlib.contextmanager
    def tracing():
        out = []
        yield out
        out.append(recs)

    @contextlib.contextmanager
    def pm_sampling(metrics, **kw):
        calls["setup"].append((list(metrics), kw))
        if fail_first and len(calls["setup"]) == 1:
            raise CuptiError("cuptiProfilerHostConfigAddMetrics: CUPTI_ERROR_INVALID_PARAMETER",
                             1)
        out = []
        yield out
        start = np.arange(5, dtype=np.uint64) * 20 * US
        vals = {m: np.where(np.arange(5) < 2, 90.0, 10.0) for m in metrics}
        out.append(pmsampling.PmSamples(start, start + 20 * US,
                                    np.stack([vals[m] for m in metrics], axis=1), list(metrics),
                                    False, 0, "GH100"))

    monkeypatch.setattr(native, "tracing", tracing)
    monkeypatch.setattr(pmsampling, "pm_sampling", pm_sampling)

    def replay():
        calls["replays"] += 1

    return calls, replay, {a: "g", b: "g"}


def test_collect_attributes_dedicated_replays_to_the_graphs_work_nodes(monkeypatch):
    from graphscope.capture.counters import collect

    calls, replay, ids = _fake_cupti(monkeypatch)
    data = collect(replay, ids, 4)
    assert calls["replays"] == 2 + 4  # one untraced, one timed for the budget, then 4 sampled
    assert data["nodes"]["exec_node_id"] == sorted(ids)  # the other graph's node left out
    dram = data["nodes"]["quantity"]["dram_pct"]
    t = data["nodes"]["time_ns"]
    assert [round(q / x) for q, x in zip(dram, t)] == [90, 10]
    assert data["missing_metrics"] == [] and data["replays"] == 4
    assert calls["setup"][0][1]["max_samples"] >= 2000


def test_collect_drops_the_optional_tensor_metric_where_the_chip_lacks_it(monkeypatch):
    from graphscope.capture.counters import collect

    calls, replay, ids = _fake_cupti(monkeypatch, fail_first=True)
    data = collect(replay, ids, 2)
    assert data["missing_metrics"] == ["tensor_pct"]
    assert "tensor_pct" not in data["nodes"]["quantity"] and len(calls["setup"]) == 2


def test_collect_other_cupti_failures_are_one_line_not_retried(monkeypatch):
    import contextlib

    from graphscope._errors import CuptiPrivilegesError
    from graphscope.capture.counters import CountersUnavailableError, collect
    from graphscope.native import pmsampling

    calls, replay, ids = _fake_cupti(monkeypatch)

    @contextlib.contextmanager
    def refused(metrics, **kw):
        calls["setup"].append(metrics)
        raise CuptiPrivilegesError("cuptiPmSamplingEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", 35)
        yield []

    monkeypatch.setattr(pmsampling, "pm_sampling", refused)
    with pytest.raises(CountersUnavailableError, match="INSUFFICIENT_PRIVILEGES") as e:
        collect(replay, ids, 2)
    assert len(calls["setup"]) == 1 and "\n" not in str(e.value)


def test_counters_unavailable_is_one_line(monkeypatch):
    from graphscope.capture.counters import CountersUnavailableError, require_counters
    from graphscope.native import pmsampling

    monkeypatch.setattr(pmsampling, "pm_sampling_why",
                        lambda: "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
    with pytest.raises(CountersUnavailableError) as e:
        require_counters()
    assert "\n" not in str(e.value) and "--counters" in str(e.value)


def test_sample_budget_is_sized_for_the_replays():
    from graphscope.capture.counters import MAX_SAMPLES_CAP, MIN_SAMPLES, sample_budget

    assert sample_budget(1000, 10) == MIN_SAMPLES
    assert sample_budget(5_000_000, 10) == 2 * 10 * 250 + 500
    assert sample_budget(10**12, 10) == MAX_SAMPLES_CAP


def test_capture_counters_option_without_a_gpu_fails_with_one_line(capsys):
    from graphscope.capture.capabilities import probe
    from graphscope.cli.main import main

    if probe(False).gpu:
        pytest.skip("a GPU is visible")
    rc = main(["capture", "--counters", "-o", "/tmp/gs-counters-nogpu",
               os.path.join(os.path.dirname(DATA), "..", "sample_models", "mlp.py")])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1 and not os.path.exists("/tmp/gs-counters-nogpu")


def test_html_has_the_counters_tab_only_with_counters(tmp_path):
    from graphscope.model.bundle_io import read_bundle
    from tests.unit.test_html import payload

    path, _ = _bundle_with_counters(tmp_path)
    p = payload(read_bundle(path), extras=_extras(read_bundle(path)))
    c = p["report"]["counters"]
    assert c["modules"] and c["modules"][0]["verdict"] == "memory bound"
    plain = read_bundle(os.path.join(DATA, "mlp_step"))
    assert "counters" not in payload(plain, extras=_extras(plain))["report"]


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="Debian's chromium is not installed")
def test_roofline_draws_a_point_per_module_in_headless_chromium(tmp_path):
    import re
    import subprocess

    from graphscope.model.bundle_io import read_bundle
    from tests.unit.test_html import payload, render

    path, _ = _bundle_with_counters(tmp_path)
    b = read_bundle(path)
    page = tmp_path / "report.html"
    page.write_text(render(b, extras=_extras(b)))
    rows = payload(b, extras=_extras(b))["report"]["counters"]["modules"]
    want = sum(1 for r in rows if r["level"] <= 1)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1280,900", "--dump-dom", page.as_uri() + "#tab=counters"],
                         capture_output=True, text=True, timeout=180)
    m = re.search(r'<div id="status"[^>]*>', dom.stdout)
    assert m, dom.stderr[-2000:]
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(0)))
    assert attrs.get("state") != "error", m.group(0)
    assert attrs.get("counter-points") == str(want) and want > 0
    assert dom.stdout.count('class="module-point"') == want


def test_doctor_says_whether_counters_work(capsys):
    from graphscope.capture.capabilities import probe
    from graphscope.cli.main import main

    main(["doctor", "--json", "--no-subscribe"])
    d = json.loads(capsys.readouterr().out)
    assert isinstance(d["counters"], str) and d["counters"]
    if not probe(False).gpu:
        assert d["counters"] != "ok"
    main(["doctor", "--no-subscribe"])
    assert "hardware counters" in capsys.readouterr().out


def test_modules_weigh_their_nodes_by_sampled_time_and_top_nodes_come_first():
    from types import SimpleNamespace

    def node(i, module, phase):
        return SimpleNamespace(exec_node_id=i, module=module, phase=phase, graph="g",
                               local_id=i, short_name=f"k{i}")

    b = SimpleNamespace(work_nodes=lambda: [node(1, "L.a", "forward"),
                                            node(2, "L.b", "backward")])
    s = _samples(2, {"dram_pct": [90, 10], "sm_active_pct": [20, 80]}, dt=10 * US)
    s.end_ns[0] = 30 * US  # sample 0: 30 us, sample 1: 10 us
    s.start_ns[1], s.end_ns[1] = 30 * US, 40 * US
    nc = ct.attribute(s, [1, 2, 99], [0, 30 * US, 50 * US], [30 * US, 40 * US, 60 * US])
    data = ct.to_json(nc, meta={"replays": 2})
    a = ct.analyze(b, data, top=1)
    rows = {r["name"]: r for r in a["modules"]}
    assert rows["L"]["dram_pct"] == 70 and rows["L"]["sm_active_pct"] == 35
    assert rows["L.a"]["verdict"] == "memory bound" and rows["L.b"]["verdict"] == "compute bound"
    assert rows["L"]["time_ns"] == 20 * US  # per replay
    assert [r["name"] for r in a["nodes"]] == ["k1"] and a["unmatched_nodes"] == 1  # node 99
    assert {r["name"]: r["dram_pct"] for r in a["phases"]} == {"forward": 90, "backward": 10}


# ------------------------------------------------------------------ csrc/pmsampling on a fake
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SESSION = r'''
import json, sys
from graphscope.native import _native as n
out = {"load": n.load_cupti(sys.argv[1]), "supported": n.pm_supported()}
out["passes"] = n.pm_setup(0, ["dram__throughput", "sm__cycles_active"], 100000, 1 << 20, 10)
out["active"] = n.pm_active()
n.pm_start(); n.pm_stop()
d = n.pm_decode()
import numpy as np
out["start"] = np.frombuffer(d["start"], dtype="<u8").tolist()
out["values"] = np.frombuffer(d["values"], dtype="<f8").reshape(-1, 2).tolist()
out["metrics"], out["chip"], out["overflow"] = d["metrics"], d["chip"], d["overflow"]
n.pm_teardown()
out["after"] = n.pm_active()
errs = []
for metrics, interval in ((["a", "b", "c"], 100000), (["bogus"], 100000), (["a"], 20000)):
    try:
        n.pm_setup(0, metrics, interval, 1 << 20, 10)
        errs.append("no error")
    except RuntimeError as e:
        errs.append(str(e))
    errs.append(n.pm_active())
out["errors"] = errs
print(json.dumps(out))
'''


def test_native_pm_session_on_a_fake_cupti(tmp_path):
    """csrc/pmsampling.cpp's whole session against a fake libcupti (the probe's fake plus stub
    activity symbols): setup, start/stop, a decode in two rounds (the counter data image
    fills once), evaluation into columns, teardown; and its errors leave no session behind."""
    import subprocess
    import sys

    from graphscope.native import translate
    from tests.unit.test_counters_probe import cupti_include

    inc = cupti_include()
    if shutil.which("g++") is None or inc is None:
        pytest.skip("needs g++ and the CUPTI headers of the nvidia/cu13 wheel")
    lib = tmp_path / "libcupti.so.13"
    r = subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", f"-I{inc}",
                        os.path.join(ROOT, "bench", "probes", "counters", "fake_cupti.cpp"),
                        os.path.join(ROOT, "tests", "unit", "native", "fake_cupti_activity.cpp"),
                        "-o", str(lib)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-c", SESSION, str(lib)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["load"] == "" and out["supported"] == "" and out["passes"] == 1
    assert out["active"] is True and out["after"] is False
    # round 1: 3 samples (image full), round 2: 2 more; sample i of a round: 10 i + metric
    assert out["start"] == [2000, 2100, 2200, 2000, 2100]
    assert out["values"] == [[0, 1], [10, 11], [20, 21], [0, 1], [10, 11]]
    assert out["metrics"] == ["dram__throughput", "sm__cycles_active"] and out["chip"] == "GH100"
    passes, _, bogus, _, interval, _ = out["errors"]
    assert "2 passes" in passes and out["errors"][1] is False
    assert str(translate(RuntimeError(bogus))).startswith("cuptiProfilerHostConfigAddMetrics")
    assert "cuptiPmSamplingSetConfig" in interval and out["errors"][5] is False


def _extras(b):
    """The bundle's optional files, as `graphscope report` reads them for the page."""
    from graphscope.model.bundle_files import read_extras

    return read_extras(b.path, b.manifest.get("mode")) if b.path else None
