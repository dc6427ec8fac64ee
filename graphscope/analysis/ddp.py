"""Collectives and DDP's gradient buckets: which kernels communicate, how long, and how much
of it overlaps compute. Pure functions of a loaded bundle."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model.bundle import Bundle
from ..model.graph import DDP_SCOPE, Node, NodeKind
from .stats import median

# kernels of collectives (NCCL and the names other backends give them)
COLLECTIVE = re.compile(r"nccl|allreduce|all_reduce|allgather|reduce_scatter|broadcast",
                        re.IGNORECASE)


def _union_len(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(a: tuple[int, int], merged: list[tuple[int, int]]) -> int:
    return sum(max(0, min(a[1], b) - max(a[0], s)) for s, b in merged)


def ddp_rows(bundle: Bundle) -> list[dict[str, Any]]:
    """DDP's reducer work per gradient bucket: nodes, communication (NCCL) time per replay,
    and how much of that overlaps compute running on another stream (from the kept events)."""
    work = bundle.work
    idx = [i for i, n in enumerate(work) if n.module == DDP_SCOPE]
    if not idx:
        return []
    dur = bundle.durations
    by_id = {n.exec_node_id: n for n in work}
    buckets: dict[Any, dict[str, Any]] = {}
    for i in idx:
        n = work[i]
        b = n.annotation.get("ddp_bucket", "?")
        row = buckets.setdefault(b, {
            "bucket": b, "modules": list(n.annotation.get("bucket_modules", ())),
            "bucket_bytes": n.annotation.get("bucket_bytes"), "nodes": 0, "comm_nodes": 0,
            "_all": np.zeros(dur.shape[1]), "_comm": np.zeros(dur.shape[1])})
        row["nodes"] += 1
        row["_all"] = row["_all"] + dur[i]
        if is_collective(n):
            row["comm_nodes"] += 1
            row["_comm"] = row["_comm"] + dur[i]
    # overlap: each comm kernel's interval against the union of non-DDP kernels on other
    # streams, per kept replay
    per_replay: dict[int, list[Any]] = {}
    for e in bundle.events:
        per_replay.setdefault(int(e.get("replay", 0)), []).append(e)
    overlap: dict[Any, list[float]] = {}
    comm_ev: dict[Any, list[float]] = {}
    for evs in per_replay.values():
        compute: dict[Any, list[tuple[int, int]]] = {}  # stream -> non-DDP kernel intervals
        comms: list[tuple[Node, tuple[int, int], Any]] = []
        for e in evs:
            m = by_id.get(int(e.get("exec_node_id", -1)))
            if m is None:
                continue
            a = (int(e["start_ns"]), int(e["start_ns"]) + int(e["dur_ns"]))
            if m.module != DDP_SCOPE:
                compute.setdefault(e.get("stream"), []).append(a)
            elif is_collective(m):
                comms.append((m, a, e.get("stream")))
        unions: dict[Any, list[tuple[int, int]]] = {}
        seen: dict[Any, list[float]] = {}
        for m, a, stream in comms:
            if stream not in unions:
                unions[stream] = _union_len(
                    [iv for st, ivs in compute.items() if st != stream for iv in ivs])
            v = seen.setdefault(m.annotation.get("ddp_bucket", "?"), [0.0, 0.0])
            v[0] += _overlap(a, unions[stream])
            v[1] += a[1] - a[0]
        for b, (ov, tot) in seen.items():
            overlap.setdefault(b, []).append(ov)
            comm_ev.setdefault(b, []).append(tot)
    rows = []
    for b in sorted(buckets, key=lambda x: (not isinstance(x, int), str(x).zfill(6))):
        row = buckets[b]
        all_ns, comm_ns = row.pop("_all"), row.pop("_comm")
        row["median_ns"] = median([float(x) for x in all_ns])
        row["comm_ns"] = median([float(x) for x in comm_ns])
        tot = float(np.sum(comm_ev.get(b, [])))
        if tot > 0:
            row["overlap_pct"] = 100.0 * float(np.sum(overlap[b])) / tot
        rows.append(row)
    return rows


def is_collective(n: Node) -> bool:
    """A kernel of a collective (NCCL's, or a name another backend gives one)."""
    return n.type == NodeKind.KERNEL and bool(COLLECTIVE.search(n.demangled or n.kernel or ""))
