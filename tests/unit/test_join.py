"""model/join.py on synthetic activity columns."""

import numpy as np
import pytest

from graphscope.model.join import join


def _cols(rows):
    a = np.array(rows, dtype=np.int64)
    return dict(graph_node_id=a[:, 0].astype(np.uint64), correlation=a[:, 1], start_ns=a[:, 2],
                end_ns=a[:, 3], stream=a[:, 4], kind=a[:, 5])


def test_replays_ranked_by_correlation_per_exec_graph():
    e1, e2 = 2 << 32, 3 << 32
    rows = [
        # node, corr, start, end, stream, kind
        (e1 | 0, 10, 100, 110, 7, 0), (e1 | 1, 10, 111, 131, 7, 0),
        (0, 11, 132, 140, 7, 0),  # eager kernel between graph launches (loss in callables mode)
        (e2 | 0, 12, 141, 151, 7, 1),
        (e1 | 0, 20, 200, 212, 7, 0), (e1 | 1, 20, 213, 230, 7, 0),
        (e2 | 0, 22, 231, 236, 7, 1),
        (e1 | 9, 20, 240, 241, 7, 0),  # a graph record that matches no node
    ]
    ids = {e1 | 0: "forward", e1 | 1: "forward", e2 | 0: "backward"}
    r = join(**_cols(rows), exec_node_ids=ids, keep_events=1)
    assert r.replays == 2
    assert r.durations_ns == {e1 | 0: [10, 12], e1 | 1: [20, 17], e2 | 0: [10, 5]}
    assert r.replay_kernel_ns == [40, 34]
    assert r.replay_span_ns == [51, 36]
    assert (r.joined_records, r.unjoined_records, r.outside_graph_records) == (6, 1, 1)
    assert [e["replay"] for e in r.events] == [0, 0, 0]
    assert r.events[0] == {"replay": 0, "graph": "forward", "exec_node_id": e1 | 0,
                           "start_ns": 0, "dur_ns": 10, "stream": 7, "kind": "kernel"}
    assert r.events[2]["kind"] == "memcpy"


def test_empty():
    r = join(**_cols([(0, 1, 1, 2, 0, 0)]), exec_node_ids={5: "step"})
    assert r.replays == 0 and r.durations_ns == {} and r.events == []


def _as_plain(r):
    return (r.replays, r.durations_ns, r.replay_kernel_ns, r.replay_span_ns, r.events,
            r.joined_records, r.unjoined_records, r.outside_graph_records)


def _random_trace(rng, n_exec, n_nodes, n_replays, irregular):
    rows, corr, t = [], 100, 1000
    for _ in range(n_replays):
        for e in range(n_exec):
            corr += int(rng.integers(1, 5))
            for n in range(n_nodes):
                if irregular and rng.random() < 0.1:
                    continue  # a node that did not run (a conditional body)
                for _ in range(2 if irregular and rng.random() < 0.05 else 1):
                    d = int(rng.integers(1, 500))
                    rows.append(((e + 2) << 32 | n, corr, t, t + d, int(rng.integers(7, 9)),
                                 int(rng.integers(0, 3))))
                    t += d + int(rng.integers(0, 3))  # equal starts happen: a stable order
            if rng.random() < 0.3:
                rows.append((0, corr + 1, t, t + 3, 7, 0))  # eager work
    if irregular:
        rows.append(((9 << 32) | 1, corr, t, t + 1, 7, 0))  # matches no captured node
    order = rng.permutation(len(rows)) if irregular else np.arange(len(rows))
    return [rows[i] for i in order]


def test_native_join_equals_the_numpy_reference():
    from graphscope import native
    from graphscope.model.join import join_numpy

    try:
        join_records = native.extension().join_records
    except Exception as exc:
        pytest.skip(f"the extension is not built here: {exc}")

    rng = np.random.default_rng(0)
    for irregular in (False, True):
        for n_exec, n_nodes, n_replays in ((1, 50, 20), (3, 7, 5), (2, 1, 1)):
            rows = _random_trace(rng, n_exec, n_nodes, n_replays, irregular)
            ids = {(e + 2) << 32 | n: f"g{e}" for e in range(n_exec) for n in range(n_nodes)}
            for keep in (0, 1, 3):
                a = join(**_cols(rows), exec_node_ids=ids, keep_events=keep,
                         join_records=join_records)
                b = join_numpy(**_cols(rows), exec_node_ids=ids, keep_events=keep)
                assert _as_plain(a) == _as_plain(b), (irregular, n_exec, n_nodes, keep)
                assert list(a.durations_ns) == list(b.durations_ns)  # same key order


def test_launch_windows_keyed_by_correlation_on_the_events_clock():
    # GIVEN two graphs launched twice each, and the tracer's cudaGraphLaunch records (one of
    # them for a launch that is not a joined graph's, one for a replay beyond keep_events)
    from graphscope.model.join import join_numpy

    e1, e2 = 2 << 32, 3 << 32
    rows = [
        (e1 | 0, 10, 100, 110, 7, 0), (e2 | 0, 12, 141, 151, 7, 1),
        (e1 | 0, 20, 200, 212, 7, 0), (e2 | 0, 22, 231, 236, 7, 1),
    ]
    ids = {e1 | 0: "forward", e2 | 0: "backward"}
    launches = (np.array([10, 12, 20, 22, 99]), np.array([80, 120, 190, 229, 5]),
                np.array([90, 125, 195, 230, 6]))
    # WHEN joined with the launch records, natively and in numpy
    for fn in (join, join_numpy):
        r = fn(**_cols(rows), exec_node_ids=ids, keep_events=1, launches=launches)
        # THEN each kept replay gets its launch interval, relative to the first record (100)
        assert r.launches == [
            {"graph": "forward", "replay": 0, "start_ns": -20, "end_ns": -10},
            {"graph": "backward", "replay": 0, "start_ns": 20, "end_ns": 25},
        ], fn.__name__
        assert fn(**_cols(rows), exec_node_ids=ids, keep_events=2).launches == []
        assert len(fn(**_cols(rows), exec_node_ids=ids, keep_events=2,
                      launches=launches).launches) == 4
