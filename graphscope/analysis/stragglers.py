"""Who is late to each collective, by how much, and what it did before: the straggler
verdicts of a multi-rank bundle, from its :class:`~.collectives.Alignment`. Pure functions.

Verdict
    A matched collective has a straggler where the rank that arrived last in most replays
    made another rank wait at least ``MIN_WAIT_NS`` and ``MIN_WAIT_PCT`` % of the collective's
    own time (median waits and own times over the aligned replays).

Why it was late
    The collective's ancestors are its predecessors in the captured DAG; their work is the
    work nodes among them that are not communication (collectives, ``(ddp)``/``(fsdp)``).
    Per (module, phase): the straggler's median time per replay over those nodes, minus the
    median over the other ranks of theirs (``excess``). Its lateness splits in two:
    ``work_excess_ns``, the sum of the excesses (work the straggler did before the collective
    that the others did not), and ``start_ns``, the rest (it began the replay later: its
    host launched it later, or its GPU still ran earlier work). ``cause`` is ``work`` where the
    work excess is at least half the lateness, else ``start``. ``excess_module`` is the module
    with the largest excess; ``preceding_module`` is the module of the ancestor work that ended
    last before the collective on the straggler (kept events; the most common over replays).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..model.bundle import Bundle
from ..model.graph import CapturedGraph, Node
from .collectives import AlignedCollective, Alignment, Serves, is_comm_work
from .dag import Dag

MIN_WAIT_NS = 5_000.0
MIN_WAIT_PCT = 10.0


@dataclass(frozen=True)
class Excess:
    module: str
    phase: str
    excess_ns: float  # the straggler's median time minus the other ranks' median


@dataclass(frozen=True)
class Straggler:
    """One collective some rank waited for (module docstring)."""

    rank: int
    graph: str
    index: int  # the collective's place among its graph's collectives
    kind: str
    serves: Serves
    late_ns: float
    waiting_rank: int  # the rank that waited longest for it
    wait_ns: float  # that rank's median wait
    own_ns: float  # the collective's median own time (without waiting), on the waiting rank
    cause: str  # "work" | "start"
    work_excess_ns: float
    start_ns: float
    excess: tuple[Excess, ...]  # the largest positive excesses first (at most TOP_EXCESS)
    preceding_module: Optional[str]
    preceding_phase: Optional[str]


TOP_EXCESS = 3


def stragglers(ranks: Sequence[tuple[int, Bundle]], alignment: Alignment) -> list[Straggler]:
    """The straggler of every collective that made a rank wait (largest wait first)."""
    dags: dict[tuple[int, str], Dag] = {}
    out = []
    for c in alignment.collectives:
        if c.last_rank is None:
            continue
        others = [a for a in c.ranks if a.rank != c.last_rank]
        waiting = max(others, key=lambda a: (a.wait_ns, -a.rank))
        if waiting.wait_ns < MIN_WAIT_NS or waiting.wait_ns < MIN_WAIT_PCT / 100 * waiting.own_ns:
            continue
        out.append(_verdict(ranks, alignment, c, waiting.rank, waiting.wait_ns, waiting.own_ns,
                            dags))
    out.sort(key=lambda s: (-s.wait_ns, s.graph, s.index))
    return out


def _verdict(ranks: Sequence[tuple[int, Bundle]], alignment: Alignment, c: AlignedCollective,
             waiting: int, wait_ns: float, own_ns: float,
             dags: dict[tuple[int, str], Dag]) -> Straggler:
    times: dict[int, dict[tuple[str, str], float]] = {}
    before: list[Node] = []
    for (r, b), a in zip(ranks, c.ranks):
        g = b.graph(c.graph)
        dag = dags.get((r, c.graph))
        if dag is None:
            dag = dags[(r, c.graph)] = Dag(g)
        anc = ancestors(g, dag, a.exec_node_id)
        times[r] = module_times(anc)
        if r == c.last_rank:
            before = anc
    assert c.last_rank is not None
    mine = times[c.last_rank]
    rest = [t for r, t in times.items() if r != c.last_rank]
    keys = set(mine).union(*rest)
    excess = sorted((Excess(m, p, mine.get((m, p), 0.0)
                            - float(np.median([t.get((m, p), 0.0) for t in rest])))
                     for m, p in keys), key=lambda e: (-e.excess_ns, e.module, e.phase))
    work = float(sum(e.excess_ns for e in excess))
    pre = _preceding(ranks, c.last_rank, before, alignment.replays)
    return Straggler(
        rank=c.last_rank, graph=c.graph, index=c.index, kind=c.kind, serves=c.serves,
        late_ns=c.late_ns, waiting_rank=waiting, wait_ns=wait_ns, own_ns=own_ns,
        cause="work" if work >= 0.5 * c.late_ns else "start", work_excess_ns=work,
        start_ns=c.late_ns - work,
        excess=tuple(e for e in excess[:TOP_EXCESS] if e.excess_ns > 0),
        preceding_module=pre[0] if pre else None, preceding_phase=pre[1] if pre else None)


def ancestors(g: CapturedGraph, dag: Dag, exec_node_id: int) -> list[Node]:
    """The nodes the node ``exec_node_id`` of ``g`` depends on (its predecessors in the captured
    DAG, transitively), in node order."""
    pos = {int(x): i for i, x in enumerate(dag.exec_ids.tolist())}.get(exec_node_id)
    if pos is None:
        return []
    ptr, val = dag.pred
    seen = np.zeros(dag.n, bool)
    stack = [pos]
    while stack:
        v = stack.pop()
        for u in val[ptr[v]:ptr[v + 1]]:
            if not seen[u]:
                seen[u] = True
                stack.append(u)
    return [g.nodes[i] for i in np.flatnonzero(seen).tolist()]


def module_times(nodes: Iterable[Node]) -> dict[tuple[str, str], float]:
    """(module, phase) -> median over replays of the summed time of its work nodes among
    ``nodes`` (communication left out)."""
    rows: dict[tuple[str, str], list[tuple[int, ...]]] = {}
    for n in nodes:
        if n.is_work and n.durations_ns and not is_comm_work(n):
            rows.setdefault((n.module, n.phase), []).append(n.durations_ns)
    out = {}
    for k, ds in rows.items():
        width = min(len(d) for d in ds)
        out[k] = float(np.median(np.sum([d[:width] for d in ds], axis=0)))
    return out


def _preceding(ranks: Sequence[tuple[int, Bundle]], rank: int, before: list[Node],
               replays: Sequence[int]) -> Optional[tuple[str, str]]:
    """(module, phase) of the work among ``before`` that ended last, most often over
    ``replays`` (kept events of ``rank``)."""
    b = dict(ranks)[rank]
    nodes = {n.exec_node_id: n for n in before if n.is_work and not is_comm_work(n)}
    last: dict[int, tuple[int, Node]] = {}
    for e in b.events:
        n = nodes.get(int(e["exec_node_id"]))
        r = int(e.get("replay", 0))
        if n is None or r not in replays:
            continue
        end = int(e["start_ns"]) + int(e["dur_ns"])
        if r not in last or end > last[r][0]:
            last[r] = (end, n)
    if not last:
        return None
    votes = Counter((n.module, n.phase) for _, n in last.values())
    return min(votes, key=lambda k: (-votes[k], k))
