"""The caching allocator's events during capture windows, and what a window's allocations in
its graph's pool add up to, by the module scope active at each allocation.

The events come from graphscope's allocator trace tracker (``graphscope.native._alloctrace``)
or from torch's own allocator history (:mod:`graphscope.capture.meter` starts and reads them);
:class:`AllocatorEvents` indexes a batch's events by time, :func:`attribute` adds one window's
up. A pool's segments come from one ``torch.cuda.memory._snapshot()``.
"""

from __future__ import annotations

import bisect
from typing import Any, Optional

from ..model.graph import OUTSIDE_MODULES

HISTORY_ENTRIES = 1 << 20  # allocator events kept per capture window (per batch of them)
# how far past a window's end its events may be stamped: the allocator clock's conversion to
# the realtime clock of the marks has an error (the tracker's events are on the marks' clock)
END_SLACK_US = 500.0
OUTSIDE = OUTSIDE_MODULES  # allocations of a capture outside every module scope


class AllocatorEvents:
    """The allocator events of a batch of windows (the history of one snapshot, or the
    tracker's), indexed by time: the entries of a window in one bisection (a batch of windows
    reads one history, not one scan per window)."""

    slack_us = END_SLACK_US  # how far past a window's end its events may be stamped
    tracked_events = False  # the tracker's events (no ring buffer to wrap)
    dropped_from_ns: Optional[int] = None  # the tracker's first event not kept

    def __init__(self, snap: Optional[dict[str, Any]], offset_us: float,
                 entries: Optional[list[dict[str, Any]]] = None) -> None:
        if entries is None:
            traces = (snap or {}).get("device_traces") or []
            dev = device_index() if traces else 0
            entries = traces[dev] if dev < len(traces) else []
        times = [float(e.get("time_us", 0.0)) for e in entries]
        if any(b < a for a, b in zip(times, times[1:])):
            order = sorted(range(len(entries)), key=times.__getitem__)
            entries = [entries[i] for i in order]
            times = [times[i] for i in order]
        self.entries, self.times, self.offset_us = entries, times, offset_us
        self.valid = snap is not None and "device_traces" in snap

    @classmethod
    def tracked(cls, taken: tuple[list[tuple[int, ...]], int, int], actions: tuple[str, ...],
                dev: int) -> AllocatorEvents:
        """The tracker's events (``take()``: rows, dropped, first drop) of device ``dev``."""
        rows, dropped, first_drop_ns = taken
        entries = [{"action": actions[a], "addr": addr, "size": size, "time_us": t / 1000,
                    "pool_id": (p0, p1)}
                   for t, a, d, addr, size, p0, p1 in rows if d == dev]
        out = cls(None, 0.0, entries)
        out.valid, out.slack_us, out.tracked_events = True, 0.0, True
        out.dropped_from_ns = int(first_drop_ns) if dropped else None
        return out

    def lost(self, wall0_ns: int, end_ns: Optional[int] = None) -> bool:
        """Events of the window not kept: the ring buffer wrapped past its start, or the
        tracker's buffer was full before its end."""
        if self.tracked_events or self.dropped_from_ns is not None:
            return self.dropped_from_ns is not None and (
                end_ns is None or self.dropped_from_ns <= end_ns)
        return (len(self.entries) >= HISTORY_ENTRIES
                and self.times[0] > wall0_ns / 1000 + self.offset_us)

    def during(self, wall0_ns: int, end_ns: int) -> list[dict[str, Any]]:
        lo = bisect.bisect_left(self.times, wall0_ns / 1000 + self.offset_us)
        hi = bisect.bisect_right(self.times, end_ns / 1000 + self.offset_us + self.slack_us)
        return self.entries[lo:hi]

    def reserved_delta(self, wall0_ns: int, end_ns: int) -> Optional[int]:
        """Segments reserved less segments released in the window (all pools), as
        ``torch.cuda.memory_reserved()`` would have grown; None without a history."""
        if not self.valid:
            return None
        delta = 0
        for e in self.during(wall0_ns, end_ns):
            act = e.get("action")
            if act in ("segment_alloc", "segment_map"):
                delta += int(e.get("size", 0))
            elif act in ("segment_free", "segment_unmap"):
                delta -= int(e.get("size", 0))
        return delta


