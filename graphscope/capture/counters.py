"""``capture --counters``: hardware counters from dedicated replays.

After the timed replays (never during them), ``n`` more replays run under the CUPTI activity
tracer and CUPTI PM sampling at once; the samples are split over the traced node executions
by time overlap (:mod:`graphscope.analysis.counters`) and written as the bundle's
counters.json. Where PM sampling cannot work here, :func:`require_counters` fails with one
line before any GPU work.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from .. import native
from .._errors import CuptiError, GraphscopeError
from ..analysis import counters as ct
from ..native import pmsampling

DEFAULT_REPLAYS = 10
INTERVAL_NS = 20_000  # the probe's interval: 20 us over a 512 MiB hardware buffer
HW_BUFFER_BYTES = 512 << 20
# The counter data image grows ~30 KB a sample (the probe: 3 GB and 1 s to initialize for
# 100,000). It only needs to hold one decode round: a full image is evaluated, re-initialized
# and decoded again (native pm_decode); the 512 MiB hardware buffer holds the session.
MAX_SAMPLES_CAP = 20_000
MIN_SAMPLES = 2_000


class CountersUnavailableError(GraphscopeError):
    """PM sampling cannot be used on this machine (says why)."""


def require_counters() -> None:
    """Raise :class:`CountersUnavailableError` with one line when PM sampling cannot work."""
    why = pmsampling.pm_sampling_why()
    if why:
        raise CountersUnavailableError(f"--counters: hardware counters are not available "
                                       f"here: {why}")


def sample_budget(replay_wall_ns: int, replays: int, interval_ns: int = INTERVAL_NS) -> int:
    """Samples to size the counter data image for: twice the replays' wall time in intervals
    (plus idle before and after), within [MIN_SAMPLES, MAX_SAMPLES_CAP]."""
    need = 2 * replays * max(1, replay_wall_ns) // interval_ns + 500
    return int(min(MAX_SAMPLES_CAP, max(MIN_SAMPLES, need)))


def collect(replay: Callable[[], None], exec_node_ids: Mapping[int, str], replays: int,
            *, interval_ns: int = INTERVAL_NS) -> dict[str, Any]:
    """``replays`` dedicated replays, traced and PM-sampled: counters.json's payload."""
    import torch

    require_counters()
    t_all = time.perf_counter()
    replay()  # untraced: the same footing as the timed replays
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    replay()
    torch.cuda.synchronize()
    wall = time.perf_counter_ns() - t0
    budget = sample_budget(wall, replays, interval_ns)
    rec, s, names, missing = _sampled(replay, replays, interval_ns, budget)
    gnid = rec.graph_node_id.astype(np.uint64)
    work = np.fromiter(exec_node_ids.keys(), dtype=np.uint64, count=len(exec_node_ids))
    hit = np.isin(gnid, work)
    samples = ct.Samples.from_columns(s.columns(), names)
    clean, dropped = samples.clean()
    nc = ct.attribute(clean, gnid[hit], rec.start_ns[hit].astype(np.int64),
                      rec.end_ns[hit].astype(np.int64))
    peak = _peak_dram_gbps(torch)
    meta = {
        "method": "pm_sampling",
        "replays": replays,
        "interval_ns": interval_ns,
        "samples": len(clean),
        "samples_dropped": dropped,
        "sample_budget": budget,
        "overflow": s.overflow,
        "eval_failures": s.eval_failures,
        "chip": s.chip,
        "metrics": names,
        "missing_metrics": missing,
        "peak_dram_GBps": peak,
        "events": int(hit.sum()),
        "setup_s": round(s.setup_ns / 1e9, 3),
        "decode_s": round(s.decode_ns / 1e9, 3),
        "collect_s": round(time.perf_counter() - t_all, 3),
    }
    return ct.to_json(nc, meta=meta)


def _sampled(replay: Callable[[], None], replays: int, interval_ns: int, budget: int
             ) -> tuple[native.ActivityRecords, pmsampling.PmSamples, dict[str, str], list[str]]:
    """``replays`` replays traced and PM-sampled: the activity records, the samples, the
    metrics sampled (name -> CUPTI metric) and those this chip lacks (tried once without)."""
    import torch

    names = {k: v[0] for k, v in ct.METRICS.items()}
    missing: list[str] = []
    pm: list[pmsampling.PmSamples] = []
    for attempt in range(2):
        try:
            with native.tracing() as traced:
                with pmsampling.pm_sampling(list(names.values()), interval_ns=interval_ns,
                                            hw_buffer_bytes=HW_BUFFER_BYTES, max_samples=budget,
                                            device=torch.cuda.current_device()) as pm:
                    for _ in range(replays):
                        replay()
                    torch.cuda.synchronize()
            break
        except CuptiError as exc:
            optional = [k for k in names if k in ct.OPTIONAL_METRICS]
            if attempt or not optional or "ConfigAddMetrics" not in str(exc):
                raise CountersUnavailableError(f"--counters: PM sampling failed: {exc}") from exc
            missing = optional  # a chip without the tensor-pipe metric: the rest still work
            names = {k: v for k, v in names.items() if k not in ct.OPTIONAL_METRICS}
    return traced[0], pm[0], names, missing


def _peak_dram_gbps(torch: Any) -> Any:
    """Theoretical DRAM bandwidth from torch's device properties, where it has them."""
    try:
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        clock_khz = getattr(p, "memory_clock_rate", 0)
        bus_bits = getattr(p, "memory_bus_width", 0)
        if clock_khz and bus_bits:
            return round(2 * clock_khz * 1e3 * bus_bits / 8 / 1e9, 1)
    except Exception:  # noqa: BLE001 - a figure for the report only
        return None
    return None
