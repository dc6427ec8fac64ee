"""CUPTI PM sampling (hardware counters over GPU time): the Python face of
``csrc/pmsampling.cpp``, reached through :mod:`graphscope.native`'s door (``ensure_loaded``),
never by importing the extension itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import GraphscopeError
from .loader import call, column, ensure_loaded, extension


@dataclass
class PmSamples:
    """Evaluated PM samples as columns (CUPTI's clock, the activity records' one)."""

    start_ns: np.ndarray  # uint64
    end_ns: np.ndarray  # uint64
    values: np.ndarray  # float64, samples x metrics
    metrics: list[str]
    overflow: bool
    eval_failures: int
    chip: str
    setup_ns: int = 0
    decode_ns: int = 0

    def columns(self) -> dict[str, Any]:
        """{"start", "end", <metric>: column}: the layout the probe's pm_samples_*.json use."""
        out: dict[str, Any] = {"start": self.start_ns, "end": self.end_ns}
        for i, name in enumerate(self.metrics):
            out[name] = self.values[:, i]
        return out


def pm_sampling_why() -> str:
    """'' when CUPTI PM sampling can be set up here (extension, GPU, libcupti with the API),
    else why not, in one line. Never raises."""
    try:
        ext = ensure_loaded()
    except GraphscopeError as exc:
        return str(exc)
    why: str = ext.pm_supported()
    return why


@contextmanager
def pm_sampling(metrics: list[str], *, interval_ns: int = 20_000,
                hw_buffer_bytes: int = 512 << 20, max_samples: int = 20_000,
                device: int = 0) -> Iterator[list[PmSamples]]:
    """Sample ``metrics`` (one pass) every ``interval_ns`` of GPU time during the ``with``
    body; the list holds the decoded samples afterwards. The counter data image is sized for
    ``max_samples`` (the probe: 100,000 samples take 3 GB and 1 s to initialize)."""
    import time

    ext = ensure_loaded()
    t0 = time.perf_counter_ns()
    call(ext.pm_setup, device, list(metrics), interval_ns, hw_buffer_bytes, max_samples)
    setup_ns = time.perf_counter_ns() - t0
    out: list[PmSamples] = []
    try:
        call(ext.pm_start)
        try:
            yield out
        finally:
            call(ext.pm_stop)
        t0 = time.perf_counter_ns()
        d = call(ext.pm_decode)
        vals = np.frombuffer(d["values"], dtype="<f8").copy()
        names = list(d["metrics"])
        out.append(PmSamples(
            start_ns=column(d["start"], "<u8"), end_ns=column(d["end"], "<u8"),
            values=vals.reshape(-1, len(names)) if names else vals.reshape(0, 0),
            metrics=names, overflow=bool(d["overflow"]), eval_failures=int(d["eval_failures"]),
            chip=str(d["chip"]), setup_ns=setup_ns, decode_ns=time.perf_counter_ns() - t0))
    finally:
        ext.pm_teardown()


def pm_sampling_trial() -> str:
    """'' when a PM sampling session can really be set up here (one metric, a small image,
    torn down at once: what ``doctor`` checks), else why not in one line (privileges:
    CUPTI_ERROR_INSUFFICIENT_PRIVILEGES with the fix). Never raises."""
    why = pm_sampling_why()
    if why:
        return why
    ext = extension()
    try:
        call(ext.pm_setup, 0, ["dram__throughput.avg.pct_of_peak_sustained_elapsed"], 20_000,
              64 << 20, 100)
    except GraphscopeError as exc:
        return str(exc)
    finally:
        ext.pm_teardown()
    return ""
