"""The bucket ladder: the graphs a program captures at one site, one per bucket (static input
shapes), as serving engines capture one decode graph per batch size.

Per bucket: replays over the run, GPU time per replay (median of the traced replays), time per
batch row (the first dimension of the first input shape), memory (the capture's peak working set
in its pool and the new pool segments it reserved), capture cost (capture + instantiate).
Buckets never replayed are listed; graphs of the same structure (the same kernels and edges,
other launch dimensions) are grouped.

Trimming the ladder (``trim``): a bucket the program never replayed, and a bucket whose time
per replay is not below the next larger traced bucket's by more than the noise (the larger of
the two buckets' spreads, half their replays' IQR, and NOISE_PCT % of the larger's time), cost
a capture, an instantiation and their pool segments for nothing: the program could pad its
batch up to the next larger bucket at no loss. Each is named with what it costs, measured.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Optional

from ..model.bundle import Bundle
from ..model.graph import CapturedGraph

_FIRST_DIM = re.compile(r"\[(\d+)")
NOISE_PCT = 2.0  # the least difference between two buckets' times that counts


def batch_rows(shapes: str) -> Optional[int]:
    """The bucket size: the first dimension of the first input shape (``[8,1] [1]`` -> 8)."""
    m = _FIRST_DIM.search(shapes or "")
    return int(m.group(1)) if m else None


def structure_key(g: CapturedGraph) -> str:
    """The same for graphs with the same kernels and edges, whatever their launch dims."""
    label = {n.local_id: (n.kernel or n.demangled or n.type) for n in g.nodes}
    kernels = sorted(label.values())
    edges = sorted((label.get(a, "?"), label.get(b, "?")) for a, b in g.edges)
    return hashlib.sha1(repr((kernels, edges)).encode()).hexdigest()[:12]


def site_of(g: CapturedGraph) -> Optional[str]:
    """The capture site a graph belongs to: ``run``'s site, or a model file's buckets."""
    site = g.info.get("site")
    if site:
        return str(site) + (" compiled" if g.info.get("kind") == "compiled" else "")
    if g.info.get("kind") == "forward":
        return "forward buckets"
    return None


def ladder(bundle: Bundle, graph_rows: list[dict[str, Any]], min_graphs: int = 2
           ) -> list[dict[str, Any]]:
    """One entry per site that captured at least ``min_graphs`` graphs, buckets by size;
    ``graph_rows``: the bundle's (``analysis.summary.graph_rows``: time per replay)."""
    rows = {r["name"]: r for r in graph_rows}
    sites: dict[str, list[CapturedGraph]] = {}
    for g in bundle.graphs:
        site = site_of(g)
        if site is not None:
            sites.setdefault(site, []).append(g)
    return [_site(site, graphs, rows, bundle.replays) for site, graphs in sites.items()
            if len(graphs) >= min_graphs]


def _site(site: str, graphs: list[CapturedGraph], rows: dict[str, dict[str, Any]],
          every: int) -> dict[str, Any]:
    """One capture site's ladder: its buckets by batch size, the graph structures among
    them, their pools and capture times."""
    groups: dict[str, list[str]] = {}
    buckets = []
    spread: dict[str, float] = {}
    for g in graphs:
        key = structure_key(g)
        groups.setdefault(key, []).append(g.name)
        buckets.append(_bucket(g, rows[g.name], key, every))
        spread[g.name] = _spread(g)
    order = {k: i + 1 for i, k in enumerate(groups)}
    for b in buckets:
        b["structure"] = order[b["structure"]]
    buckets.sort(key=lambda b: (b["batch"] is None, b["batch"] or 0, b["name"]))
    caps = [b["capture_s"] for b in buckets if b["capture_s"] is not None]
    insts = [b["instantiate_s"] for b in buckets if b["instantiate_s"] is not None]
    pool_ids = {str(b["pool_id"]) for b in buckets if b["pool_id"] is not None}
    return {
        "site": site,
        "buckets": buckets,
        "never_replayed": [b["name"] for b in buckets if b["replays"] == 0],
        "structures": [{"structure": order[k], "graphs": names} for k, names in groups.items()],
        # None: a bundle from before pool ids (its pools cannot be told apart), not 0
        "pools": len(pool_ids) if pool_ids else None,
        "capture_s": round(sum(caps), 6) if caps else None,
        "instantiate_s": round(sum(insts), 6) if insts else None,
        "trim": trim(buckets, spread),
        "ops_recorded": sum(1 for b in buckets if b["ops_recorded"]),
        "scopes_counted": sum(1 for b in buckets if b["scopes_from"] == "node_counts"),
    }


