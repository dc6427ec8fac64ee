"""Hardware counters per node, module and phase: PM samples -> nodes by time overlap.

CUPTI's PM sampling gives one value per metric per fixed interval (20 us) of GPU time, on the
clock of the activity records (the probe in bench/probes/counters/ checked both). A sample is
split over the node executions it overlaps in proportion to the overlap time:

- ``elapsed`` metrics (``*.pct_of_peak_sustained_elapsed``: DRAM throughput, SM active) are a
  rate over the whole sample; the sample's activity (value x sample length) is shared by the
  nodes it overlaps, so a node that ran in half a sample (the rest idle) gets twice the rate;
- ``active`` metrics (``*.pct_of_peak_sustained_active``: warps active, tensor pipe) are
  already rates over the cycles the SMs were busy: a node gets their overlap-weighted mean;
- ``sum`` metrics (DRAM bytes) are counts: shared by overlap time.

A node's figure is (its share of the samples' quantities) / (its time covered by samples).
Exact where nodes run one at a time and span whole samples; ``shared_ns`` is the node time
in samples that also cover another node (neighbours shorter than a sample share a value) and
``concurrent_ns`` the node time during which another node ran too (several streams): figures
with concurrency are approximate and flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..model.bundle_files import COUNTERS_VERSION

MEMORY_BOUND_PCT = 60.0  # DRAM throughput at or over this: memory bound
COMPUTE_BOUND_PCT = 60.0  # SM active or tensor pipe at or over this (DRAM under): compute bound
APPROX_SHARE = 0.1  # concurrent time over this share of a row's time: marked approximate
STALE_SAMPLE_X = 4.0  # a sample this many times the median length is CUPTI's stale first one

# graphscope's name -> (CUPTI metric, kind). One PM-sampling pass on the H200 (the probe).
METRICS: dict[str, tuple[str, str]] = {
    "dram_pct": ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "elapsed"),
    "sm_active_pct": ("sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "elapsed"),
    "warps_active_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", "active"),
    "tensor_pct": ("TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg."
                   "pct_of_peak_sustained_active", "active"),
    "dram_read_bytes": ("dram__bytes_read.sum", "sum"),
    "dram_write_bytes": ("dram__bytes_write.sum", "sum"),
}
OPTIONAL_METRICS = frozenset({"tensor_pct"})  # dropped (and said so) where the chip lacks it
PCT = ("dram_pct", "sm_active_pct", "warps_active_pct", "tensor_pct")
VERDICTS = ("memory bound", "compute bound", "latency bound")


@dataclass
class Samples:
    """PM samples as columns: start/end ns (CUPTI clock) and one float column per metric,
    keyed by graphscope's metric name (:data:`METRICS`)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_columns(cls, cols: Mapping[str, Sequence[float]],
                     names: Optional[Mapping[str, str]] = None) -> Samples:
        """From CUPTI-named columns (``start``, ``end``, one per CUPTI metric name), as the
        native session and the probe's pm_samples_*.json give them."""
        names = names or {k: v[0] for k, v in METRICS.items()}
        start = np.asarray(cols["start"], dtype=np.int64)
        end = np.asarray(cols["end"], dtype=np.int64)
        vals = {k: np.asarray(cols[c], dtype=np.float64) for k, c in names.items() if c in cols}
        return cls(start, end, vals)

    def __len__(self) -> int:
        return len(self.start_ns)

    def clean(self) -> tuple[Samples, int]:
        """Samples in time order without the unusable ones (empty, or the stale first sample
        CUPTI reports from before start: far longer than the interval), and how many went."""
        order = np.argsort(self.start_ns, kind="stable")
        s, e = self.start_ns[order], self.end_ns[order]
        dur = e - s
        ok = dur > 0
        if ok.any():
            med = float(np.median(dur[ok]))
            ok &= dur <= STALE_SAMPLE_X * med
        for v in self.values.values():
            ok &= np.isfinite(v[order])
        keep = order[ok]
        return (Samples(self.start_ns[keep], self.end_ns[keep],
                        {k: v[keep] for k, v in self.values.items()}),
                int(len(order) - len(keep)))


@dataclass
class NodeCounters:
    """Per node (exec node id): time covered by samples and each metric's attributed quantity
    (figure = quantity / time_ns, see :func:`rates`)."""

    node_ids: np.ndarray  # uint64 exec node ids
    time_ns: np.ndarray
    shared_ns: np.ndarray
    concurrent_ns: np.ndarray
    quantity: dict[str, np.ndarray]


