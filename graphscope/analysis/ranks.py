"""The cross-rank view of a multi-rank bundle, as one section (:func:`ranks_report`): totals
per rank and over all ranks, each rank's diagnosis and the rank whose critical path sets the
step, module time per rank and its skew, top kernels per rank, DDP buckets and FSDP modules
per rank, collectives aligned across ranks (``collectives.py``) and the stragglers
(``stragglers.py``). Pure functions of loaded bundles.

Step rank
    Under data parallelism every rank waits for the slowest at each collective, so a step
    takes as long as the rank with the longest critical path of its own work. Each rank's
    ``own_path_ns`` is its critical path (``dag.longest``, node medians) with every matched
    collective weighted by its own time (its duration less its wait for the other ranks, from
    the alignment) instead of its duration: the waiting belongs to the rank waited for. The
    step rank has the longest own path (summed over its graphs).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

from ..model.bundle import Bundle
from . import Absent, Maybe
from .collectives import Alignment, align, is_collective
from .dag import Dag, longest
from .ddp import FsdpRow, ddp_rows, fsdp_rows
from .diagnosis import Verdict, diagnose
from .stats import median
from .stragglers import Straggler, stragglers
from .summary import kernel_rows, module_rows

TOP_KERNELS = 10
PATH_MODULES = 3


@dataclass(frozen=True)
class RankTotals:
    """One rank's header numbers (medians over its timed replays)."""

    rank: int
    graphs: int
    work_nodes: int
    replays: int
    kernel_ns: float  # graph work for one replay of each graph (sum of its nodes' time)
    span_ns: float  # first node start to last node end of a replay
    collective_ns: float  # time in collective kernels per replay, waits included
    wait_ns: Optional[float]  # of which waiting for other ranks (None: not aligned)


@dataclass(frozen=True)
class MergedTotals:
    """The header over all ranks: never one rank's numbers alone."""

    ranks: int
    kernel_ns: float  # summed over ranks: the GPU work of one step of the whole job
    max_kernel_ns: float
    max_kernel_rank: int
    kernel_skew: float  # max / median over ranks of kernel_ns
    step_ns: float  # the longest rank's span: one step of the job takes as long
    collective_ns: float  # summed over ranks
    wait_ns: Optional[float]  # summed over ranks (None: not aligned)


@dataclass(frozen=True)
class ModuleShare:
    module: str
    ns: float
    pct: float


@dataclass(frozen=True)
class RankGraph:
    """One graph of one rank, from the diagnosis (analysis/diagnosis.py) and the own path."""

    graph: str
    span_ns: Optional[float]
    critical_path_ns: Optional[float]
    own_path_ns: Optional[float]  # the critical path with collective waits left out
    work_ns: Optional[float]
    idle_pct: Optional[float]
    launch_ns: Optional[float]
    parallelism: Optional[float]
    path_modules: tuple[ModuleShare, ...]  # the critical path's largest modules


@dataclass(frozen=True)
class RankDiagnosis:
    rank: int
    graphs: tuple[RankGraph, ...]
    verdicts: tuple[Verdict, ...]  # the diagnosis's own (render/diagnosis.py words them)


@dataclass(frozen=True)
class StepRank:
    """The rank whose own critical path sets the step time (module docstring)."""

    rank: int
    own_path_ns: float
    next_rank: Optional[int]  # the runner-up (None: one rank)
    margin_ns: float  # its own path minus the runner-up's
    waits_removed: bool  # False: no alignment, the paths keep their collectives' waits


@dataclass(frozen=True)
class KernelRow:
    kernel: str
    count: int
    median_ns: float
    pct: float


def _fields(row: dict[str, Any]) -> dict[str, Any]:
    """A top-kernels row's fields that :class:`KernelRow` holds (not the copy rows' type)."""
    return {k: row[k] for k in ("kernel", "count", "median_ns", "pct")}


@dataclass(frozen=True)
class RankKernels:
    rank: int
    kernels: tuple[KernelRow, ...]


@dataclass(frozen=True)
class ModuleRow:
    """A module's median time per replay on each rank, and its skew over ranks."""

    module: str
    level: int
    per_rank_ns: tuple[float, ...]
    median_ns: float
    max_ns: float
    skew: Optional[float]  # max / median over ranks (None: a median of 0 under a max above)
    slowest_rank: int


@dataclass(frozen=True)
class BucketRow:
    bucket: Any
    modules: tuple[str, ...]
    bucket_bytes: Optional[int]
    nodes: int
    comm_nodes: int
    median_ns: float
    comm_ns: float
    overlap_pct: Optional[float]


