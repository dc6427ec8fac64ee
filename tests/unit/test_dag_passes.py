"""The longest-path passes (``dag.finish_times``, ``dag.longest``'s slack) against their
definitions written plainly, on random DAGs whose weights tie often (two predecessors
finishing together, as equal kernels do)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from graphscope.analysis.dag import Dag, finish_times, longest
from graphscope.model.graph import CapturedGraph, Node


def _dag(seed: int) -> tuple[Dag, list[float]]:
    rnd = random.Random(seed)
    n = rnd.randint(1, 60)
    edges = {(rnd.randrange(v), v) for v in range(1, n) for _ in range(rnd.choice((0, 1, 1, 2, 3)))}
    nodes = tuple(Node(graph="g", local_id=i, exec_node_id=i, type="kernel") for i in range(n))
    w = [float(rnd.choice((0, 1, 2, 2, 3, 5))) for _ in range(n)]
    return Dag(CapturedGraph("g", 1, 1, nodes, tuple(sorted(edges)))), w


@pytest.mark.parametrize("seed", range(100))
def test_finish_times_and_slack_match_their_definitions(seed):
    dag, w = _dag(seed)
    preds: dict[int, list[int]] = {v: [] for v in range(dag.n)}
    succs: dict[int, list[int]] = {v: [] for v in range(dag.n)}
    for u, v in zip(dag.src.tolist(), dag.dst.tolist()):
        preds[v].append(u)
        succs[u].append(v)
    eft: dict[int, float] = {}
    for v in range(dag.n):
        eft[v] = max((eft[u] for u in preds[v]), default=0.0) + w[v]
    assert finish_times(dag.order, dag.pred, w) == [eft[v] for v in range(dag.n)]
    length = max(eft.values())
    lst: dict[int, float] = {}
    for u in reversed(range(dag.n)):
        lst[u] = min((lst[v] for v in succs[u]), default=length) - w[u]
    got_len, path, slack = longest(dag.order, dag.succ, dag.pred, w, dag.src, dag.dst)
    assert got_len == length
    assert slack.tolist() == [max(lst[v] - (eft[v] - w[v]), 0.0) for v in range(dag.n)]
    # the path is a chain of edges whose weights add up to the length
    assert all((u, v) in set(zip(dag.src.tolist(), dag.dst.tolist()))
               for u, v in zip(path, path[1:]))
    assert np.isclose(sum(w[v] for v in path), length)
