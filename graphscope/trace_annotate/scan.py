"""Step 2: scanning the trace (pass 1). The native scanner (csrc, ``scan_events``) walks the
``traceEvents`` array chunk by chunk (:mod:`.chunks`) and returns columns; this keeps, per
event, only what the rules need, plus each chunk's byte spans so that pass 2 (:mod:`.write`)
splices without scanning again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .chunks import _SPANS, _chunks, _Layout
from .model import (
    CAT_AC2G,
    CAT_KERNEL,
    CAT_MEMSET,
    CAT_RUNTIME,
    CAT_USER,
    NO_TID,
    PH_F,
    PH_M,
    TraceError,
)


def _int_tids(a: np.ndarray) -> np.ndarray:
    """Lanes as int64; NO_TID for an event without one, or with one no int64 holds."""
    ok = np.isfinite(a) & (np.abs(a) < 2.0**62)
    return np.where(ok, np.where(ok, a, 0).astype(np.int64), NO_TID)


def _decode(text: Any, b: int, e: int) -> dict[str, Any]:
    import json

    try:
        out = json.loads(bytes(text[b:e]))
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"invalid JSON in an event at byte {b} ({exc})") from None
    return out if isinstance(out, dict) else {}


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """The parts joined, the list emptied (its arrays would double the columns' memory)."""
    out = np.concatenate(parts) if parts else np.zeros(0, dtype)
    parts.clear()
    return out


Sequence = tuple[float, int, str, tuple, tuple]  # ts, ordinal, name, grid, block of a kernel


@dataclass
class TraceScan:
    """Pass 1's result. Graphed work events (kernel, memcpy, memset with a graph node id) as
    columns, each by its ordinal (its index in the trace's event array); the rest as the few
    sets and lists the rules need; and the buffers' sizes and byte spans for pass 2."""

    events_in: int = 0
    ordinal: Any = None  # int64 ordinals of the graphed work events
    key: Any = None  # uint64 packed exec node id (exec id << 32 | local id)
    tid: Any = None  # int64 lane (NO_TID: none)
    ts: Any = None  # float64
    dur: Any = None  # float64, 0 where missing
    is_kernel: Any = None  # bool
    corr: Any = None  # int64 correlation id (-1: none)
    plain_work_tids: set[int] = field(default_factory=set)  # lanes of ungraphed work
    other_tids: set[int] = field(default_factory=set)  # lanes of every other kept event
    noise: list[tuple[int, int, float, int]] = field(default_factory=list)  # ord, tid, ts, cat
    meta: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)  # ord, tid, event
    launches: set[int] = field(default_factory=set)  # correlation ids of graph launches
    # kernels without graph node ids, per correlation id (only when a bundle can match them)
    seq_events: dict[int, list[Sequence]] = field(default_factory=lambda: defaultdict(list))
    seq_times: dict[int, tuple[float, float]] = field(default_factory=dict)  # ord: (ts, dur)
    ungraphed_corr: Any = None  # int64 correlation ids of kernels without graph node ids
    layout: Optional[_Layout] = None
    sizes: list[tuple[int, int]] = field(default_factory=list)  # per buffer: size, resume
    spans_of: dict[int, tuple[np.ndarray, ...]] = field(default_factory=dict)  # int32 spans

    def drop_rule_columns(self) -> None:
        """Free the columns only the rules read (pass 2 and the module track need none)."""
        self.key = self.tid = self.ts = self.is_kernel = None