def _concurrent(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per interval, the time during which at least one other interval ran too (a sweep over
    the boundaries: the segments covered twice or more, summed within each interval)."""
    n = len(start)
    if n < 2:
        return np.zeros(n, dtype=np.float64)
    s, e = start.astype(np.int64), end.astype(np.int64)
    bounds = np.unique(np.concatenate([s, e]))
    delta = np.zeros(len(bounds), dtype=np.int64)
    np.add.at(delta, np.searchsorted(bounds, s), 1)
    np.add.at(delta, np.searchsorted(bounds, e), -1)
    active = np.cumsum(delta)[:-1]  # intervals covering segment [bounds[k], bounds[k+1])
    seg = np.where(active >= 2, np.diff(bounds), 0).astype(np.float64)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    return cum[np.searchsorted(bounds, e)] - cum[np.searchsorted(bounds, s)]


def attribute(samples: Samples, node_ids: np.ndarray, start_ns: np.ndarray,
              end_ns: np.ndarray, kinds: Optional[Mapping[str, str]] = None) -> NodeCounters:
    """Split clean samples (time order, no overlap) over node executions by overlap time.

    ``node_ids``/``start_ns``/``end_ns``: one row per traced execution (several replays give
    several rows per node), on the samples' clock.
    """
    kinds = kinds or {k: v[1] for k, v in METRICS.items()}
    node_ids = np.asarray(node_ids, dtype=np.uint64)
    st = np.asarray(start_ns, dtype=np.int64)
    en = np.asarray(end_ns, dtype=np.int64)
    ss, se = samples.start_ns.astype(np.int64), samples.end_ns.astype(np.int64)
    n_ev = len(st)
    # Pairs (event, sample) that overlap: samples are sorted and disjoint.
    first = np.searchsorted(se, st, side="right")
    last = np.searchsorted(ss, en, side="left")
    counts = np.clip(last - first, 0, None)
    ev = np.repeat(np.arange(n_ev), counts)
    offs = np.arange(len(ev)) - np.repeat(np.cumsum(counts) - counts, counts)
    smp = np.repeat(first, counts) + offs
    ov = (np.minimum(en[ev], se[smp]) - np.maximum(st[ev], ss[smp])).clip(0).astype(np.float64)
    keep = ov > 0
    ev, smp, ov = ev[keep], smp[keep], ov[keep]
    busy = np.bincount(smp, weights=ov, minlength=len(ss))  # node time per sample
    n_in = np.bincount(smp, minlength=len(ss))  # executions per sample
    dur = (se - ss).astype(np.float64)
    share = ov / busy[smp]  # this execution's share of the sample's activity
    uniq, inv = np.unique(node_ids, return_inverse=True)
    m = len(uniq)
    time_ns = np.bincount(inv[ev], weights=ov, minlength=m)
    shared = np.bincount(inv[ev], weights=np.where(n_in[smp] > 1, ov, 0.0), minlength=m)
    conc_ev = _concurrent(st, en)
    ev_time = np.bincount(ev, weights=ov, minlength=n_ev)
    ev_len = np.maximum((en - st).astype(np.float64), 1.0)
    concurrent = np.bincount(inv, weights=conc_ev * ev_time / ev_len, minlength=m)
    q: dict[str, np.ndarray] = {}
    for name, col in samples.values.items():
        v = col[smp]
        kind = kinds.get(name, "elapsed")
        if kind == "active":
            w = v * ov
        elif kind == "sum":
            w = v * share
        else:
            w = v * dur[smp] * share
        q[name] = np.bincount(inv[ev], weights=w, minlength=m)
    return NodeCounters(uniq, time_ns, shared, concurrent, q)


def rates(time_ns: float, quantity: Mapping[str, float]) -> dict[str, Optional[float]]:
    """Figures from attributed quantities: percentages (capped at 100: a node's share of a
    sample edge can overshoot) and DRAM GB/s from the byte counts."""
    out: dict[str, Optional[float]] = {}
    if time_ns <= 0:
        return dict.fromkeys((*PCT, "dram_GBps"))
    for k in PCT:
        out[k] = round(min(100.0, max(0.0, quantity[k] / time_ns)), 2) if k in quantity else None
    b = quantity.get("dram_read_bytes", 0.0) + quantity.get("dram_write_bytes", 0.0)
    has_bytes = "dram_read_bytes" in quantity or "dram_write_bytes" in quantity
    out["dram_GBps"] = round(b / time_ns, 1) if has_bytes else None  # bytes/ns = GB/s
    return out


def verdict(r: Mapping[str, Optional[float]]) -> str:
    """memory bound (DRAM >= 60 % of peak), else compute bound (SM active or tensor pipe >=
    60 %), else latency bound."""
    dram = r.get("dram_pct") or 0.0
    compute = max(r.get("sm_active_pct") or 0.0, r.get("tensor_pct") or 0.0)
    if dram >= MEMORY_BOUND_PCT:
        return "memory bound"
    if compute >= COMPUTE_BOUND_PCT:
        return "compute bound"
    return "latency bound"


# ------------------------------------------------------------------ the bundle's counters.json
def to_json(nc: NodeCounters, *, meta: Mapping[str, Any]) -> dict[str, Any]:
    """counters.json: per node columns plus how they were collected (``meta``)."""
    return {
        "version": COUNTERS_VERSION,
        **meta,
        "nodes": {
            "exec_node_id": [int(x) for x in nc.node_ids.tolist()],
            "time_ns": [round(x, 1) for x in nc.time_ns.tolist()],
            "shared_ns": [round(x, 1) for x in nc.shared_ns.tolist()],
            "concurrent_ns": [round(x, 1) for x in nc.concurrent_ns.tolist()],
            "quantity": {k: [float(f"{x:.6g}") for x in v.tolist()]
                         for k, v in sorted(nc.quantity.items())},
        },
    }


# ------------------------------------------------------------------ aggregation
def _prefixes(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i + 1]) for i in range(len(parts))]


def _row(key: str, acc: dict[str, float], extra: Mapping[str, Any],
         replays: int = 1) -> dict[str, Any]:
    """One row: figures over the row's sampled node time; ``time_ns`` per replay."""
    t = acc["time_ns"]
    r = rates(t, {k[2:]: v for k, v in acc.items() if k.startswith("q:")})
    share = acc["concurrent_ns"] / t if t > 0 else 0.0
    return {**extra, "name": key, "time_ns": round(t / max(1, replays)), **r, "verdict": verdict(r),
            "concurrent_share": round(share, 3), "approximate": share > APPROX_SHARE,
            "shared_share": round(acc["shared_ns"] / t, 3) if t > 0 else 0.0}


def analyze(bundle: Any, data: Mapping[str, Any], top: int = 10) -> dict[str, Any]:
    """The Counters section of a bundle with counters.json ``data``: per module (each prefix of
    the module path, sub-modules included), per phase, the top nodes by sampled time, and
    collection facts."""
    nodes = data["nodes"]
    by_id = {n.exec_node_id: n for n in bundle.work_nodes()}
    found = [by_id.get(i) for i in nodes["exec_node_id"]]
    idx = np.array([i for i, n in enumerate(found) if n is not None], dtype=np.int64)
    known = [found[i] for i in idx.tolist()]
    unknown = len(found) - len(known)
    reps = int(data.get("replays") or 1)
    cols = {c: np.asarray(nodes[c], dtype=np.float64)[idx]
            for c in ("time_ns", "shared_ns", "concurrent_ns")}
    cols.update({"q:" + k: np.asarray(v, dtype=np.float64)[idx]
                 for k, v in sorted(nodes["quantity"].items())})

    def groups(keys: list[list[str]]) -> dict[str, dict[str, float]]:
        """Sums of every column per group key (a node may be in several groups)."""
        member = np.fromiter((j for j, ks in enumerate(keys) for _ in ks), dtype=np.int64)
        names = [k for ks in keys for k in ks]
        uniq, codes = np.unique(np.array(names, dtype=object), return_inverse=True) \
            if names else (np.array([], dtype=object), np.zeros(0, dtype=np.int64))
        sums = {c: np.bincount(codes, weights=v[member], minlength=len(uniq))
                for c, v in cols.items()}
        return {str(u): {c: float(sums[c][g]) for c in cols} for g, u in enumerate(uniq)}

    prefix_cache: dict[str, list[str]] = {}
    mods = groups([prefix_cache.setdefault(n.module, _prefixes(n.module)) for n in known])
    phases = groups([[n.phase] for n in known])
    order = np.argsort(-cols["time_ns"], kind="stable")[:top].tolist()
    node_rows = []
    for j in order:
        n = known[j]
        one = {c: float(v[j]) for c, v in cols.items()}
        node_rows.append(_row(n.short_name, one, {"graph": n.graph, "local_id": n.local_id,
                                                  "module": n.module, "phase": n.phase}, reps))
    module_rows = [_row(k, v, {"level": k.count(".")}, reps) for k, v in sorted(mods.items())]
    return {
        "method": data.get("method", "pm_sampling"),
        "replays": data.get("replays"),
        "interval_ns": data.get("interval_ns"),
        "samples": data.get("samples"),
        "samples_dropped": data.get("samples_dropped"),
        "metrics": data.get("metrics", {}),
        "missing_metrics": data.get("missing_metrics", []),
        "peak_dram_GBps": data.get("peak_dram_GBps"),
        "unmatched_nodes": unknown,
        "thresholds": {"memory_bound_dram_pct": MEMORY_BOUND_PCT,
                       "compute_bound_pct": COMPUTE_BOUND_PCT},
        "modules": module_rows,
        "phases": [_row(k, v, {}, reps) for k, v in sorted(phases.items())],
        "nodes": node_rows,
    }


def diff(a: Optional[Mapping[str, Any]], b: Optional[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per module in both analyses: DRAM/SM/tensor/occupancy deltas (B - A, percentage
    points) and the verdicts. Empty unless both bundles have counters."""
    if not a or not b:
        return []
    am = {r["name"]: r for r in a["modules"]}
    out = []
    for r in b["modules"]:
        o = am.get(r["name"])
        if o is None:
            continue
        row: dict[str, Any] = {"module": r["name"], "level": r.get("level", 0),
                               "verdict_a": o["verdict"], "verdict_b": r["verdict"]}
        for k in PCT:
            va, vb = o.get(k), r.get(k)
            row[k + "_a"], row[k + "_b"] = va, vb
            row["d_" + k] = round(vb - va, 2) if va is not None and vb is not None else None
        out.append(row)
    return out
