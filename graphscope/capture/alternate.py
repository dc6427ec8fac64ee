"""Two versions of a graph timed against each other: their replays alternated under the CUPTI
tracer in one window (``--try-streams``, ``--try-compile``), and the records of one exec
graph split into its replays.

Alternating (A B, then B A, ...) back to back gives both versions the same clocks, the same
temperature and the same neighbours in time; the first replay of each, untraced, pays the
upload of the exec graph to the device.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .. import native


def trace_alternated(pairs: Sequence[tuple[Any, Any]], replays: int) -> list[Any]:
    """Replay each ``(captured, tried)`` pair of CUDA graphs ``replays`` times each,
    alternated, under the tracer; returns its activity record columns."""
    import torch

    for a, b in pairs:
        a.replay()
        b.replay()
    torch.cuda.synchronize()
    with native.tracing() as cols:
        for i in range(replays):  # back to back, as the timed replays: no idle GPU between
            for a, b in pairs:
                first, second = (a, b) if i % 2 == 0 else (b, a)
                first.replay()
                second.replay()
        torch.cuda.synchronize()
    return list(cols)


@dataclass
class Replays:
    """The traced records of one exec graph, per replay (launch): ``local_id[i]``,
    ``start_ns[i]`` and ``end_ns[i]`` hold replay ``i``'s records."""

    local_id: list[np.ndarray]
    start_ns: list[np.ndarray]
    end_ns: list[np.ndarray]

    def spans(self) -> list[int]:
        """Per replay: first node start to last node end."""
        return [int(e.max() - s.min()) for s, e in zip(self.start_ns, self.end_ns) if len(s)]

    def durations(self) -> dict[int, list[int]]:
        """Per local node id, its duration in each replay that ran it."""
        out: dict[int, list[int]] = {}
        for ids, s, e in zip(self.local_id, self.start_ns, self.end_ns):
            for lid, d in zip(ids.tolist(), (e - s).tolist()):
                out.setdefault(int(lid), []).append(int(d))
        return out


def replays_of(cols: Sequence[Any], exec_id: int) -> Replays:
    """Split the records of exec graph ``exec_id`` by the launch they belong to (every record
    of a replayed node carries its launch's correlation id), in launch order."""
    if not cols:
        return Replays([], [], [])
    gnid = np.concatenate([np.asarray(c.graph_node_id) for c in cols]).astype(np.uint64)
    corr = np.concatenate([np.asarray(c.correlation) for c in cols]).astype(np.int64)
    st = np.concatenate([np.asarray(c.start_ns) for c in cols]).astype(np.int64)
    en = np.concatenate([np.asarray(c.end_ns) for c in cols]).astype(np.int64)
    mine = (gnid >> np.uint64(32)) == np.uint64(exec_id)
    out = Replays([], [], [])
    for launch in np.unique(corr[mine]).tolist():
        sel = mine & (corr == launch)
        order = np.argsort(st[sel], kind="stable")
        out.local_id.append((gnid[sel] & np.uint64(0xFFFFFFFF)).astype(np.int64)[order])
        out.start_ns.append(st[sel][order])
        out.end_ns.append(en[sel][order])
    return out


def node_medians(cols: Sequence[Any], exec_id: int) -> dict[str, list[Any]]:
    """Per node of exec graph ``exec_id`` (by local id): its median start after its replay's
    first start, its median duration, and its kernel's name ("" for a copy or memset)."""
    r = replays_of(cols, exec_id)
    starts: dict[int, list[int]] = {}
    for ids, s in zip(r.local_id, r.start_ns):
        if len(s):
            for lid, x in zip(ids.tolist(), (s - s.min()).tolist()):
                starts.setdefault(int(lid), []).append(int(x))
    durs = r.durations()
    names: dict[int, str] = {}
    for c in cols:
        gnid = np.asarray(c.graph_node_id).astype(np.uint64)
        mine = np.flatnonzero((gnid >> np.uint64(32)) == np.uint64(exec_id))
        kind, idx = np.asarray(c.kind), np.asarray(c.name_idx)
        for i in mine.tolist():
            lid = int(gnid[i] & np.uint64(0xFFFFFFFF))
            if lid not in names:
                names[lid] = c.names[int(idx[i])] if int(kind[i]) == 0 else ""
    lids = sorted(durs)
    return {"local_id": lids,
            "start_ns": [int(statistics.median(starts[i])) for i in lids],
            "duration_ns": [int(statistics.median(durs[i])) for i in lids],
            "name": [names.get(i, "") for i in lids]}


def spans_of(cols: Sequence[Any], exec_id: int) -> list[int]:
    """Per replay of exec graph ``exec_id``: first node start to last node end."""
    return replays_of(cols, exec_id).spans()


def median(xs: Sequence[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


def exec_id_of(cuda_graph: Any) -> int:
    """The exec id of an instantiated ``torch.cuda.CUDAGraph``."""
    return int(native.exec_id(cuda_graph.raw_cuda_graph_exec()))


def one_line(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message. An exception
    raised while handling another (a capture that failed, then ended with "operation failed
    due to a previous error during capture") is the first one's line, then the last's."""
    chain = [exc]
    while len(chain) < 8:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    if len(chain) == 1:
        return _line(exc)
    return f"{_line(chain[-1])} (then {_line(exc)})"


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"
