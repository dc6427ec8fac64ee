"""Collective kernels: what kind each is, what it serves (a DDP bucket, an FSDP module), and
each one matched across the ranks of a multi-rank bundle with every rank's arrival and wait.
Pure functions of loaded bundles (numpy, no torch).

Matching
    A collective is a kernel whose name is a collective's (NCCL's, or a name other backends
    give one). Ranks issue the collectives of a communicator in one order, so the k-th
    collective of a graph on one rank is the k-th on every other (in local id order: a graph's
    nodes are numbered in the order the host made them). The k-th are matched where their kind
    and what they serve (DDP bucket; FSDP module and op) agree on every rank; from the first
    disagreement on, the graph's collectives stay unmatched (``Unmatched``): the order is lost.
    Replay r of a graph on one rank meets replay r on every other: each replay runs every
    collective once, and no rank finishes a collective before every rank has started it.

Clock
    ``host``: every rank's manifest holds ``clock`` (``origin_ns``, the CUPTI timestamp its
    events are relative to, and ``host``), all of one host. CUPTI puts GPU timestamps on the
    host's clock, one clock for every process of a host: a start is at origin + start_ns.
    Checked: the ranks leave a collective together (the last data reaches every rank at about
    one moment), so where the ends of a collective lie further apart than
    ``CLOCK_END_SPREAD_NS`` (median over instances) the clocks disagree and ``end`` is used.
    ``end``: otherwise (bundles without ``clock``: each rank's events are relative to its own
    first event). Each instance (one collective in one replay) is aligned on its end: a rank
    that spent d_r inside it arrived d_max - d_r after the first.

Per instance (then the median over the replays every rank kept events of)
    arrival  its start after the first rank's start of the same instance (common clock)
    wait     time inside the collective spent waiting for the last arrival:
             min(last arrival - its arrival, its duration)
    own      its duration - its wait: the collective without the waiting
    lead_in  its start after its own replay's first node start (own clock): the work before
             it in the replay
    The last to arrive waited for nobody; the others' wait is its lateness.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..model.bundle import Bundle
from ..model.graph import DDP_SCOPE, FSDP_SCOPE, Node, NodeKind
from . import Absent, Maybe
from .stats import median

# kernels of collectives (NCCL's, and the names other backends give them)
COLLECTIVE = re.compile(r"nccl|allreduce|all_reduce|allgather|all_gather|reducescatter|"
                        r"reduce_scatter|broadcast|alltoall|all_to_all", re.IGNORECASE)
_KINDS = (("all_reduce", re.compile(r"all_?reduce", re.IGNORECASE)),
          ("all_gather", re.compile(r"all_?gather", re.IGNORECASE)),
          ("reduce_scatter", re.compile(r"reduce_?scatter", re.IGNORECASE)),
          ("broadcast", re.compile(r"broadcast", re.IGNORECASE)),
          ("all_to_all", re.compile(r"all_?to_?all", re.IGNORECASE)),
          ("send_recv", re.compile(r"send|recv", re.IGNORECASE)))
CLOCK_END_SPREAD_NS = 20_000.0  # ends further apart than this: the ranks' clocks disagree


def is_collective(n: Node) -> bool:
    """A kernel of a collective (NCCL's, or a name another backend gives one)."""
    return n.type == NodeKind.KERNEL and bool(COLLECTIVE.search(n.demangled or n.kernel or ""))


def collective_kind(n: Node) -> Optional[str]:
    """``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``,
    ``send_recv`` or ``other`` for a collective's kernel; None for any other node."""
    if not is_collective(n):
        return None
    name = n.demangled or n.kernel or ""
    return next((k for k, rx in _KINDS if rx.search(name)), "other")


@dataclass(frozen=True)
class Serves:
    """What a collective serves: ``scope`` is ``(ddp)`` (``bucket``), ``(fsdp)``
    (``fsdp_module``, ``fsdp_op``, ``prefetch``) or the module whose scope launched it."""

    scope: str
    bucket: Optional[int] = None
    fsdp_module: Optional[str] = None
    fsdp_op: Optional[str] = None
    prefetch: bool = False
    phase: str = "forward"


def serves(n: Node) -> Serves:
    a = n.annotation
    bucket = a.get("ddp_bucket")
    return Serves(scope=n.module, bucket=bucket if isinstance(bucket, int) else None,
                  fsdp_module=a.get("fsdp_module") if n.module == FSDP_SCOPE else None,
                  fsdp_op=a.get("fsdp_op") if n.module == FSDP_SCOPE else None,
                  prefetch=bool(a.get("fsdp_prefetch")), phase=n.phase)


def is_comm_work(n: Node) -> bool:
    """Work done for communication: a collective, or any work of the ``(ddp)`` and ``(fsdp)``
    scopes (bucket copies, gradient division, all-gather copy-in/out)."""
    return n.module in (DDP_SCOPE, FSDP_SCOPE) or is_collective(n)


def collectives_by_graph(bundle: Bundle) -> dict[str, list[Node]]:
    """Each graph's collective kernels in local id (issue) order."""
    return {g.name: sorted((n for n in g.nodes if is_collective(n)),
                           key=lambda n: n.local_id) for g in bundle.graphs}


@dataclass(frozen=True)
class RankArrival:
    """One rank at one matched collective (medians over the aligned replays)."""

    rank: int
    exec_node_id: int
    arrival_ns: float
    wait_ns: float
    own_ns: float
    lead_in_ns: float
    duration_ns: float  # median over every timed replay (not only the aligned ones)
    last: int  # aligned replays in which it arrived last


@dataclass(frozen=True)
class AlignedCollective:
    """The k-th collective of a graph, matched on every rank."""

    graph: str
    index: int
    kind: str
    kernel: str
    serves: Serves
    replays: int
    spread_ns: float  # median over replays: last arrival - first
    end_spread_ns: Optional[float]  # host clock: median spread of the ends (the clock check)
    ranks: tuple[RankArrival, ...]
    # the rank that arrived last in most replays (None: all arrived together every time) and
    # how much after the first of the others (median over replays)
    last_rank: Optional[int]
    late_ns: float


@dataclass(frozen=True)
class Unmatched:
    """A graph whose collectives the ranks do not issue alike, from ``index`` on."""

    graph: str
    index: int
    reason: str  # "count" | "kind" | "serves" | "missing_graph"
    counts: tuple[int, ...]  # collectives of the graph per rank


@dataclass(frozen=True)
class Alignment:
    clock: str  # "host" | "end"
    clock_reason: str  # host: "recorded"; end: "not_recorded" | "hosts_differ" | "ends_disagree"
    replays: tuple[int, ...]
    collectives: tuple[AlignedCollective, ...]
    unmatched: tuple[Unmatched, ...]
    # per rank: median over aligned replays of its total wait over every matched collective
    wait_per_replay_ns: tuple[float, ...]
    # per rank: what to add to its events' start_ns to put them on the first rank's clock
    # (host: the origins' difference; end: the median over instances of the first rank's end
    # minus its end), and the largest distance of an instance's own offset from that median
    # (how far one offset misplaces any collective's end)
    offsets_ns: tuple[float, ...]
    offset_spread_ns: float


def _match(ranks: Sequence[tuple[int, Bundle]]
           ) -> tuple[list[tuple[str, int, list[Node]]], list[Unmatched]]:
    """(graph, index, the node on each rank) of every matched collective; the unmatched."""
    per = [collectives_by_graph(b) for _, b in ranks]
    names = [g.name for g in ranks[0][1].graphs]
    matched: list[tuple[str, int, list[Node]]] = []
    unmatched: list[Unmatched] = []
    for name in names + sorted({k for p in per for k in p} - set(names)):
        lists = [p.get(name) for p in per]
        counts = tuple(len(x or ()) for x in lists)
        if any(x is None for x in lists):
            if any(counts):
                unmatched.append(Unmatched(name, 0, "missing_graph", counts))
            continue
        for k in range(max(counts)):
            nodes = [x[k] for x in lists if x is not None and k < len(x)]
            reason = ("count" if len(nodes) < len(lists) else
                      "kind" if len({collective_kind(n) for n in nodes}) > 1 else
                      "serves" if len({_key(serves(n)) for n in nodes}) > 1 else None)
            if reason:
                unmatched.append(Unmatched(name, k, reason, counts))
                break
            matched.append((name, k, nodes))
    return matched, unmatched


def _key(s: Serves) -> tuple[Any, ...]:
    return (s.scope, s.bucket, s.fsdp_module, s.fsdp_op)


def _events(b: Bundle) -> tuple[dict[tuple[int, int], tuple[int, int]], dict[tuple[str, int], int]]:
    """{(exec node id, replay): (start, duration)} and {(graph, replay): first start}."""
    ev: dict[tuple[int, int], tuple[int, int]] = {}
    first: dict[tuple[str, int], int] = {}
    for e in b.events:
        r, s = int(e.get("replay", 0)), int(e["start_ns"])
        ev[(int(e["exec_node_id"]), r)] = (s, int(e["dur_ns"]))
        k = (str(e.get("graph", "")), r)
        first[k] = min(first.get(k, s), s)
    return ev, first


def _origins(ranks: Sequence[tuple[int, Bundle]]) -> tuple[Optional[list[int]], str]:
    """Each rank's clock origin on the host's clock, or None and why not."""
    clocks = [b.manifest.get("clock") for _, b in ranks]
    if not all(isinstance(c, Mapping) and isinstance(c.get("origin_ns"), int) for c in clocks):
        return None, "not_recorded"
    if len({str(c.get("host")) for c in clocks if c is not None}) > 1:
        return None, "hosts_differ"
    return [int(c["origin_ns"]) for c in clocks if c is not None], "recorded"


def _instances(nodes: list[Node], evs: list[Any], replays: Sequence[int],
               origins: Optional[list[int]]) -> np.ndarray:
    """(replays x ranks x [start, duration, lead_in]) of one matched collective; a start is
    on the common clock where ``origins`` is given, else the instance's end is 0."""
    out = np.zeros((len(replays), len(nodes), 3))
    for j, (n, (ev, first)) in enumerate(zip(nodes, evs)):
        for i, r in enumerate(replays):
            s, d = ev[(n.exec_node_id, r)]
            lead = s - first[(n.graph, r)]
            out[i, j] = ((origins[j] + s) if origins is not None else -d, d, lead)
    return out


def _arrivals(inst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(arrival after the first, wait) per replay and rank of an instance array."""
    start, dur = inst[:, :, 0], inst[:, :, 1]
    arrival = start - start.min(axis=1, keepdims=True)
    wait = np.minimum(start.max(axis=1, keepdims=True) - start, dur)
    return arrival, wait


def align(ranks: Sequence[tuple[int, Bundle]]) -> Maybe[Alignment]:
    """Every collective matched across ``ranks`` with each rank's arrival and wait (module
    docstring), or why there is none: ``one_rank``, ``no_collectives``, ``unmatched`` (the
    ranks issue different collectives from the first on), ``no_events`` (no replay kept
    events of the matched collectives on every rank)."""
    if len(ranks) < 2:
        return Absent("one_rank", "collectives are aligned across two ranks or more")
    matched, unmatched = _match(ranks)
    if not matched:
        return (Absent("unmatched", "the ranks' first collectives differ") if unmatched
                else Absent("no_collectives", "no rank's graphs hold a collective kernel"))
    evs = [_events(b) for _, b in ranks]
    replays = sorted(set.intersection(*[{r for _, r in ev} for ev, _ in evs]))
    keep = [(g, k, nodes) for g, k, nodes in matched
            if all((n.exec_node_id, r) in ev for n, (ev, _) in zip(nodes, evs) for r in replays)]
    if not keep or not replays:
        return Absent("no_events", "no replay kept events of the collectives on every rank "
                      "(capture with --replays and the default kept events)")
    origins, reason = _origins(ranks)
    if origins is not None:
        spreads = []
        for _, _, nodes in keep:
            inst = _instances(nodes, evs, replays, origins)
            ends = inst[:, :, 0] + inst[:, :, 1]
            spreads.extend((ends.max(axis=1) - ends.min(axis=1)).tolist())
        if median(spreads) > CLOCK_END_SPREAD_NS:
            origins, reason = None, "ends_disagree"
    out: list[AlignedCollective] = []
    total_wait = np.zeros((len(replays), len(ranks)))
    for g, k, nodes in keep:
        inst = _instances(nodes, evs, replays, origins)
        arrival, wait = _arrivals(inst)
        total_wait += wait
        out.append(_aligned(g, k, nodes, ranks, inst, arrival, wait, origins is not None))
    offsets, spread = _offsets([nodes for _, _, nodes in keep], evs, replays, origins)
    return Alignment(
        clock="host" if origins is not None else "end", clock_reason=reason,
        replays=tuple(replays), collectives=tuple(out), unmatched=tuple(unmatched),
        wait_per_replay_ns=tuple(float(x) for x in np.median(total_wait, axis=0)),
        offsets_ns=offsets, offset_spread_ns=spread)


def _offsets(matched: list[list[Node]], evs: list[Any], replays: Sequence[int],
             origins: Optional[list[int]]) -> tuple[tuple[float, ...], float]:
    """Each rank's shift onto the first rank's clock, and how far instances stray from it."""
    # (collectives x replays x ranks): each instance's end on its rank's own clock
    ends = np.array([[[sum(evs[j][0][(n.exec_node_id, r)]) for j, n in enumerate(nodes)]
                      for r in replays] for nodes in matched], float)
    each = (ends[..., :1] - ends).reshape(-1, ends.shape[-1])
    if origins is not None:
        offsets = np.array([o - origins[0] for o in origins], float)
    else:
        offsets = np.median(each, axis=0)
    return tuple(float(x) for x in offsets), float(np.abs(each - offsets).max())


def _aligned(g: str, k: int, nodes: list[Node], ranks: Sequence[tuple[int, Bundle]],
             inst: np.ndarray, arrival: np.ndarray, wait: np.ndarray,
             host: bool) -> AlignedCollective:
    dur = inst[:, :, 1]
    last = Counter(int(i) for i, row in zip(arrival.argmax(axis=1), arrival)
                   if row.max() > row.min())
    rows = tuple(RankArrival(
        rank=r, exec_node_id=n.exec_node_id, arrival_ns=float(np.median(arrival[:, j])),
        wait_ns=float(np.median(wait[:, j])), own_ns=float(np.median(dur[:, j] - wait[:, j])),
        lead_in_ns=float(np.median(inst[:, j, 2])),
        duration_ns=median([float(x) for x in n.durations_ns]) if n.durations_ns
        else float(np.median(dur[:, j])),
        last=last.get(j, 0)) for j, ((r, _), n) in enumerate(zip(ranks, nodes)))
    ends = inst[:, :, 0] + dur
    s = max(last, key=lambda j: (last[j], float(np.median(arrival[:, j])))) if last else None
    late = 0.0
    if s is not None and len(nodes) > 1:
        others = [j for j in range(len(nodes)) if j != s]
        late = float(np.median(arrival[:, s] - arrival[:, others].min(axis=1)))
    return AlignedCollective(
        graph=g, index=k, kind=collective_kind(nodes[0]) or "other",
        kernel=nodes[0].short_name, serves=serves(nodes[0]), replays=len(inst),
        spread_ns=float(np.median(arrival.max(axis=1))),
        end_spread_ns=float(np.median(ends.max(axis=1) - ends.min(axis=1))) if host else None,
        ranks=rows, last_rank=ranks[s][0] if s is not None else None, late_ns=late)
