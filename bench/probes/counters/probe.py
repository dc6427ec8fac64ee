"""Hardware-counter probe: which of CUPTI's PM sampling API and range
profiler work here, with which metrics, at what overhead, and what stops them.

    python3 bench/probes/counters/probe.py [--lib PATH] [--budget SECONDS]

Normally started by run.sh, which builds the library (counters_probe.cpp) first. Prints ONE
JSON document and writes it to $OUT/counters_probe.json when $OUT is set (rewritten after
every step, so a probe killed from outside still leaves what it had). docs/counters.md says
how to read it.

Each step runs in its own child process (`--step NAME`) under a timeout, because CUPTI can
hang or crash the process (a segfault is an answer too: the child's last `GSCALL` line names
the call in flight). Steps: env (versions, chip, device support, which metrics exist), pm
(PM sampling over each workload), rp_kernel (range profiler, auto range, kernel replay),
rp_user (range profiler, user ranges and user replay; auto ranges with user replay over a
graph), then ncu (Nsight Compute over a tiny workload, when on PATH). Workloads (torch): a
bf16 GEMM 8192^3 (compute bound), an elementwise multiply over 2 GiB (memory bound), a CUDA
graph of 200 tiny kernels (latency bound) and a mixed graph (GEMM, elementwise, tiny kernels)
for per-kernel values inside a graph replay.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(tempfile.gettempdir(), "gs_counters_probe", "libgs_counters_probe.so")

# Candidate metrics, most wanted first (PM sampling keeps, in this order, what fits in one
# pass). Names that do not exist on the chip are reported and dropped. The % of peak forms are
# what a verdict needs; alternates follow in case a chip or PM sampling lacks the first form.
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_ALTERNATES = [SM_PCT, "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"]
DRAM_ALTERNATES = [
    DRAM_PCT,
    "dram__bytes.sum.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum.pct_of_peak_sustained_elapsed",
]
PM_METRICS = [
    DRAM_PCT,
    SM_PCT,
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes.sum.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__cycles_active.avg",
    "gr__cycles_active.avg",
    "gpu__time_duration.sum",
]
RP_METRICS = [
    "gpu__time_duration.sum",
    SM_PCT,
    DRAM_PCT,
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__cycles_active.avg",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
]
LIST_FILTERS = "dram__,sm__throughput,sm__cycles,tensor,warps_active,gpu__time,gpu__compute,gr__"

# Step name -> its own time cap in seconds (the probe's budget caps them all together, less
# NCU_RESERVE kept for the ncu check at the end).
STEPS = [("env", 60), ("pm", 75), ("rp_kernel", 60), ("rp_user", 60)]
NCU_TIMEOUT = 60
NCU_RESERVE = 45


# ---- small helpers (no torch) --------------------------------------------------------


def read(path: str, limit: int = 4000) -> str | None:
    try:
        with open(path, errors="replace") as f:
            return f.read(limit)
    except OSError as e:
        return None if isinstance(e, FileNotFoundError) else f"<{type(e).__name__}: {e}>"


def sh(cmd: list[str], timeout: float, keep: int = 3000) -> dict:
    """Runs a command in its own process group (all of it killed on timeout); never raises.
    rc None = not started or timed out. out: stdout and stderr, the first and last `keep`
    characters."""
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
    except OSError as e:
        return {"rc": None, "error": f"{type(e).__name__}: {e}"}
    timed_out = False
    try:
        raw, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
            os.killpg(proc.pid, signal.SIGKILL)
        raw, _ = proc.communicate()
    out = raw.decode(errors="replace")
    if len(out) > 2 * keep:
        out = out[:keep] + "\n[...]\n" + out[-keep:]
    res = {"rc": None if timed_out else proc.returncode, "out": out}
    res["s"] = round(time.monotonic() - t0, 2)
    if timed_out:
        res["timed_out"] = True
    return res


def error_text(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()


def host_facts() -> dict:
    """What the machine says about profiling rights, without touching the GPU."""
    facts: dict = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "uname": " ".join(platform.uname()),
    }
    facts["proc_version"] = (read("/proc/version") or "").strip()
    # gVisor reports a fixed 4.4.0 kernel; its /proc has no driver params.
    facts["gvisor_hint"] = "4.4.0" in platform.release()
    facts["nvidia_driver_version_file"] = (read("/proc/driver/nvidia/version") or "").strip()[:300]
    params = read("/proc/driver/nvidia/params", 20000)
    if params is None:
        facts["RmProfilingAdminOnly"] = "no /proc/driver/nvidia/params"
    else:
        lines = [ln.strip() for ln in params.splitlines() if "Profiling" in ln]
        facts["RmProfilingAdminOnly"] = lines or "not listed in /proc/driver/nvidia/params"
    status = read("/proc/self/status") or ""
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("CapEff", "CapPrm", "CapBnd"):
            facts[key] = value.strip()
    try:
        cap_eff = int(facts.get("CapEff", "0"), 16)
        facts["cap_sys_admin"] = bool(cap_eff >> 21 & 1)
    except ValueError:
        facts["cap_sys_admin"] = None
    facts["euid"] = os.geteuid()
    facts["container_hints"] = {
        "dockerenv": os.path.exists("/.dockerenv"),
        "containerenv": os.path.exists("/run/.containerenv"),
        "cgroup": (read("/proc/1/cgroup") or "")[:300],
    }
    facts["env"] = {
        k: v
        for k, v in os.environ.items()
        if k.startswith(("NVIDIA_", "CUDA_")) or k in ("LD_LIBRARY_PATH",)
    }
    facts["dev_nvidia"] = sorted(glob.glob("/dev/nvidia*"))
    if shutil.which("nvidia-smi"):
        facts["nvidia_smi"] = sh(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.max.sm,"
                "clocks.max.memory,memory.total,compute_mode",
                "--format=csv,noheader",
            ],
            20,
        )
    return facts


def find_libcupti() -> dict:
    """The libcupti torch uses: the mapped one if torch loaded it, else torch's wheel's."""
    found: dict = {"mapped": [], "candidates": []}
    for line in (read("/proc/self/maps", 10_000_000) or "").splitlines():
        if "libcupti" in line:
            path = line.split()[-1]
            if path not in found["mapped"]:
                found["mapped"].append(path)
    roots = []
    try:
        import nvidia  # the CUDA wheels torch depends on

        roots += list(nvidia.__path__)
    except ImportError:
        pass
    try:
        import torch

        roots.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
    except ImportError:
        pass
    for root in roots:
        for pattern in ("*/lib/libcupti.so*", "libcupti.so*", "*/extras/CUPTI/lib64/libcupti.so*"):
            found["candidates"] += sorted(glob.glob(os.path.join(root, pattern)))
    for path in ("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",):
        if os.path.exists(path):
            found["candidates"].append(path)
    try:  # with wheels of two CUDA majors installed, the one of torch's CUDA first
        import torch

        major = (torch.version.cuda or "").split(".")[0]
        found["candidates"].sort(key=lambda p: f".so.{major}" not in p)
    except ImportError:
        pass
    found["chosen"] = (found["mapped"] or found["candidates"] or [None])[0]
    found["how"] = (
        "mapped in this process"
        if found["mapped"]
        else "torch's wheel"
        if found["candidates"]
        else "not found"
    )
    return found


# ---- the library ---------------------------------------------------------------------


class Lib:
    """ctypes view of counters_probe.cpp; every call returns the parsed JSON."""

    SIGNATURES = {
        "gs_load": [ctypes.c_char_p],
        "gs_env": [ctypes.c_int],
        "gs_list_metrics": [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int],
        "gs_check_metrics": [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int],
        "gs_pm_setup": [
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_ulonglong,
            ctypes.c_int,
            ctypes.c_ulonglong,
            ctypes.c_uint,
        ],
        "gs_pm_start": [],
        "gs_pm_stop": [],
        "gs_pm_teardown": [],
        "gs_pm_decode": [ctypes.c_uint],
        "gs_rp_setup": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint],
        "gs_rp_start": [],
        "gs_rp_stop": [],
        "gs_rp_pop": [],
        "gs_rp_teardown": [],
        "gs_rp_push": [ctypes.c_char_p],
        "gs_rp_decode": [ctypes.c_uint],
    }

    def __init__(self, path: str):
        self.dll = ctypes.CDLL(path)
        for name, args in self.SIGNATURES.items():
            fn = getattr(self.dll, name)
            fn.argtypes = args
            fn.restype = ctypes.c_char_p
        self.dll.gs_timestamp.restype = ctypes.c_uint64
        self.dll.gs_timestamp.argtypes = []

    def __getattr__(self, name: str):
        fn = getattr(self.dll, "gs_" + name)

        def call(*args):
            args = tuple(a.encode() if isinstance(a, str) else a for a in args)
            raw = fn(*args)
            return json.loads(raw.decode()) if isinstance(raw, bytes) else raw

        return call


def failed_calls(node, out: dict | None = None) -> dict:
    """{call: {result name: count}} of every failed CUPTI call recorded anywhere in node."""
    out = {} if out is None else out
    if isinstance(node, dict):
        if "call" in node and node.get("rc") not in (0, None):
            per = out.setdefault(node["call"], {})
            per[node.get("name", "?")] = per.get(node.get("name", "?"), 0) + 1
        for v in node.values():
            failed_calls(v, out)
    elif isinstance(node, list):
        for v in node:
            failed_calls(v, out)
    return out


def first_failure(res: dict | None) -> str | None:
    """'cuptiX: CUPTI_ERROR_Y (message)' for the first failed call of one gs_* result."""
    for c in (res or {}).get("calls", []):
        if c.get("rc") != 0:
            msg = f" ({c['msg']})" if c.get("msg") else ""
            return f"{c['call']}: {c.get('name')}{msg}"
    return None


# ---- workloads (torch; child processes only) -----------------------------------------


class Workload:
    def __init__(self, name: str, fn, reps: int, kernels: int, flops: float = 0, nbytes: float = 0):
        self.name, self.fn, self.reps, self.kernels = name, fn, reps, kernels
        self.flops, self.nbytes = flops, nbytes


def make_workloads(torch, which: tuple[str, ...]) -> dict[str, Workload]:
    dev = "cuda"
    out: dict[str, Workload] = {}
    if "gemm" in which:
        n = 8192
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
        out["gemm"] = Workload("gemm", lambda: torch.mm(a, b, out=c), 20, 1, flops=2.0 * n**3)
    if "elementwise" in which:
        x = torch.ones(2**29, device=dev, dtype=torch.float32)  # 2 GiB
        y = torch.empty_like(x)
        out["elementwise"] = Workload(
            "elementwise", lambda: torch.mul(x, 2.0, out=y), 20, 1, nbytes=2.0 * x.numel() * 4
        )
    if "tiny_graph" in which:
        t = torch.zeros(1024, device=dev)
        g = capture(torch, lambda: [t.add_(1) for _ in range(200)])
        out["tiny_graph"] = Workload("tiny_graph", g.replay, 50, 200)
    if "mixed_graph" in which:
        m = 4096
        a2 = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
        c2 = torch.empty(m, m, device=dev, dtype=torch.bfloat16)
        x2 = torch.ones(2**26, device=dev)  # 256 MiB
        y2 = torch.empty_like(x2)
        s = torch.zeros(1024, device=dev)

        def body():
            torch.mm(a2, a2, out=c2)
            torch.mul(x2, 3.0, out=y2)
            for _ in range(10):
                s.add_(1)

        g2 = capture(torch, body)
        out["mixed_graph"] = Workload("mixed_graph", g2.replay, 5, 12)
    for w in out.values():
        w.fn()  # warm up (cuBLAS handles, workspaces)
    torch.cuda.synchronize()
    return out


def capture(torch, body):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    torch.cuda.synchronize()
    return g


def timed(torch, w: Workload, reps: int | None = None) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps or w.reps):
        w.fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def baseline(torch, w: Workload, trials: int = 3) -> dict:
    times = [timed(torch, w) for _ in range(trials)]
    best = min(times)
    res = {
        "reps": w.reps,
        "wall_s": [round(t, 6) for t in times],
        "median_s": statistics.median(times),
    }
    if w.flops:
        res["achieved_tflops"] = round(w.flops * w.reps / best / 1e12, 1)
    if w.nbytes:
        res["achieved_GBps"] = round(w.nbytes * w.reps / best / 1e9, 1)
    res["per_rep_us"] = round(best / w.reps * 1e6, 2)
    return res


# ---- steps (child processes) ---------------------------------------------------------


class Step:
    """The result of one child step, saved to its file after every part."""

    def __init__(self, path: str):
        self.path, self.r = path, {}

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.r, f)
        os.replace(tmp, self.path)

    def part(self, key: str, fn, *args):
        """Runs fn, stores its result (or its exception) under key, saves. Returns the result."""
        t0 = time.monotonic()
        try:
            res = fn(*args)
        except Exception as e:  # a probe records every failure and carries on
            self.r[key] = {"error": error_text(e), "s": round(time.monotonic() - t0, 3)}
            self.save()
            return None
        self.r[key] = res
        self.save()
        return res


def open_gpu(step: Step, lib_path: str):
    """torch on cuda:0 and the library loaded with torch's libcupti; None when impossible."""
    import torch

    step.r["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda}
    if not torch.cuda.is_available():
        step.r["error"] = "no CUDA device visible to torch"
        step.save()
        return None, None
    props = torch.cuda.get_device_properties(0)
    info = {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "total_memory": props.total_memory,
    }
    clock, width = (
        getattr(props, "memory_clock_rate", None),
        getattr(props, "memory_bus_width", None),
    )
    if clock and width:  # kHz, bits; DDR: two transfers a clock
        info["peak_dram_GBps"] = round(2 * clock * 1e3 * width / 8 / 1e9, 1)
    step.r["device"] = info
    step.save()
    torch.zeros(1, device="cuda")  # creates and binds the primary context on this thread
    torch.cuda.synchronize()
    found = find_libcupti()
    step.r["libcupti"] = found
    if not os.path.exists(lib_path):
        step.r["error"] = f"probe library not built: {lib_path} (run run.sh)"
        step.save()
        return torch, None
    if not found["chosen"]:
        step.r["error"] = "no libcupti found next to torch"
        step.save()
        return torch, None
    lib = Lib(lib_path)
    step.r["load"] = lib.load(found["chosen"])
    step.save()
    return torch, lib


def usable_metrics(step: Step, lib: Lib, kind: int, wanted: list[str], one_pass: bool) -> list[str]:
    """Checks each metric on this chip; keeps those accepted (one pass together for PM)."""
    extra = []
    listing = step.part(f"list_{kind}", lib.list_metrics, kind, 0, "tensor", 200)
    for m in (listing or {}).get("metrics", []):
        name = m["name"]
        if "cycles_active" in name and "pipe_tensor" in name:
            extra.append(name + ".avg.pct_of_peak_sustained_active")
    candidates = wanted + [m for m in extra[:4] if m not in wanted]
    check = step.part(f"check_{kind}", lib.check_metrics, kind, 0, ",".join(candidates), 1)
    ok = [
        m["metric"]
        for m in (check or {}).get("metrics", [])
        if m.get("config_rc") == 0 and (m.get("passes") == 1 or not one_pass)
    ]
    together = lib.check_metrics(kind, 0, ",".join(ok), 0) if ok else {}
    if together.get("together_rc") == 0 and (together.get("together_passes") == 1 or not one_pass):
        step.r[f"chosen_{kind}"] = ok
        step.save()
        return ok
    # Greedy: keep a metric only if the set still configures (in one pass for PM).
    chosen: list[str] = []
    for m in ok:
        trial = lib.check_metrics(kind, 0, ",".join([*chosen, m]), 0)
        if trial.get("together_rc") == 0 and (trial.get("together_passes") == 1 or not one_pass):
            chosen.append(m)
    step.r[f"chosen_{kind}"] = chosen
    step.save()
    return chosen


def step_env(step: Step, lib_path: str) -> None:
    torch, lib = open_gpu(step, lib_path)
    if lib is None:
        return
    step.part("cupti", lib.env, 0)
    step.part("pm_metric_list", lib.list_metrics, 1, 0, LIST_FILTERS, 300)
    step.part("pm_metric_list_unfiltered", lib.list_metrics, 1, 0, "", 150)
    step.part("rp_metric_list", lib.list_metrics, 0, 0, LIST_FILTERS, 300)
    step.part("pm_metrics_check", lib.check_metrics, 1, 0, ",".join(PM_METRICS), 1)
    step.part("rp_metrics_check", lib.check_metrics, 0, 0, ",".join(RP_METRICS), 1)


def pm_summary(dec: dict, ts0: int, ts1: int, keep: int = 30) -> dict:
    """Per-metric statistics over the decoded samples, plus the first samples verbatim."""
    samples = dec.get("samples", {})
    start, end = samples.get("start", []), samples.get("end", [])
    out: dict = {"n": len(start)}
    if start:
        durations = [e - s for s, e in zip(start, end)]
        out["sample_ns_median"] = statistics.median(durations)
        out["span_ns"] = end[-1] - start[0]
        # Same clock as cuptiGetTimestamp? Then both offsets are small and positive.
        out["first_sample_minus_cupti_ts_before_ns"] = start[0] - ts0
        out["cupti_ts_after_minus_last_sample_ns"] = ts1 - end[-1]
    stats = {}
    for name, values in samples.items():
        if name in ("start", "end"):
            continue
        vals = sorted(v for v in values if v is not None)
        if not vals:
            stats[name] = None
            continue
        stats[name] = {
            "min": vals[0],
            "p50": vals[len(vals) // 2],
            "p90": vals[min(len(vals) - 1, int(len(vals) * 0.9))],
            "max": vals[-1],
            "mean": sum(vals) / len(vals),
        }
    out["stats"] = stats
    out["first"] = {k: v[:keep] for k, v in samples.items()}
    return out


def step_pm(step: Step, lib_path: str, out_dir: str | None) -> None:
    torch, lib = open_gpu(step, lib_path)
    if lib is None:
        return
    metrics = usable_metrics(step, lib, 1, PM_METRICS, one_pass=True)
    if not metrics:
        step.r["error"] = "no PM sampling metric could be configured"
        step.save()
        return
    workloads = make_workloads(torch, ("gemm", "elementwise", "tiny_graph"))
    base = {w.name: baseline(torch, w) for w in workloads.values()}
    step.r["baseline"] = base
    step.save()
    setup = None
    # 20 us over a 512 MiB hardware buffer (the CUPTI sample's size), else 100 us over 64 MiB.
    for interval_ns, buffer in ((20_000, 512 << 20), (100_000, 64 << 20)):
        setup = lib.pm_setup(0, ",".join(metrics), interval_ns, 1, buffer, 100_000)
        step.r[f"setup_{interval_ns}ns"] = setup
        step.save()
        if setup.get("stage") == "configured":
            step.r["interval_ns"] = interval_ns
            break
        step.r[f"teardown_{interval_ns}ns"] = lib.pm_teardown()
        if setup.get("stage") in ("enable", "host_initialize"):
            break  # not an interval matter
    if not setup or setup.get("stage") != "configured":
        step.r["error"] = f"PM sampling not configured: {first_failure(setup)}"
        step.save()
        return
    runs = step.r.setdefault("runs", {})
    for w in workloads.values():
        run: dict = {}
        runs[w.name] = run
        try:
            pm_run(torch, lib, w, base[w.name], run, out_dir)
        except Exception as e:  # record, go on with the next workload
            run["error"] = error_text(e)
        step.save()
    step.r["after"] = {w.name: baseline(torch, w, 1) for w in workloads.values()}
    step.r["teardown"] = lib.pm_teardown()
    step.save()


def pm_run(torch, lib: Lib, w: Workload, base: dict, run: dict, out_dir: str | None) -> None:
    """One PM sampling session (start, the workload's reps, stop, decode) into run."""
    ts0 = lib.timestamp()
    run["start"] = lib.pm_start()
    wall = timed(torch, w)
    run["stop"] = lib.pm_stop()
    ts1 = lib.timestamp()
    run["wall_s"] = wall
    run["overhead_x"] = round(wall / base["median_s"], 3)
    t0 = time.monotonic()
    dec = lib.pm_decode(8000)
    run["decode_wall_s"] = round(time.monotonic() - t0, 3)
    run["decode"] = {k: v for k, v in dec.items() if k != "samples"}
    run["summary"] = pm_summary(dec, ts0, ts1)
    if out_dir:
        with open(os.path.join(out_dir, f"pm_samples_{w.name}.json"), "w") as f:
            json.dump(dec.get("samples", {}), f)


def rp_session(
    torch,
    lib: Lib,
    metrics: list[str],
    w: Workload,
    range_mode: int,
    replay: int,
    reps: int,
    max_passes: int = 30,
) -> dict:
    """One enable..disable of the range profiler around `reps` runs of w."""
    res: dict = {"reps": reps}
    t0 = time.perf_counter()
    res["setup"] = setup = lib.rp_setup(",".join(metrics), range_mode, replay, 1024)
    res["setup_s"] = round(time.perf_counter() - t0, 4)
    if setup.get("stage") != "configured":
        res["error"] = first_failure(setup)
        res["teardown"] = lib.rp_teardown()
        return res
    passes = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while len(passes) < max_passes:
        p: dict = {"start": lib.rp_start()}
        if range_mode == 2:
            p["push"] = lib.rp_push(w.name)
        for _ in range(reps):
            w.fn()
        if range_mode == 2:
            p["pop"] = lib.rp_pop()
        torch.cuda.synchronize()
        p["stop"] = lib.rp_stop()
        passes.append(p)
        if p["stop"].get("all_passes_submitted") or not p["stop"].get("ok"):
            break
        if replay == 2:  # kernel replay does its passes inside each launch: one round only
            break
    res["wall_s"] = time.perf_counter() - t0
    res["rounds"] = len(passes)
    res["passes"] = passes if len(passes) <= 3 else passes[:2] + passes[-1:]
    dec = lib.rp_decode(400)
    ranges = dec.pop("ranges", [])
    res["decode"] = dec
    res["n_ranges"] = dec.get("num_ranges", len(ranges))
    res["range_names"] = [r.get("name") for r in ranges[:40]]
    res["ranges"] = ranges[:40]
    res["teardown"] = lib.rp_teardown()
    return res


def step_rp(step: Step, lib_path: str, user: bool) -> None:
    torch, lib = open_gpu(step, lib_path)
    if lib is None:
        return
    metrics = usable_metrics(step, lib, 0, RP_METRICS, one_pass=False)
    if not metrics:
        step.r["error"] = "no range profiler metric could be configured"
        step.save()
        return
    workloads = make_workloads(torch, ("gemm", "elementwise", "tiny_graph", "mixed_graph"))
    base = {w.name: baseline(torch, w) for w in workloads.values()}
    step.r["baseline"] = base
    step.save()
    sessions = step.r.setdefault("sessions", {})
    # (label, workload, range mode, replay mode, reps): 1 auto / 2 user; 2 kernel / 3 user.
    plan = (
        [
            ("user_range.user_replay", n, 2, 3, 2)
            for n in ("gemm", "elementwise", "tiny_graph", "mixed_graph")
        ]
        + [("auto_range.user_replay", n, 1, 3, 1) for n in ("mixed_graph", "tiny_graph")]
        if user
        else [
            ("auto_range.kernel_replay", n, 1, 2, r)
            for n, r in (("gemm", 2), ("elementwise", 2), ("mixed_graph", 1), ("tiny_graph", 1))
        ]
    )
    for label, name, range_mode, replay, reps in plan:
        w = workloads[name]
        key = f"{label}.{name}"
        try:
            res = rp_session(torch, lib, metrics, w, range_mode, replay, reps)
        except Exception as e:  # e.g. a launch refused while profiling: record, clean up, go on
            res = {"error": error_text(e), "teardown": lib.rp_teardown()}
        sessions[key] = res
        per_rep = base[name]["median_s"] / w.reps
        if "wall_s" in res:
            res["overhead_x"] = round(res["wall_s"] / (per_rep * reps), 2)
        res["expected_kernels"] = w.kernels * reps
        step.save()
    step.r["after"] = {w.name: baseline(torch, w, 1) for w in workloads.values()}
    step.save()


def run_step(args) -> int:
    step = Step(args.result)
    step.r["step"] = args.step
    step.save()
    try:
        if args.step == "env":
            step_env(step, args.lib)
        elif args.step == "pm":
            step_pm(step, args.lib, args.out)
        elif args.step in ("rp_kernel", "rp_user"):
            step_rp(step, args.lib, user=args.step == "rp_user")
        else:
            step.r["error"] = f"unknown step {args.step}"
    except Exception as e:
        step.r["error"] = error_text(e)
        step.r["traceback"] = traceback.format_exc()[-3000:]
    step.r["done"] = True
    step.save()
    return 0


# ---- the parent ----------------------------------------------------------------------


def run_child(name: str, lib: str, timeout: float, out_dir: str | None) -> dict:
    fd, path = tempfile.mkstemp(prefix=f"gs_counters_{name}_", suffix=".json")
    os.close(fd)
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--step",
        name,
        "--lib",
        lib,
        "--result",
        path,
    ]
    if out_dir:
        cmd += ["--out", out_dir]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
            os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    text = output.decode(errors="replace")
    res: dict = {}
    try:
        with open(path) as f:
            res = json.load(f)
    except (OSError, ValueError) as e:
        res = {"error": f"no result from the step: {error_text(e)}"}
    finally:
        os.unlink(path)
    lines = text.splitlines()
    inflight = [ln for ln in lines if ln.startswith("GSCALL ")]
    res["process"] = {
        "rc": proc.returncode,
        "timed_out": timed_out,
        "timeout_s": round(timeout, 1),
        "wall_s": round(time.monotonic() - t0, 2),
        "signal": -proc.returncode if proc.returncode and proc.returncode < 0 else None,
        "last_cupti_call": inflight[-1] if inflight else None,
        "output_tail": [ln for ln in lines if not ln.startswith("GSCALL ")][-25:],
    }
    if not res.get("done") and "error" not in res:
        why = "timed out" if timed_out else f"ended with rc {proc.returncode}"
        res["error"] = f"step {why} during {res['process']['last_cupti_call'] or 'python code'}"
    return res


def ncu_probe(timeout: float) -> dict:
    res: dict = {}
    exe = shutil.which("ncu") or next(
        iter(
            sorted(
                glob.glob("/usr/local/cuda*/bin/ncu")
                + glob.glob("/opt/nvidia/nsight-compute/*/ncu")
            )
        ),
        None,
    )
    res["path"] = exe
    if exe is None:
        res["error"] = "ncu not found"
        return res
    res["version"] = sh([exe, "--version"], 15)
    work = os.path.join(tempfile.mkdtemp(prefix="gs_ncu_"), "work.py")
    with open(work, "w") as f:
        f.write(
            "import torch\n"
            "x = torch.ones(2**26, device='cuda')\n"
            "y = x * 2\n"
            "torch.cuda.synchronize()\n"
            "print('workload ok', float(y[0]))\n"
        )
    cmd = [
        exe,
        "--metrics",
        f"{DRAM_PCT},{SM_PCT},gpu__time_duration.sum",
        "-c",
        "3",
        sys.executable,
        work,
    ]
    run = sh(cmd, timeout)
    res["run"] = {"cmd": " ".join(cmd), **run}
    lines = run.get("out", "").splitlines()
    bad = [
        ln
        for ln in lines
        if "ERR" in ln or "rror" in ln or "LibraryNotLoaded" in ln or "ermission" in ln
    ]
    res["first_error_line"] = bad[0] if bad else None
    res["metric_lines"] = [ln.strip() for ln in lines if "__" in ln][:12]
    res["works"] = run.get("rc") == 0 and bool(res["metric_lines"]) and not bad
    return res


def verdicts(doc: dict) -> dict:
    """Plain answers drawn from the steps (read these first)."""
    steps = doc.get("steps", {})
    v: dict = {}
    env = steps.get("env", {})
    support = env.get("cupti", {}).get("device_supported", {})
    v["device_supported"] = {k: s.get("isSupported", s.get("rc_name")) for k, s in support.items()}
    fails = failed_calls(steps)
    v["failed_calls"] = fails
    v["insufficient_privileges"] = any(
        "INSUFFICIENT_PRIVILEGES" in n for per in fails.values() for n in per
    )
    pm = steps.get("pm", {})
    runs = pm.get("runs", {})
    v["pm_sampling"] = (
        "works"
        if runs and all(r.get("summary", {}).get("n") for r in runs.values())
        else pm.get("error") or "not run"
    )
    v["pm_metrics"] = pm.get("chosen_1")
    v["pm_overhead_x"] = {k: r.get("overhead_x") for k, r in runs.items()}
    v["pm_sanity"] = sanity({k: r.get("summary", {}).get("stats", {}) for k, r in runs.items()})
    for label in ("rp_kernel", "rp_user"):
        st = steps.get(label, {})
        sessions = st.get("sessions", {})
        v[label] = {
            k: {
                "ranges": s.get("n_ranges"),
                "expected_kernels": s.get("expected_kernels"),
                "rounds": s.get("rounds"),
                "overhead_x": s.get("overhead_x"),
                "error": s.get("error") or first_failure(s.get("decode")),
            }
            for k, s in sessions.items()
        } or (st.get("error") or "not run")
        v[label + "_metrics"] = st.get("chosen_0")
    kernel_sessions = steps.get("rp_kernel", {}).get("sessions", {})
    v["rp_kernel_sanity"] = sanity(range_stats(kernel_sessions, "auto_range.kernel_replay"))
    # Per-kernel values inside a graph replay: auto ranges over a replay, one range a kernel.
    inside = {}
    for label in ("rp_kernel", "rp_user"):
        for k, s in steps.get(label, {}).get("sessions", {}).items():
            if k.startswith("auto_range") and "graph" in k and s.get("n_ranges") is not None:
                inside[k] = s["n_ranges"] >= s.get("expected_kernels", 0) > 0
    v["per_kernel_inside_graph_replay"] = inside or None
    v["ncu"] = (doc.get("ncu") or {}).get("works")
    return v


def sanity(stats: dict) -> dict:
    """Do the figures read as expected? gemm compute bound, elementwise >= 60% of DRAM peak,
    the tiny-kernel graph neither. stats: {workload: {metric: {"p90": value, ...}}}; the first
    of the SM and DRAM alternates present is used (named under "metrics")."""
    out: dict = {}

    def pick(work, names):
        for name in names:
            s = (stats.get(work) or {}).get(name)
            if isinstance(s, dict) and s.get("p90") is not None:
                out.setdefault("metrics", {}).setdefault(work, []).append(name)
                return s["p90"]
        return None

    g_sm, g_dram = pick("gemm", SM_ALTERNATES), pick("gemm", DRAM_ALTERNATES)
    if g_sm is not None and g_dram is not None:
        out["gemm_compute_bound"] = g_sm >= 50 and g_sm > g_dram
    e_dram = pick("elementwise", DRAM_ALTERNATES)
    if e_dram is not None:
        out["elementwise_dram_ge_60pct"] = e_dram >= 60
    t_sm, t_dram = pick("tiny_graph", SM_ALTERNATES), pick("tiny_graph", DRAM_ALTERNATES)
    if t_sm is not None and t_dram is not None:
        out["tiny_graph_latency_bound"] = t_sm < 50 and t_dram < 50
    return out


def range_stats(sessions: dict, label: str) -> dict:
    """{workload: {metric: {"p90": median over the ranges}}} of one range profiler mode, the
    shape sanity() reads."""
    out: dict = {}
    for key, s in sessions.items():
        if not key.startswith(label + "."):
            continue
        per: dict = {}
        for r in s.get("ranges", []):
            for metric, value in (r.get("values") or {}).items():
                if value is not None:
                    per.setdefault(metric, []).append(value)
        out[key[len(label) + 1 :]] = {m: {"p90": statistics.median(v)} for m, v in per.items()}
    return out


def write(doc: dict, out_dir: str | None) -> None:
    if not out_dir:
        return
    try:
        os.makedirs(out_dir, exist_ok=True)
        tmp = os.path.join(out_dir, "counters_probe.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, os.path.join(out_dir, "counters_probe.json"))
    except OSError as e:
        doc.setdefault("errors", []).append(f"cannot write to $OUT: {error_text(e)}")


def parent(args) -> int:
    deadline = time.monotonic() + args.budget
    doc: dict = {
        "probe": "graphscope counters",
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "lib": args.lib,
        "budget_s": args.budget,
        "errors": [],
        "steps": {},
    }
    try:
        doc["host"] = host_facts()
    except Exception as e:
        doc["errors"].append(f"host facts: {error_text(e)}")
    if args.build_log:
        doc["build"] = {"log": (read(args.build_log, 200_000) or "")[-4000:]}
    if not os.path.exists(args.lib):
        doc["errors"].append(f"probe library not built: {args.lib} (run.sh builds it)")
    write(doc, args.out)
    gpu = True
    for name, cap in STEPS:
        left = deadline - NCU_RESERVE - time.monotonic()
        if not gpu:
            doc["steps"][name] = {"skipped": "no GPU or no library (see env)"}
            continue
        if left < 15:
            doc["steps"][name] = {"skipped": f"probe budget spent ({args.budget} s)"}
            continue
        try:
            res = run_child(name, args.lib, min(cap, left - 10), args.out)
        except Exception as e:
            res = {"error": f"could not run the step: {error_text(e)}"}
        doc["steps"][name] = res
        if name == "env":
            load = res.get("load") or {}
            # Missing symbols are recorded per call (SYMBOL_MISSING); only no libcupti stops.
            gpu = "device" in res and bool(load) and "cupti_dlerror" not in load
            if res.get("error"):
                doc["errors"].append(f"env: {res['error']}")
            if load.get("missing"):
                doc["errors"].append(f"env: symbols missing: {', '.join(load['missing'])}")
        write(doc, args.out)
    left = deadline - time.monotonic()
    if not gpu:
        doc["ncu"] = {"skipped": "no GPU"}
    elif left < 20:
        doc["ncu"] = {"skipped": f"probe budget spent ({args.budget} s)"}
    else:
        try:
            doc["ncu"] = ncu_probe(min(NCU_TIMEOUT, left - 5))
        except Exception as e:
            doc["ncu"] = {"error": error_text(e)}
    try:
        doc["verdicts"] = verdicts(doc)
    except Exception as e:
        doc["errors"].append(f"verdicts: {error_text(e)}")
    doc["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write(doc, args.out)
    print(json.dumps(doc, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--lib",
        default=os.environ.get("GS_COUNTERS_LIB", DEFAULT_LIB),
        help="the built counters_probe library (run.sh builds it)",
    )
    ap.add_argument(
        "--budget", type=float, default=210.0, help="seconds for all steps and ncu together"
    )
    ap.add_argument(
        "--out",
        default=os.environ.get("OUT") or None,
        help="folder for counters_probe.json (default: $OUT)",
    )
    ap.add_argument("--build-log", help="run.sh's build log, attached to the JSON")
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.step:
        return run_step(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
