"""What a bundle's graphs cost in memory and capture time, adding up.

The facts are recorded per capture (``graphscope.capture.meter``) into each graph's ``info``:
``pool_id``, ``pool_bytes`` (the pool's reserved bytes at the end of its capture),
``pool_allocated_bytes``, ``capture_alloc_bytes`` / ``capture_live_bytes`` /
``capture_peak_bytes`` / ``capture_segment_bytes`` (the capture's allocations in its pool:
gross, still held at its end, its peak working set, new segments reserved), ``static_input_bytes``,
``static_output_bytes`` (what the captured call returned: model output and loss; for ``run``,
the returns of the outermost modules called in the capture),
``capture_reserved_bytes`` (all that ``torch.cuda.memory_reserved`` grew by during the
capture, in its pool or not), ``capture_s``, ``instantiate_s``, ``memory_by_module``
({module: [allocated, held]}) and ``capture_by_module_s``.

Graphs that share a pool are one group: the pool's reserved bytes once (its largest reading),
never once per graph; the bundle's total is the union of its pools. Memory a capture reserved
outside its pool (its ``capture_reserved_bytes`` less the pool's new segments: a library's
workspace made on another stream, say) is counted apart, so that pools plus outside add up to
what the captures took from the device.
"""

from __future__ import annotations

from typing import Any, Optional

from ..model.bundle import Bundle
from .stats import tree_key

GRAPH_KEYS = ("capture_s", "instantiate_s", "capture_alloc_bytes", "capture_live_bytes",
              "capture_peak_bytes", "capture_segment_bytes", "static_input_bytes",
              "static_output_bytes",
              "pool_allocated_bytes", "capture_reserved_bytes")


def has_memory(infos: list[dict[str, Any]]) -> bool:
    """Whether any graph carries the capture-cost/memory facts."""
    return any(any(k in i for k in ("capture_s", "capture_alloc_bytes")) for i in infos)


def pools(infos: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Pools, each once: its graphs, reserved bytes (largest reading), allocated bytes and the
    bytes its graphs' captures still hold. A graph without a pool id is a pool of its own."""
    groups: dict[str, dict[str, Any]] = {}
    for name, info in infos:
        pid = info.get("pool_id")
        key = str(list(pid)) if pid is not None else f"graph:{name}"
        g = groups.setdefault(key, {"pool_id": list(pid) if pid is not None else None,
                                    "graphs": [], "reserved_bytes": None,
                                    "allocated_bytes": None, "capture_live_bytes": None})
        g["graphs"].append(name)
        for out, src in (("reserved_bytes", "pool_bytes"),
                         ("allocated_bytes", "pool_allocated_bytes")):
            v = info.get(src)
            if v is not None:
                g[out] = max(g[out] or 0, int(v))
        if info.get("capture_live_bytes") is not None:
            g["capture_live_bytes"] = (g["capture_live_bytes"] or 0) + int(
                info["capture_live_bytes"])
    return [{"pool": i + 1, **g} for i, g in enumerate(groups.values())]


def _prefixes(module: str) -> list[str]:
    if module.startswith("(") or "." not in module:
        return [module]
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def by_module(infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Module rows (inclusive of sub-modules, depth-first) summed over ``infos``: bytes
    allocated during capture, bytes still held after it, capture time (the time between
    scope entries). The top-level rows add up to the captures' totals."""
    alloc: dict[str, int] = {}
    held: dict[str, int] = {}
    secs: dict[str, float] = {}
    for info in infos:
        for mod, (a, h) in (info.get("memory_by_module") or {}).items():
            for p in _prefixes(mod):
                alloc[p] = alloc.get(p, 0) + int(a)
                held[p] = held.get(p, 0) + int(h)
        for mod, s in (info.get("capture_by_module_s") or {}).items():
            for p in _prefixes(mod):
                secs[p] = secs.get(p, 0.0) + float(s)
    names = sorted(set(alloc) | set(secs),
                   key=tree_key)
    return [{"module": n, "level": 0 if n.startswith("(") else n.count("."),
             "alloc_bytes": alloc.get(n, 0), "held_bytes": held.get(n, 0),
             "capture_s": round(secs.get(n, 0.0), 6)} for n in names]


def memory_summary(bundle: Bundle) -> Optional[dict[str, Any]]:
    """Pools (each once), per graph memory and capture cost, totals, memory by module; None
    for a bundle recorded before graphscope measured these."""
    infos = [(g.name, dict(g.info)) for g in bundle.graphs]
    window = bundle.manifest.get("capture_s") if bundle.manifest else None
    # callables: torch's one call captures both graphs, timed as one window (the manifest's)
    timed_once = window is not None and any("pool_bytes" in i for _, i in infos)
    if not (has_memory([i for _, i in infos]) or timed_once):
        return None
    pool_rows = pools(infos)
    pool_of = {n: p["pool"] for p in pool_rows for n in p["graphs"]}
    graphs = []
    for name, info in infos:
        row: dict[str, Any] = {"name": name, "pool": pool_of[name]}
        row.update({k: info[k] for k in GRAPH_KEYS if info.get(k) is not None})
        graphs.append(row)

    def total(key: str) -> Optional[float]:
        vals = [g[key] for g in graphs if key in g]
        return sum(vals) if vals else None

    reserved = [p["reserved_bytes"] for p in pool_rows if p["reserved_bytes"] is not None]
    outside = [max(int(i["capture_reserved_bytes"]) - int(i["capture_segment_bytes"]), 0)
               for _, i in infos
               if i.get("capture_reserved_bytes") is not None
               and i.get("capture_segment_bytes") is not None]
    out: dict[str, Any] = {
        "pools": pool_rows,
        "graphs": graphs,
        "total_reserved_bytes": sum(reserved) if reserved else None,
        "outside_pools_bytes": sum(outside) if outside else None,
        "capture_s": _round(total("capture_s")),
        "instantiate_s": _round(total("instantiate_s")),
        "capture_live_bytes": total("capture_live_bytes"),
    }
    if window is not None and out["capture_s"] is None:  # callables: one timed window
        out["capture_s"] = window
    modules = by_module([i for _, i in infos])
    if modules:
        out["by_module"] = modules
    return out


def _round(v: Optional[float]) -> Optional[float]:
    return None if v is None else round(float(v), 6)