def _bucket(g: CapturedGraph, row: dict[str, Any], key: str, every: int) -> dict[str, Any]:
    """One bucket of a ladder: its batch, time per replay and per row, memory and capture."""
    info = g.info
    size = batch_rows(str(info.get("shapes", "")))
    med = row.get("median_ns") or None
    return {
        "name": g.name,
        "shapes": info.get("shapes", ""),
        "batch": size,
        "replays": int(info.get("replays", every) or 0),
        "traced_replays": int(info.get("traced_replays", every) or 0),
        "median_ns": med,
        "ns_per_row": (med / size) if med and size else None,
        "kernels": row["work_nodes"],
        "peak_bytes": info.get("capture_peak_bytes"),
        "held_bytes": info.get("capture_live_bytes"),
        "segment_bytes": info.get("capture_segment_bytes"),
        "pool_bytes": info.get("pool_bytes"),
        "pool_id": info.get("pool_id"),
        "capture_s": info.get("capture_s"),
        "instantiate_s": info.get("instantiate_s"),
        "structure": key,
        # False: captured past graphscope run's --op-captures (module scopes only)
        "ops_recorded": bool(info.get("ops_recorded", True)),
        # "node_counts": its scopes from node counts, no CUPTI in its capture
        "scopes_from": info.get("scopes_from", "cupti"),
    }


def _spread(g: CapturedGraph) -> float:
    """Half the IQR of a graph's GPU work over its traced replays (0 below four)."""
    import numpy as np

    rows = [n.durations_ns for n in g.nodes if n.is_work and n.durations_ns]
    r = min(map(len, rows), default=0)
    if r < 4:
        return 0.0
    sums = np.asarray([x[:r] for x in rows], np.float64).sum(axis=0)
    q1, q3 = np.percentile(sums[sums > 0], [25, 75]) if (sums > 0).sum() >= 4 else (0.0, 0.0)
    return float(q3 - q1) / 2.0


def trim(buckets: list[dict[str, Any]], spread: dict[str, float]) -> dict[str, Any]:
    """The buckets a program could drop (module docstring), each with the larger bucket it
    would run as once they are dropped, and what dropping them all frees: capture and
    instantiation time, and at most their new pool segments (in a shared pool the first
    capture reserves the segments: without it the next one reserves what it needs)."""
    timed = [b for b in buckets if b["batch"] and b["median_ns"] and b["replays"]]
    slower = []
    for b, up in zip(timed, timed[1:]):
        noise = max(spread.get(b["name"], 0.0), spread.get(up["name"], 0.0),
                    NOISE_PCT / 100.0 * up["median_ns"])
        if b["median_ns"] >= up["median_ns"] - noise:
            slower.append({"bucket": b["name"], "median_ns": b["median_ns"],
                           "into": up["name"], "into_ns": up["median_ns"]})
    gone = {b["name"] for b in buckets if b["replays"] == 0} | {x["bucket"] for x in slower}
    dropped = [b for b in buckets if b["name"] in gone]
    kept = [b for b in timed if b["name"] not in gone]
    size = {b["name"]: b["batch"] for b in timed}
    for x in slower:  # the bucket it runs as once the ladder is trimmed: the next one kept
        larger = [b for b in kept if b["batch"] > size[x["bucket"]]]
        if larger:
            x["into"], x["into_ns"] = larger[0]["name"], larger[0]["median_ns"]

    def total(key: str) -> Optional[float]:
        vals = [b[key] for b in dropped if b[key] is not None]
        return sum(vals) if vals else None

    capture = [x for x in (total("capture_s"), total("instantiate_s")) if x is not None]
    return {"no_faster": slower, "buckets": len(dropped),
            "segment_bytes": total("segment_bytes"),
            "capture_s": round(sum(capture), 6) if capture else None}