def _pool_test(segs: list[dict[str, Any]], pool: tuple[int, ...]) -> Any:
    """Whether an allocator event is in ``pool``: by its pool id where it has one, else by its
    address inside one of the pool's segments."""
    starts = sorted((int(s["address"]), int(s["address"]) + int(s["total_size"]))
                    for s in segs)
    lo = [a for a, _ in starts]

    def in_pool(e: dict[str, Any]) -> bool:
        pid = e.get("pool_id")
        if pid is not None:
            return tuple(int(x) for x in pid) == pool
        addr = int(e.get("addr", -1))
        i = bisect.bisect_right(lo, addr) - 1
        return i >= 0 and addr < starts[i][1]

    return in_pool


def attribute(entries: list[dict[str, Any]], segs: list[dict[str, Any]],
              pool: tuple[int, ...], marks: list[tuple[int, int]], names: dict[int, str],
              begin_us: float, end_us: float, offset_us: float) -> dict[str, Any]:
    """Allocations of a window in ``pool`` (events stamped ``begin_us`` to ``end_us`` on the
    allocator's clock, ``offset_us`` ahead of the marks' ``time_ns``): gross, held at the end,
    peak, new segments; and per module scope (the mark in force at each allocation, named by
    ``names``), bytes allocated and bytes still held."""
    in_pool = _pool_test(segs, pool)
    times = [t / 1000 + offset_us for t, _ in marks]
    mark_names = [names.get(s, OUTSIDE) for _, s in marks]
    live: dict[int, tuple[int, str]] = {}
    gross: dict[str, int] = {}
    cur = peak = total = new_segments = 0
    for e in entries:
        t = float(e.get("time_us", begin_us))
        if t < begin_us or t > end_us or not in_pool(e):
            continue
        act, addr, size = e.get("action"), int(e.get("addr", 0)), int(e.get("size", 0))
        if act == "alloc":
            i = max(bisect.bisect_right(times, t) - 1, 0)
            name = mark_names[i]
            live[addr] = (size, name)
            gross[name] = gross.get(name, 0) + size
            total += size
            cur += size
            peak = max(peak, cur)
        elif act == "free_requested" and addr in live:
            cur -= live.pop(addr)[0]
        elif act == "segment_alloc":
            new_segments += size
    held: dict[str, int] = {}
    for size, name in live.values():
        held[name] = held.get(name, 0) + size
    return {
        "capture_alloc_bytes": total,
        "capture_live_bytes": sum(held.values()),
        "capture_peak_bytes": peak,
        "capture_segment_bytes": new_segments,
        "memory_by_module": {n: [gross[n], held.get(n, 0)] for n in sorted(gross)},
    }


def pool_segments(snap: dict[str, Any], pool: tuple[int, ...]) -> list[dict[str, Any]]:
    """The snapshot's segments of ``pool``."""
    return [s for s in snap.get("segments", ()) if tuple(s.get("segment_pool_id", ())) == pool]


def pool_bytes(segs: list[dict[str, Any]]) -> dict[str, int]:
    """A pool's reserved and allocated bytes, from its segments."""
    return {"pool_bytes": sum(int(s.get("total_size", 0)) for s in segs),
            "pool_allocated_bytes": sum(int(s.get("allocated_size", 0)) for s in segs)}


def pool_facts(cuda_graph: Any) -> dict[str, Any]:
    """A graph's pool id and the pool's reserved and allocated bytes now (one snapshot)."""
    info: dict[str, Any] = {}
    try:
        import torch

        pool = tuple(int(x) for x in cuda_graph.pool())
        snap = torch.cuda.memory._snapshot()
    except Exception:
        return info
    info["pool_id"] = list(pool)
    info.update(pool_bytes(pool_segments(snap, pool)))
    return info


def graph_pool(cuda_graph: Any) -> Optional[tuple[int, ...]]:
    """The memory pool of a captured ``torch.cuda.CUDAGraph`` (None: a graph without one, a
    fake's or an old torch's)."""
    try:
        return tuple(map(int, cuda_graph.pool()))
    except Exception:  # noqa: BLE001
        return None


def cuda_initialized() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001
        return False


def device_index() -> int:
    import torch

    return int(torch.cuda.current_device())