@dataclass(frozen=True)
class RankBuckets:
    rank: int
    buckets: tuple[BucketRow, ...]


@dataclass(frozen=True)
class RankFsdp:
    rank: int
    rows: tuple[FsdpRow, ...]


@dataclass(frozen=True)
class RanksSection:
    world_size: int
    totals: tuple[RankTotals, ...]
    merged: MergedTotals
    diagnosis: tuple[RankDiagnosis, ...]
    step_rank: Maybe[StepRank]
    top_kernels: tuple[RankKernels, ...]
    modules: tuple[ModuleRow, ...]
    ddp: tuple[RankBuckets, ...]
    fsdp: tuple[RankFsdp, ...]
    collectives: Maybe[Alignment]
    stragglers: tuple[Straggler, ...]


def ranks_report(ranks: Sequence[tuple[int, Bundle]], depth: Optional[int] = None,
                 top: int = TOP_KERNELS) -> RanksSection:
    """The ranks section of a multi-rank bundle (``ranks``: ``model.ranks.read_ranks``)."""
    aligned = align(ranks)
    alignment = aligned if isinstance(aligned, Alignment) else None
    totals = tuple(_totals(r, b, alignment, i) for i, (r, b) in enumerate(ranks))
    diags = tuple(_diagnosis(r, b, alignment, i) for i, (r, b) in enumerate(ranks))
    return RanksSection(
        world_size=len(ranks), totals=totals, merged=_merged(totals), diagnosis=diags,
        step_rank=_step_rank(diags, alignment is not None),
        top_kernels=tuple(RankKernels(r, tuple(KernelRow(**_fields(k))
                                               for k in kernel_rows(b, top)))
                          for r, b in ranks),
        modules=tuple(module_skew(ranks, depth)),
        ddp=tuple(RankBuckets(r, tuple(_bucket(x) for x in bk))
                  for r, b in ranks if (bk := ddp_rows(b))),
        fsdp=tuple(RankFsdp(r, tuple(fs)) for r, b in ranks if (fs := fsdp_rows(b))),
        collectives=aligned,
        stragglers=tuple(stragglers(ranks, alignment)) if alignment is not None else ())


def _bucket(x: dict[str, Any]) -> BucketRow:
    return BucketRow(bucket=x["bucket"], modules=tuple(x["modules"]),
                     bucket_bytes=x.get("bucket_bytes"), nodes=x["nodes"],
                     comm_nodes=x["comm_nodes"], median_ns=x["median_ns"],
                     comm_ns=x["comm_ns"], overlap_pct=x.get("overlap_pct"))


def _totals(rank: int, b: Bundle, alignment: Optional[Alignment], i: int) -> RankTotals:
    dur = b.durations
    comm = [j for j, n in enumerate(b.work) if is_collective(n)]
    per_replay = dur[comm].sum(axis=0).tolist() if comm and dur.shape[1] else []
    return RankTotals(
        rank=rank, graphs=len(b.graphs), work_nodes=len(b.work), replays=b.replays,
        kernel_ns=median([float(x) for x in b.replay_kernel_ns]),
        span_ns=median([float(x) for x in b.replay_span_ns]),
        collective_ns=median([float(x) for x in per_replay]),
        wait_ns=alignment.wait_per_replay_ns[i] if alignment is not None else None)


def _merged(totals: Sequence[RankTotals]) -> MergedTotals:
    kernel = [t.kernel_ns for t in totals]
    top = max(totals, key=lambda t: (t.kernel_ns, -t.rank))
    med = statistics.median(kernel) if kernel else 0.0
    waits = [t.wait_ns for t in totals]
    return MergedTotals(
        ranks=len(totals), kernel_ns=float(sum(kernel)), max_kernel_ns=top.kernel_ns,
        max_kernel_rank=top.rank, kernel_skew=top.kernel_ns / med if med else 0.0,
        step_ns=max((t.span_ns for t in totals), default=0.0),
        collective_ns=float(sum(t.collective_ns for t in totals)),
        wait_ns=None if any(w is None for w in waits) else float(sum(w or 0.0 for w in waits)))


def _diagnosis(rank: int, b: Bundle, alignment: Optional[Alignment], i: int) -> RankDiagnosis:
    d = diagnose(b)
    from .diagnosis.graph import counted

    own = own_paths(b, alignment, i, {o.graph: counted(o.selection) for o in d.graphs})
    graphs = []
    for o in d.graphs:
        cp = o.critical_path
        mods = tuple(ModuleShare(m.module, float(m.ns or 0.0), float(m.pct))
                     for m in cp.modules[:PATH_MODULES]) if o.timed and cp else ()
        graphs.append(RankGraph(
            graph=o.graph, span_ns=o.span_ns, critical_path_ns=cp.length_ns if cp else None,
            own_path_ns=own.get(o.graph), work_ns=o.work_ns, idle_pct=o.idle_pct,
            launch_ns=o.launch_latency_ns, parallelism=o.parallelism, path_modules=mods))
    return RankDiagnosis(rank, tuple(graphs), d.all_verdicts)