def scan_trace(src: Any, sequences: bool) -> TraceScan:
    """Pass 1 over the trace ``src`` (see :func:`source`). ``sequences``: keep the kernels
    without graph node ids for matching by kernel sequence (a bundle is at hand)."""
    scan = TraceScan()
    graphed: list[list[np.ndarray]] = [[] for _ in range(7)]
    ungraphed: list[np.ndarray] = []
    layout: list[_Layout] = []
    base = 0
    for i_buf, text, c, _ in _chunks(src, layout, scan.sizes):
        scan.spans_of[i_buf] = tuple(c[k].astype(np.int32) for k in _SPANS)
        tid = _int_tids(c["tid"])
        is_graphed = _graphed_columns(c, tid, base, graphed, scan)
        _noise_and_metadata(text, c, tid, is_graphed, base, scan)
        _launches(text, c, scan.launches)
        ungraphed.append(c["corr"][(c["cat"] == CAT_KERNEL) & ~is_graphed])
        if sequences:
            _sequence_kernels(text, c, is_graphed, base, scan)
        base += len(c["begin"])
    scan.events_in = base
    scan.layout = layout[0]
    (scan.ordinal, scan.key, scan.tid, scan.ts, scan.dur, scan.is_kernel,
     scan.corr) = (_cat(g, t) for g, t in zip(graphed, (np.int64, np.uint64, np.int64,
                                                        np.float64, np.float64, np.bool_,
                                                        np.int64)))
    scan.ungraphed_corr = _cat(ungraphed, np.int64)
    return scan


def _graphed_columns(c: dict[str, np.ndarray], tid: np.ndarray, base: int,
                     out: list[list[np.ndarray]], scan: TraceScan) -> np.ndarray:
    """Append this chunk's graphed work events to the column lists ``out``; the mask of them.
    A graph node id in the low 32 bits only (PyTorch's in-process exporter) is packed with
    the event's separate ``graph id``."""
    cat = c["cat"]
    work = (cat >= CAT_KERNEL) & (cat <= CAT_MEMSET)
    key = c["gnid"].copy()
    low = (key >> np.uint64(32) == 0) & (c["gid"] != 0)
    key[low] |= c["gid"][low] << np.uint64(32)
    graphed = work & (c["has_gnid"] == 1) & (key != 0)
    idx = np.nonzero(graphed)[0]
    for col, part in zip(out, (idx + base, key[idx], tid[idx], c["ts"][idx],
                               np.nan_to_num(c["dur"][idx]), cat[idx] == CAT_KERNEL,
                               c["corr"][idx])):
        col.append(part)
    scan.plain_work_tids.update(tid[work & ~graphed].tolist())
    return graphed


def _noise_and_metadata(text: Any, c: dict[str, np.ndarray], tid: np.ndarray,
                        graphed: np.ndarray, base: int, scan: TraceScan) -> None:
    """Noise (gpu_user_annotation, ac2g flow ends: CUPTI copies them onto every lane during a
    replay) and metadata events, kept for the rules; the lanes of everything else."""
    cat, ph = c["cat"], c["ph"]
    is_noise = (cat == CAT_USER) | ((cat == CAT_AC2G) & (ph == PH_F))
    is_meta = ph == PH_M
    scan.other_tids.update(tid[~graphed & ~is_noise & ~is_meta].tolist())
    scan.noise.extend((base + j, int(tid[j]), float(c["ts"][j]), int(cat[j]))
                      for j in np.nonzero(is_noise)[0].tolist())
    scan.meta.extend((base + j, int(tid[j]), _decode(text, int(c["begin"][j]),
                                                     int(c["end"][j])))
                     for j in np.nonzero(is_meta)[0].tolist())


def _launches(text: Any, c: dict[str, np.ndarray], launches: set[int]) -> None:
    """The correlation ids of this chunk's graph launches (cudaGraphLaunch runtime events)."""
    for j in np.nonzero(c["cat"] == CAT_RUNTIME)[0].tolist():
        nb, ne = int(c["name_b"][j]), int(c["name_e"][j])
        if nb >= 0 and b"GraphLaunch" in bytes(text[nb:ne]):
            launches.add(int(c["corr"][j]))


def _sequence_kernels(text: Any, c: dict[str, np.ndarray], graphed: np.ndarray, base: int,
                      scan: TraceScan) -> None:
    """Kernels without graph node ids, with their (name, grid, block), per correlation id."""
    for j in np.nonzero((c["cat"] == CAT_KERNEL) & ~graphed & (c["corr"] >= 0))[0].tolist():
        e = _decode(text, int(c["begin"][j]), int(c["end"][j]))
        a = e.get("args") or {}
        scan.seq_events[int(c["corr"][j])].append(
            (float(e.get("ts", 0.0)), base + j, str(e.get("name", "")),
             tuple(a.get("grid", ())), tuple(a.get("block", ()))))
        scan.seq_times[base + j] = (float(c["ts"][j]), float(c["dur"][j]))
