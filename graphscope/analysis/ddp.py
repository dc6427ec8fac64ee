"""Communication work per DDP gradient bucket and per FSDP module: which kernels communicate,
how long, and how much of it overlaps compute. Pure functions of a loaded bundle.

Overlap: per kept replay, each collective's interval against the union of the intervals of
work outside communication scopes (``(ddp)``, ``(fsdp)``) on other streams; a group's overlap
is the summed overlap over its collectives' summed time, over every kept replay.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..model.bundle import Bundle
from ..model.graph import DDP_SCOPE, FSDP_SCOPE, Node
from .collectives import COLLECTIVE, is_collective, is_comm_work
from .stats import median

__all__ = ["COLLECTIVE", "FsdpRow", "ddp_rows", "fsdp_rows", "is_collective"]


def _union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(a: tuple[int, int], merged: list[tuple[int, int]]) -> int:
    return sum(max(0, min(a[1], b) - max(a[0], s)) for s, b in merged)


def overlap_pct(bundle: Bundle, key: Callable[[Node], Optional[Hashable]]
                ) -> dict[Hashable, float]:
    """Per group (``key`` of a collective's node; None: not counted): % of its collectives'
    time that overlaps compute on other streams, over the kept replays (module docstring)."""
    by_id = {n.exec_node_id: n for n in bundle.work}
    per_replay: dict[int, list[Any]] = {}
    for e in bundle.events:
        per_replay.setdefault(int(e.get("replay", 0)), []).append(e)
    ov: dict[Hashable, float] = {}
    tot: dict[Hashable, float] = {}
    for evs in per_replay.values():
        compute: dict[Any, list[tuple[int, int]]] = {}  # stream -> compute intervals
        comms: list[tuple[Hashable, tuple[int, int], Any]] = []
        for e in evs:
            m = by_id.get(int(e.get("exec_node_id", -1)))
            if m is None:
                continue
            a = (int(e["start_ns"]), int(e["start_ns"]) + int(e["dur_ns"]))
            if not is_comm_work(m):
                compute.setdefault(e.get("stream"), []).append(a)
            elif is_collective(m) and (k := key(m)) is not None:
                comms.append((k, a, e.get("stream")))
        unions: dict[Any, list[tuple[int, int]]] = {}
        for k, a, stream in comms:
            if stream not in unions:
                unions[stream] = _union(
                    [iv for st, ivs in compute.items() if st != stream for iv in ivs])
            ov[k] = ov.get(k, 0.0) + _overlap(a, unions[stream])
            tot[k] = tot.get(k, 0.0) + a[1] - a[0]
    return {k: 100.0 * ov[k] / t for k, t in tot.items() if t > 0}


def _sums(bundle: Bundle, key: Callable[[Node], Optional[Hashable]]
          ) -> dict[Hashable, dict[str, Any]]:
    """Per group: nodes, collective nodes, and per replay the time of all and of collectives."""
    dur = bundle.durations
    out: dict[Hashable, dict[str, Any]] = {}
    for i, n in enumerate(bundle.work):
        k = key(n)
        if k is None:
            continue
        row = out.setdefault(k, {"node": n, "nodes": 0, "comm_nodes": 0,
                                 "_all": np.zeros(dur.shape[1]),
                                 "_comm": np.zeros(dur.shape[1])})
        row["nodes"] += 1
        row["_all"] = row["_all"] + dur[i]
        if is_collective(n):
            row["comm_nodes"] += 1
            row["_comm"] = row["_comm"] + dur[i]
    return out


def _bucket(n: Node) -> Optional[Hashable]:
    return n.annotation.get("ddp_bucket", "?") if n.module == DDP_SCOPE else None


def ddp_rows(bundle: Bundle) -> list[dict[str, Any]]:
    """DDP's reducer work per gradient bucket: nodes, communication (NCCL) time per replay,
    and how much of that overlaps compute running on another stream (from the kept events)."""
    sums = _sums(bundle, _bucket)
    if not sums:
        return []
    overlap = overlap_pct(bundle, _bucket)
    rows = []
    for b in sorted(sums, key=lambda x: (not isinstance(x, int), str(x).zfill(6))):
        s = sums[b]
        a = s["node"].annotation
        row = {"bucket": b, "modules": list(a.get("bucket_modules", ())),
               "bucket_bytes": a.get("bucket_bytes"), "nodes": s["nodes"],
               "comm_nodes": s["comm_nodes"],
               "median_ns": median([float(x) for x in s["_all"]]),
               "comm_ns": median([float(x) for x in s["_comm"]])}
        if b in overlap:
            row["overlap_pct"] = overlap[b]
        rows.append(row)
    return rows


@dataclass(frozen=True)
class FsdpRow:
    """FSDP2's communication work for one module, one op and one phase (median per replay)."""

    module: str  # the FSDP module the all-gather or reduce-scatter serves
    op: str  # "all_gather" | "reduce_scatter"
    phase: str
    prefetch: bool  # issued early, by another module's hook
    nodes: int
    comm_nodes: int
    median_ns: float  # all its work: copies in and out, the collective, the division
    comm_ns: float  # the collectives alone
    overlap_pct: Optional[float]  # share of the collectives' time overlapping compute


def _fsdp(n: Node) -> Optional[Hashable]:
    if n.module != FSDP_SCOPE:
        return None
    a = n.annotation
    return (str(a.get("fsdp_module", "?")), str(a.get("fsdp_op", "?")), n.phase,
            bool(a.get("fsdp_prefetch")))


def fsdp_rows(bundle: Bundle) -> list[FsdpRow]:
    """FSDP2's all-gathers and reduce-scatters per module served, in the order of their first
    node (forward's all-gathers first, then backward's)."""
    sums = _sums(bundle, _fsdp)
    overlap = overlap_pct(bundle, _fsdp)
    rows = []
    for k, s in sums.items():
        a = s["node"].annotation
        rows.append(FsdpRow(
            module=str(a.get("fsdp_module", "?")), op=str(a.get("fsdp_op", "?")),
            phase=s["node"].phase, prefetch=bool(a.get("fsdp_prefetch")), nodes=s["nodes"],
            comm_nodes=s["comm_nodes"], median_ns=median([float(x) for x in s["_all"]]),
            comm_ns=median([float(x) for x in s["_comm"]]), overlap_pct=overlap.get(k)))
    return rows