def own_paths(b: Bundle, alignment: Optional[Alignment], i: int,
              used: Optional[Mapping[str, Sequence[int]]] = None) -> dict[str, float]:
    """Per graph of the ``i``-th rank: its critical path with each matched collective
    weighted by its own time, not its duration (module docstring). ``used``: per graph, the
    replays its diagnosis counts (the node durations are their medians, as its critical
    path's; else every replay's)."""
    from .diagnosis.graph import durations

    own = {c.ranks[i].exec_node_id: c.ranks[i].own_ns
           for c in (alignment.collectives if alignment is not None else ())}
    out = {}
    for g in b.graphs:
        dag = Dag(g)
        if dag.order is None or not any(n.durations_ns for n in g.nodes):
            continue
        med = (durations(dag, used[g.name]).tolist() if used and g.name in used
               else [n.median_ns for n in g.nodes])
        d = [own.get(n.exec_node_id, m if m == m and m is not None else 0.0) if n.is_work
             else 0.0 for n, m in zip(g.nodes, med)]
        length, _, _ = longest(dag.order, None, dag.pred, d, dag.src, dag.dst, slack=False,
                               rank=dag.rank)
        out[g.name] = float(length)
    return out


def _step_rank(diags: Sequence[RankDiagnosis], aligned: bool) -> Maybe[StepRank]:
    paths = [(sum(g.own_path_ns for g in d.graphs if g.own_path_ns is not None), d.rank)
             for d in diags if any(g.own_path_ns is not None for g in d.graphs)]
    if not paths:
        return Absent("no_timing", "no rank's graphs were timed (capture with --replays)")
    paths.sort(key=lambda p: (-p[0], p[1]))
    (best, rank), nxt = paths[0], (paths[1] if len(paths) > 1 else None)
    return StepRank(rank=rank, own_path_ns=best, next_rank=nxt[1] if nxt else None,
                    margin_ns=best - nxt[0] if nxt else 0.0, waits_removed=aligned)


def module_skew(ranks: Sequence[tuple[int, Bundle]], depth: Optional[int] = None
                ) -> list[ModuleRow]:
    """Per module: median time per replay on each rank, skew (max / median over ranks)."""
    per_rank = {r: {row["module"]: row for row in module_rows(b, depth)} for r, b in ranks}
    modules: list[str] = []
    for _, rows in sorted(per_rank.items()):
        modules += [m for m in rows if m not in modules]
    out = []
    for m in modules:
        times = [per_rank[r][m]["median_ns"] if m in per_rank[r] else 0.0 for r, _ in ranks]
        med = statistics.median(times)
        out.append(ModuleRow(
            module=m, level=next(per_rank[r][m]["level"] for r, _ in ranks if m in per_rank[r]),
            per_rank_ns=tuple(times), median_ns=med, max_ns=max(times),
            skew=(max(times) / med) if med else (0.0 if not max(times) else None),
            slowest_rank=times.index(max(times))))
    return out


def merge(ranks: list[tuple[int, Bundle]]) -> dict[str, Any]:
    """The ranks' view as plain data for ``report --json`` and the HTML page of today:
    per-module time per rank and skew, collective time per rank, DDP buckets per rank."""
    collectives = []
    for r, b in ranks:
        comm = [n for n in b.work if is_collective(n)]
        ns = float(sum(n.median_ns or 0.0 for n in comm))
        total = statistics.median(b.replay_kernel_ns) if b.replay_kernel_ns else 0.0
        collectives.append({"rank": r, "kernels": len(comm), "median_ns": ns,
                            "pct": 100.0 * ns / total if total else 0.0,
                            "replay_kernel_ns": total})
    totals = [c["replay_kernel_ns"] for c in collectives]
    med_total = statistics.median(totals) if totals else 0.0
    return {
        "world_size": len(ranks),
        "modules": [{**asdict(m), "per_rank_ns": list(m.per_rank_ns),
                     "skew": float("inf") if m.skew is None else m.skew}
                    for m in module_skew(ranks)],
        "collectives": collectives,
        "replay_skew": (max(totals) / med_total) if med_total else 0.0,
        "ddp": [{"rank": r, "buckets": bk} for r, b in ranks if (bk := ddp_rows(b))],
    }
