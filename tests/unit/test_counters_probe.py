"""The hardware-counter probe (bench/probes/counters) on a CPU machine.

Its library must compile against the CUPTI headers of torch's CUDA wheel; its driver must
print an error JSON (never a traceback) without a GPU; and its GPU steps, run against a fake
torch and a fake library that answer like CUPTI, must produce the figures docs/counters.md
describes — GPU runs are scarce, so the Python path is exercised here.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE_DIR = ROOT / "bench" / "probes" / "counters"


def load_probe():
    spec = importlib.util.spec_from_file_location("counters_probe_driver", PROBE_DIR / "probe.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cupti_include() -> Path | None:
    try:
        import nvidia
    except ImportError:
        return None
    for root in nvidia.__path__:
        for d in sorted(Path(root).glob("*/include")):
            if (d / "cupti_pmsampling.h").exists() and (d / "cuda.h").exists():
                return d
    return None


@pytest.fixture(scope="module")
def built_lib(tmp_path_factory) -> Path:
    inc = cupti_include()
    if shutil.which("g++") is None or inc is None:
        pytest.skip("needs g++ and the CUPTI headers of the nvidia/cu13 wheel")
    out = tmp_path_factory.mktemp("counters") / "libgs_counters_probe.so"
    cmd = [
        "g++",
        "-std=c++17",
        "-O0",
        "-shared",
        "-fPIC",
        "-Wall",
        "-Werror",
        "-Wno-missing-field-initializers",
        f"-I{inc}",
        str(PROBE_DIR / "counters_probe.cpp"),
        "-o",
        str(out),
        "-ldl",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


def test_library_builds_and_reports_a_missing_libcupti(built_lib):
    lib = ctypes.CDLL(str(built_lib))
    lib.gs_load.restype = ctypes.c_char_p
    lib.gs_load.argtypes = [ctypes.c_char_p]
    res = json.loads(lib.gs_load(b"/nonexistent/libcupti.so.13"))
    assert res["ok"] is False
    assert "/nonexistent/libcupti.so.13" in res["cupti_dlerror"]
    assert "cuptiPmSamplingSetConfig" in res["missing"]
    assert "cuptiRangeProfilerEnable" in res["missing"]
    assert res["header_cupti_api_version"] >= 120600  # PM sampling needs CUPTI 12.6+
    for name in (
        "gs_env",
        "gs_list_metrics",
        "gs_check_metrics",
        "gs_pm_setup",
        "gs_pm_decode",
        "gs_rp_setup",
        "gs_rp_push",
        "gs_rp_decode",
        "gs_timestamp",
    ):
        assert hasattr(lib, name), name


def test_library_resolves_every_symbol_of_the_wheels_libcupti(built_lib):
    inc = cupti_include()
    cupti = sorted((inc.parent / "lib").glob("libcupti.so*")) if inc else []
    if not cupti:
        pytest.skip("no libcupti in the nvidia wheel")
    # In a child: loading libcupti is harmless, but keep this process clean of it.
    code = (
        f"import ctypes, json; l = ctypes.CDLL({str(built_lib)!r}); "
        "l.gs_load.restype = ctypes.c_char_p; l.gs_load.argtypes = [ctypes.c_char_p]; "
        f"print(l.gs_load({str(cupti[0]).encode()!r}).decode())"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    loaded = json.loads(res.stdout)
    cupti_missing = [m for m in loaded["missing"] if m.startswith("cupti")]
    assert cupti_missing == []


def test_driver_without_gpu_prints_an_error_json(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the probe would run for real")
    env = dict(os.environ, OUT=str(tmp_path / "out"), PATH=os.environ.get("PATH", ""))
    res = subprocess.run(
        [
            sys.executable,
            str(PROBE_DIR / "probe.py"),
            "--lib",
            str(tmp_path / "missing.so"),
            "--budget",
            "120",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert json.loads((tmp_path / "out" / "counters_probe.json").read_text()) == doc
    assert any("probe library not built" in e for e in doc["errors"])
    assert any("no CUDA device" in e for e in doc["errors"])
    assert doc["steps"]["pm"] == {"skipped": "no GPU or no library (see env)"}
    assert doc["ncu"] == {"skipped": "no GPU"}
    assert doc["verdicts"]["pm_sampling"] == "not run"
    assert "cap_sys_admin" in doc["host"]


def test_run_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(PROBE_DIR / "run.sh")]).returncode == 0


# ---- the GPU steps against fakes -----------------------------------------------------


class FakeTensor:
    def __init__(self, n=1):
        self.n = n

    def add_(self, _):
        return self

    def numel(self):
        return self.n


def fake_torch(launches: list) -> types.ModuleType:
    t = types.ModuleType("torch")
    t.__version__ = "0.fake"
    t.version = types.SimpleNamespace(cuda="13.0")
    t.bfloat16 = t.float32 = object()

    def make(*shape, **_):
        n = 1
        for s in shape:
            n *= s
        return FakeTensor(n)

    t.randn = t.empty = t.ones = t.zeros = make
    t.empty_like = lambda x: FakeTensor(x.n)
    t.mm = lambda *a, **k: launches.append("mm")
    t.mul = lambda *a, **k: launches.append("mul")

    class Graph:
        def replay(self):
            launches.append("graph")

    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        get_device_properties=lambda i: types.SimpleNamespace(
            name="Fake H200",
            major=9,
            minor=0,
            multi_processor_count=132,
            total_memory=141 << 30,
            memory_clock_rate=2_619_000,
            memory_bus_width=6144,
        ),
        synchronize=lambda: None,
        Stream=lambda: types.SimpleNamespace(wait_stream=lambda s: None),
        current_stream=lambda: types.SimpleNamespace(wait_stream=lambda s: None),
        stream=lambda s: contextlib.nullcontext(),
        CUDAGraph=Graph,
        graph=lambda g: contextlib.nullcontext(),
    )
    t.cuda = cuda
    return t


def ok(**fields):
    return {"ok": True, "calls": [{"call": "cuptiX", "rc": 0, "name": "CUPTI_SUCCESS"}], **fields}


def failed(call, name):
    return {"ok": False, "calls": [{"call": call, "rc": 35, "name": name, "msg": "no rights"}]}


class FakeLib:
    """Answers like counters_probe.cpp would on a machine where everything works (or where
    PM sampling is refused, with pm_refused)."""

    def __init__(self, path, pm_refused=False):
        self.pm_refused = pm_refused
        self.metrics: list[str] = []
        self.rounds = 0
        self.ts = 1_000

    def load(self, path):
        return {"ok": True, "missing": []}

    def env(self, dev):
        return ok(chip="GH100", device_supported={"pm_sampling": {"isSupported": "SUPPORTED"}})

    def list_metrics(self, kind, dev, filters, limit):
        return ok(metrics=[{"name": "sm__pipe_tensor_op_gmma_cycles_active", "type": "counter"}])

    def check_metrics(self, kind, dev, csv, per_metric):
        names = csv.split(",")
        per = [
            {"metric": m, "config_rc": 0 if "gpu__time" not in m or kind == 0 else 1, "passes": 1}
            for m in names
        ]
        passes = 1 if kind == 0 or len(names) <= 6 else 2  # PM: six metrics a pass
        return ok(metrics=per, together_rc=0, together_passes=passes)

    def pm_setup(self, dev, csv, interval, trigger, hw, max_samples):
        if self.pm_refused:
            return {
                **failed("cuptiPmSamplingEnable", "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
                "stage": "enable",
            }
        self.metrics = csv.split(",")
        return ok(stage="configured", passes=1)

    def pm_start(self):
        self.launch_mark = len(LAUNCHES)
        return ok()

    def pm_stop(self):
        self.kinds = set(LAUNCHES[self.launch_mark :])
        return ok()

    def pm_decode(self, max_eval):
        n = 40
        sm, dram = BUSY[next(iter(self.kinds))]
        samples = {
            "start": [self.ts + i * 20_000 for i in range(n)],
            "end": [self.ts + (i + 1) * 20_000 for i in range(n)],
        }
        for m in self.metrics:
            samples[m] = [value(m, sm, dram)] * n
        return ok(samples=samples, evaluated=n, decodes=[{"rc": 0, "stop_reason": 2}])

    def pm_teardown(self):
        return ok()

    def timestamp(self):
        self.ts += 10
        return self.ts

    def rp_setup(self, csv, range_mode, replay, max_ranges):
        self.metrics, self.rounds, self.launch_mark = csv.split(","), 0, len(LAUNCHES)
        return ok(stage="configured", passes=2)

    def rp_start(self):
        return ok()

    def rp_push(self, name):
        return ok()

    def rp_pop(self):
        return ok()

    def rp_stop(self):
        self.rounds += 1
        return ok(all_passes_submitted=self.rounds >= 2)

    def rp_decode(self, max_out):
        kinds = LAUNCHES[self.launch_mark :]
        ranges = [
            {"name": str(i), "values": {m: value(m, *BUSY[k]) for m in self.metrics}}
            for i, k in enumerate(kinds)
        ]
        return ok(ranges=ranges, num_ranges=len(ranges), ranges_dropped=0)

    def rp_teardown(self):
        return ok()


LAUNCHES: list = []
BUSY = {"mm": (85.0, 20.0), "mul": (30.0, 88.0), "graph": (5.0, 3.0)}  # SM %, DRAM % a launch


def value(metric, sm, dram):
    return sm if metric.startswith("sm__throughput") else dram if "dram__thr" in metric else 1.0


@pytest.fixture
def probe_on_fakes(monkeypatch, tmp_path):
    probe = load_probe()
    LAUNCHES.clear()
    monkeypatch.setitem(sys.modules, "torch", fake_torch(LAUNCHES))
    monkeypatch.setattr(probe, "find_libcupti", lambda: {"chosen": "/fake/libcupti.so.13"})
    lib_file = tmp_path / "lib.so"
    lib_file.write_text("")
    return probe, str(lib_file)


def run_fake_step(probe, lib_path, tmp_path, name, **lib_kw):
    probe.Lib = lambda path: FakeLib(path, **lib_kw)
    step = probe.Step(str(tmp_path / f"{name}.json"))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    if name == "env":
        probe.step_env(step, lib_path)
    elif name == "pm":
        probe.step_pm(step, lib_path, str(out))
    else:
        probe.step_rp(step, lib_path, user=name == "rp_user")
    saved = json.loads(Path(step.path).read_text())
    assert saved == json.loads(json.dumps(step.r))
    return step.r


def test_gpu_steps_on_fakes_give_the_figures_the_doc_describes(probe_on_fakes, tmp_path):
    probe, lib_path = probe_on_fakes
    steps = {
        n: run_fake_step(probe, lib_path, tmp_path, n)
        for n in ("env", "pm", "rp_kernel", "rp_user")
    }
    assert steps["env"]["device"]["peak_dram_GBps"] == pytest.approx(4022.8, abs=0.1)
    pm = steps["pm"]
    assert "error" not in pm, pm.get("error")
    # gpu__time_duration is refused by the fake PM config; six fit in one pass, in order.
    assert pm["chosen_1"] == probe.PM_METRICS[:6]
    refused = [m["metric"] for m in pm["check_1"]["metrics"] if m["config_rc"] != 0]
    assert refused == ["gpu__time_duration.sum"]
    # The range profiler takes multi-pass sets: all, plus the discovered tensor metric.
    rp_chosen = steps["rp_kernel"]["chosen_0"]
    assert rp_chosen[: len(probe.RP_METRICS)] == probe.RP_METRICS
    assert rp_chosen[len(probe.RP_METRICS) :] == []  # gmma is already among RP_METRICS
    assert set(pm["runs"]) == {"gemm", "elementwise", "tiny_graph"}
    assert pm["runs"]["gemm"]["summary"]["n"] == 40
    assert (tmp_path / "out" / "pm_samples_elementwise.json").exists()
    kernel = steps["rp_kernel"]["sessions"]
    assert kernel["auto_range.kernel_replay.gemm"]["rounds"] == 1  # kernel replay: one round
    assert kernel["auto_range.kernel_replay.gemm"]["n_ranges"] == 2
    user = steps["rp_user"]["sessions"]
    assert user["user_range.user_replay.gemm"]["rounds"] == 2  # until all passes are submitted
    doc = {"steps": steps, "ncu": {"works": False}}
    v = probe.verdicts(doc)
    assert v["pm_sampling"] == "works"
    expected = {
        "gemm_compute_bound": True,
        "elementwise_dram_ge_60pct": True,
        "tiny_graph_latency_bound": True,
    }
    assert {k: x for k, x in v["pm_sanity"].items() if k != "metrics"} == expected
    assert v["pm_sanity"]["metrics"]["gemm"] == [probe.SM_PCT, probe.DRAM_PCT]
    assert {k: x for k, x in v["rp_kernel_sanity"].items() if k != "metrics"} == expected
    assert v["insufficient_privileges"] is False
    assert v["per_kernel_inside_graph_replay"] == {
        "auto_range.kernel_replay.mixed_graph": False,  # the fake gives one range a replay
        "auto_range.kernel_replay.tiny_graph": False,
        "auto_range.user_replay.mixed_graph": False,
        "auto_range.user_replay.tiny_graph": False,
    }
    json.dumps(v)


def test_pm_refused_for_privileges_reads_as_such(probe_on_fakes, tmp_path):
    probe, lib_path = probe_on_fakes
    pm = run_fake_step(probe, lib_path, tmp_path, "pm", pm_refused=True)
    assert pm["error"] == (
        "PM sampling not configured: cuptiPmSamplingEnable: "
        "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (no rights)"
    )
    assert "setup_100000ns" not in pm  # no retry with another interval: not an interval matter
    v = probe.verdicts({"steps": {"pm": pm}})
    assert v["insufficient_privileges"] is True
    assert v["pm_sampling"].startswith("PM sampling not configured")
    assert v["failed_calls"] == {
        "cuptiPmSamplingEnable": {"CUPTI_ERROR_INSUFFICIENT_PRIVILEGES": 1}
    }


def test_sanity_flags_a_gemm_that_reads_memory_bound():
    probe = load_probe()
    stats = {
        "gemm": {probe.SM_PCT: {"p90": 30.0}, probe.DRAM_PCT: {"p90": 80.0}},
        "elementwise": {"dram__bytes.sum.pct_of_peak_sustained_elapsed": {"p90": 41.0}},
    }
    assert probe.sanity(stats) == {
        "metrics": {
            "gemm": [probe.SM_PCT, probe.DRAM_PCT],
            "elementwise": ["dram__bytes.sum.pct_of_peak_sustained_elapsed"],
        },
        "gemm_compute_bound": False,
        "elementwise_dram_ge_60pct": False,
    }


# ---- the library against a fake libcupti ---------------------------------------------

DRIVE_FAKE = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("p", sys.argv[1])
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
lib = probe.Lib(sys.argv[2])
r = {"load": lib.load(sys.argv[3]), "env": lib.env(0)}
r["list"] = lib.list_metrics(1, 0, "tensor", 10)
r["check"] = lib.check_metrics(1, 0, "dram__throughput.avg.pct_of_peak_sustained_elapsed,bogus", 1)
r["check_fits"] = lib.check_metrics(0, 0, "a__x,b__y,c__z", 0)
r["pm_setup_fine"] = lib.pm_setup(0, "m__a,m__b", 20000, 1, 1 << 20, 100)
r["pm_teardown_fine"] = lib.pm_teardown()
r["pm_setup"] = lib.pm_setup(0, "m__a,m__b", 100000, 1, 1 << 20, 100)
r["pm_start"], r["pm_stop"] = lib.pm_start(), lib.pm_stop()
r["pm_decode"] = lib.pm_decode(4)
r["pm_teardown"] = lib.pm_teardown()
r["rp_setup"] = lib.rp_setup("m__a,m__b", 2, 3, 16)
r["rounds"] = []
for _ in range(3):
    rnd = {"start": lib.rp_start(), "push": lib.rp_push("gemm"), "pop": lib.rp_pop(),
           "stop": lib.rp_stop()}
    r["rounds"].append(rnd)
    if rnd["stop"]["all_passes_submitted"]:
        break
r["rp_decode"] = lib.rp_decode(2)
r["rp_teardown"] = lib.rp_teardown()
r["timestamps"] = [lib.timestamp(), lib.timestamp()]
print(json.dumps(r))
"""


