"""The CUPTI activity tracer (csrc/tracer.cpp): kernel, memcpy and memset records of replays,
and CUPTI detached from the process once they are taken."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._errors import ProfilerActiveError
from .loader import call, column, ensure_loaded, maybe_extension
from .profilers import profiler_active, watch_profiler


@dataclass(frozen=True)
class ActivityRecords:
    """Kernel (kind 0), memcpy (1) and memset (2) activity records, as columns."""

    kind: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    graph_id: np.ndarray
    graph_node_id: np.ndarray
    grid: np.ndarray
    block: np.ndarray
    name_idx: np.ndarray
    bytes: np.ndarray
    names: list[str]
    dropped: int
    flush_ns: int = 0  # cuptiActivityFlushAll at stop (CUPTI completing its records)
    decode_ns: int = 0  # graphscope reading records into these columns (mostly during replays)
    tail_decode_ns: int = 0  # the part of decode_ns done inside the flush
    # cudaGraphLaunch's host interval per launch (runtime-API records, CUPTI's clock) and the
    # correlation id its nodes carry; empty where this CUPTI cannot record single APIs
    launch_start_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    launch_end_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    launch_correlation: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    runtime_records: int = 0  # runtime-API records seen while tracing (launches among them)


def tracer_active() -> bool:
    ext = maybe_extension()
    return ext is not None and bool(ext.tracer_active())


def cupti_detach() -> str:
    """Detach CUPTI from the process (``cuptiFinalize`` at a driver call's exit, as Kineto's
    teardown does): once activity records have been on, an attached CUPTI slows the program's
    later captures. The next CUPTI call attaches it again. Returns '' or why it did not (the
    tracer or recorder running, PM sampling on, another subscriber such as torch.profiler's)."""
    ext = maybe_extension()
    if ext is None:
        return "the graphscope extension is not loaded"
    return str(call(ext.cupti_detach))


def _activity_records(d: Any) -> ActivityRecords:
    return ActivityRecords(
        kind=column(d["kind"], "<i4"),
        start_ns=column(d["start"], "<u8"),
        end_ns=column(d["end"], "<u8"),
        device=column(d["device"], "<u4"),
        stream=column(d["stream"], "<u4"),
        correlation=column(d["correlation"], "<u4"),
        graph_id=column(d["graph_id"], "<u4"),
        graph_node_id=column(d["graph_node_id"], "<u8"),
        grid=column(d["grid"], "<i4", 3),
        block=column(d["block"], "<i4", 3),
        name_idx=column(d["name_idx"], "<i4"),
        bytes=column(d["bytes"], "<u8"),
        names=list(d["names"]),
        dropped=int(d["dropped"]),
        flush_ns=int(d["flush_ns"]),
        decode_ns=int(d["decode_ns"]),
        tail_decode_ns=int(d["tail_decode_ns"]),
        launch_start_ns=column(d["launch_start"], "<u8"),
        launch_end_ns=column(d["launch_end"], "<u8"),
        launch_correlation=column(d["launch_correlation"], "<u4"),
        runtime_records=int(d["runtime_records"]),
    )


@contextmanager
def tracing() -> Iterator[list[ActivityRecords]]:
    """Collect CUPTI activity records for the ``with`` body; the list holds them afterwards."""
    ext = ensure_loaded()
    watch_profiler()
    if profiler_active():
        raise ProfilerActiveError(
            "torch.profiler is active: graphscope's tracer would take its CUPTI activity "
            "buffers; trace outside the profiler's `with` block"
        )
    call(ext.tracer_start)
    out: list[ActivityRecords] = []
    try:
        yield out
    finally:
        out.append(_activity_records(call(ext.tracer_stop)))
