"""The data DAG of memory ranges (``stream_order._data_edges``) against a byte-by-byte reading of
its definition, on random graphs: for every byte, the accesses in visit order; a read or a write
follows the byte's last earlier writer (read-after-write, write-after-write), a read precedes
the byte's next writer at or after it (write-after-read; its own node's where it writes in
place); an edge stays once outputs are renamed where it is read-after-write or its target writes
in place; nodes without op information are barriers over the visit order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from graphscope.analysis.dag import Dag
from graphscope.analysis.stream_order import _data_edges, inplace_by_name
from graphscope.model.graph import CapturedGraph, Node

SPACE = 48  # bytes of the little address space


def _graph(seed: int) -> CapturedGraph:
    rnd = random.Random(seed)
    n = rnd.randint(1, 40)

    def ranges(k: int) -> tuple[tuple[int, int], ...]:
        out = []
        for _ in range(k):
            a = rnd.randrange(SPACE)
            out.append((a, min(SPACE, a + rnd.choice((0, 1, 2, 4, 8, 16)))))
        return tuple(out)

    nodes = []
    for i in range(n):
        hard = rnd.random() < 0.1
        nodes.append(Node(graph="g", local_id=i, exec_node_id=i, type="kernel",
                          op=rnd.choice(("aten::mm", "aten::add_", "aten::relu", None)),
                          reads=None if hard else ranges(rnd.randint(0, 3)),
                          writes=None if hard else ranges(rnd.randint(0, 2))))
    perm = list(range(n))
    if seed % 2:  # capture order that is not the visit order
        rnd.shuffle(perm)
    return CapturedGraph("g", 1, 1, tuple(nodes), tuple(zip(perm, perm[1:])))


def _by_bytes(dag: Dag) -> tuple[dict[tuple[int, int], bool], np.ndarray]:
    """{(src, dst): kept once renamed} and per node whether it writes in place, byte by byte."""
    order = list(dag.order)
    inplace = inplace_by_name(dag.ops)
    for v in range(dag.n):
        r = {x for a, b in dag.reads[v] or () for x in range(a, b)}
        w = {x for a, b in dag.writes[v] or () for x in range(a, b)}
        inplace[v] |= bool(r & w)
    edges: dict[tuple[int, int], bool] = {}

    def add(u: int, v: int, kept: bool) -> None:
        if u != v:
            edges[(u, v)] = edges.get((u, v), False) or kept

    for x in range(SPACE):
        acc = []  # (node, is_write) in visit order, reads before writes
        for v in order:
            if any(a <= x < b for a, b in dag.reads[v] or ()):
                acc.append((v, False))
            if any(a <= x < b for a, b in dag.writes[v] or ()):
                acc.append((v, True))
        for i, (v, w) in enumerate(acc):
            before = [u for u, uw in acc[:i] if uw]
            if before:
                add(before[-1], v, not w or bool(inplace[v]))
            if not w:
                after = [u for u, uw in acc[i + 1:] if uw]
                if after:
                    add(v, after[0], bool(inplace[after[0]]))
    hard = [v for v in order if dag.reads[v] is None and dag.writes[v] is None]
    for k, v in enumerate(order):
        earlier = [u for u in hard if order.index(u) < k]
        later = [u for u in hard if order.index(u) > k]
        if earlier:
            add(earlier[-1], v, True)
        if later and v not in hard:
            add(v, later[0], True)
    return edges, inplace


@pytest.mark.parametrize("seed", range(200))
def test_data_edges_match_a_byte_by_byte_reading(seed):
    dag = Dag(_graph(seed))
    assert dag.order is not None
    s, d, hard, kept, inplace = _data_edges(dag)
    got: dict[tuple[int, int], bool] = {}
    for u, v, k in zip(s.tolist(), d.tolist(), kept.tolist()):
        got[(u, v)] = got.get((u, v), False) or k
    want, want_inplace = _by_bytes(dag)
    assert got == want
    assert inplace.tolist() == want_inplace.tolist()
    assert hard.tolist() == [r is None and w is None for r, w in zip(dag.reads, dag.writes)]