def test_library_on_a_fake_cupti_returns_valid_json_for_every_call(built_lib, tmp_path):
    inc = cupti_include()
    src = PROBE_DIR / "fake_cupti.cpp"
    fake = tmp_path / "libcupti_fake.so"
    build = ["g++", "-std=c++17", "-shared", "-fPIC", f"-I{inc}", str(src), "-o", str(fake)]
    res = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    shutil.copy(fake, tmp_path / "libcuda.so.1")  # gs_load dlopens libcuda.so.1 by name
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    run = [sys.executable, "-c", DRIVE_FAKE, str(PROBE_DIR / "probe.py"), str(built_lib), str(fake)]
    res = subprocess.run(run, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    r = json.loads(res.stdout)
    assert r["load"]["ok"] is True and r["load"]["missing"] == []
    env_ = r["env"]
    assert env_["chip"] == "GH100" and env_["cupti_api_version"] == 130001
    assert env_["device_supported"]["pm_sampling"]["isSupported"] == "SUPPORTED"
    assert env_["device_supported"]["sass_metrics"]["rc_name"] == "CUPTI_ERROR_INVALID_METRIC_NAME"
    assert env_["host_supported_chips"] == ["GH100", "GB100"]
    assert r["list"]["metrics"] == [
        {"name": "sm__pipe_tensor_op_gmma_cycles_active", "type": t}
        for t in ("counter", "ratio", "throughput")
    ]
    good, bad = r["check"]["metrics"]
    assert (
        good["config_rc"] == 0 and good["passes"] == 1 and good["description"] == "a\tfake\nmetric"
    )
    assert bad["properties_rc_name"] == "CUPTI_ERROR_INVALID_METRIC_NAME" and bad["config_rc"] != 0
    assert r["check"]["together_rc"] != 0
    assert r["check_fits"]["metrics"] == [] and r["check_fits"]["together_passes"] == 2
    assert r["pm_setup_fine"]["stage"] == "set_config"
    assert r["pm_setup_fine"]["calls"][-1]["msg"] == 'fake "quoted" message'
    assert r["pm_setup"]["stage"] == "configured" and r["pm_setup"]["ok"] is True
    dec = r["pm_decode"]
    # 3 samples in a full image, a fresh image, 2 more; at most 4 evaluated.
    assert [d["stop_reason"] for d in dec["decodes"]] == [1, 2]
    assert dec["evaluated"] == 4 and dec["not_evaluated"] == 1
    assert dec["samples"]["start"] == [2000, 2100, 2200, 2000]
    assert dec["samples"]["m__b"] == [1.0, 11.0, 21.0, 1.0]
    assert r["rp_setup"]["stage"] == "configured" and r["rp_setup"]["passes"] == 1
    assert len(r["rounds"]) == 2 and r["rounds"][1]["stop"]["all_passes_submitted"] is True
    assert r["rounds"][0]["pop"]["calls"][0]["name"] == "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"
    rp = r["rp_decode"]
    assert rp["num_ranges"] == 3 and [x["name"] for x in rp["ranges"]] == ["0", "1"]
    assert rp["ranges"][1]["values"] == {"m__a": 10.0, "m__b": 11.0}
    assert r["timestamps"][1] > r["timestamps"][0]


@pytest.mark.parametrize(
    ("body", "works", "first_error"),
    [
        (
            'echo "==PROF== Connected"; '
            'echo "    dram__throughput.avg.pct_of_peak_sustained_elapsed % 91.2"',
            True,
            None,
        ),
        (
            'echo "==PROF== Connected"; echo "==ERROR== LibraryNotLoaded: libcuda"; exit 1',
            False,
            "==ERROR== LibraryNotLoaded: libcuda",
        ),
    ],
)
def test_ncu_check_reads_metrics_or_the_first_error(
    tmp_path, monkeypatch, body, works, first_error
):
    probe = load_probe()
    ncu = tmp_path / "ncu"
    ncu.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then echo "ncu 2025.3"; exit 0; fi\n{body}\n'
    )
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    res = probe.ncu_probe(30)
    assert res["path"] == str(ncu)
    assert res["version"]["out"].strip() == "ncu 2025.3"
    assert res["works"] is works
    assert res["first_error_line"] == first_error
