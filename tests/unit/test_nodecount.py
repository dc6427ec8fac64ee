"""Node counting (csrc/nodecount.h, graphscope/nodecount.py): a capture's scopes from the graph's
node count noted at each scope change on the capturing thread, no CUPTI subscription. The
count is faked here (count_fake_nodes); tests/gpu/test_nodecount_gpu.py counts real captures
against CUPTI's records."""

import threading

import numpy as np
import pytest

from graphscope import native
from graphscope.native import nodecount

U8 = np.uint64


def _marks(**kw):
    base = dict(counts=np.zeros(0, U8), scopes=np.zeros(0, np.int64), ops=np.zeros(0, np.int64),
                attached=True, foreign=0,
                errors=0, thread=1)
    base.update(kw)
    return nodecount.CountedNodes(**base)


def test_scope_changes_are_noted_at_the_node_count_they_happen_at(ext):
    with nodecount.counting(fake=True) as out:
        nodecount.attach(0)  # count 0, nothing open
        native.push_scope(5)  # still 0 nodes: replaces the mark at 0
        ext.count_fake_nodes(3)
        native.push_scope(7)  # opened and closed with no node made under it: no trace
        native.pop_scope()
        ext.count_fake_nodes(4)
        native.pop_scope()
        ext.set_slot(9)  # a backward slot applies where nothing is pushed
        ext.count_fake_nodes(6)
        ext.retire_slots()
    m = out[0]
    assert m.counts.tolist() == [0, 3, 4, 6] and m.scopes.tolist() == [5, 5, 9, -1]
    assert m.ops.tolist() == [-1] * 4
    assert m.attached and m.foreign == 0 and m.problem() == ""
    assert not ext.counting()


def test_each_count_asked_of_the_driver_is_counted_and_timed(ext):
    # what the notes cost a capture loop (graphscope run's "count_queries" overhead): one count
    # per change of scope or op; a push and pop back to the same scope with nothing between
    # them is still two questions
    with nodecount.counting(fake=True) as out:
        nodecount.attach(0)
        native.push_scope(5)
        native.pop_scope()
        native.push_scope(5)  # the same scope as the last note: nothing asked
        native.push_scope(5)
    native.pop_scope()  # the thread's scopes as found (the window has ended: not noted)
    native.pop_scope()
    m = out[0]
    assert m.queries == 4 and m.query_s >= 0.0
    assert native.current_scope() == -1
    with nodecount.counting(fake=True) as out:  # a new window starts from none
        pass
    assert out[0].queries == 0 and out[0].query_s == 0.0


def test_op_changes_are_noted_with_the_scope(ext):
    # the op observer sets the thread's op at each op's start and end (set_current_op)
    with nodecount.counting(fake=True) as out:
        nodecount.attach(0)
        native.push_scope(5)
        prev = ext.set_current_op(40)  # an op starts: its kernels come next
        ext.count_fake_nodes(2)
        ext.set_current_op(prev)  # and ends
        ext.count_fake_nodes(3)  # a node of the scope outside any op
        prev = ext.set_current_op(41)
        ext.count_fake_nodes(4)
        ext.set_current_op(prev)
        native.pop_scope()
    m = out[0]
    assert m.counts.tolist() == [0, 2, 3, 4]
    assert m.scopes.tolist() == [5, 5, 5, -1] and m.ops.tolist() == [40, -1, 41, -1]
    rec = nodecount.as_created(m, _inspection([(1 << 32) | i for i in range(4)]))
    assert rec.op.tolist() == [40, 40, -1, 41] and rec.scope.tolist() == [5, 5, 5, 5]


def test_nothing_is_noted_before_the_capture_is_attached(ext):
    with nodecount.counting(fake=True) as out:
        native.push_scope(5)
        native.pop_scope()
    assert out[0].counts.tolist() == [] and not out[0].attached
    assert "not found" in out[0].problem()


def test_scope_changes_on_other_threads_are_counted_as_foreign(ext):
    with nodecount.counting(fake=True) as out:
        nodecount.attach(0)
        t = threading.Thread(target=lambda: (native.push_scope(3), native.pop_scope()))
        t.start()
        t.join()
    assert out[0].foreign == 2 and out[0].scopes.tolist() == [-1]


def test_op_changes_on_other_threads_are_neither_noted_nor_foreign(ext):
    # the op observer is a global callback: a data loader's aten ops set that thread's op
    with nodecount.counting(fake=True) as out:
        nodecount.attach(0)
        t = threading.Thread(target=lambda: ext.set_current_op(ext.set_current_op(7)))
        t.start()
        t.join()
    assert out[0].foreign == 0 and out[0].ops.tolist() == [-1]


def test_counting_is_one_window_at_a_time_and_attach_needs_it(ext):
    with pytest.raises(Exception, match="not on"):
        nodecount.attach(0)
    with nodecount.counting(fake=True):
        with pytest.raises(Exception, match="already on"):
            ext.count_start(True)
    assert not ext.counting()


def _inspection(node_id):
    n = len(node_id)
    z = np.zeros(n, dtype=np.int64)
    return native.GraphInspection(
        graph_id=4, node_id=np.asarray(node_id, U8), node_type=np.arange(n, dtype=np.int32),
        grid=np.zeros((n, 3), np.int64), block=np.zeros((n, 3), np.int64), smem=z, bytes=z,
        name_idx=z, names=["k"], demangled=["k"], edge_from=np.zeros(0, U8),
        edge_to=np.zeros(0, U8))


def test_each_node_gets_the_scope_and_op_of_its_creation_rank():
    gid = 4 << 32
    # nodes listed out of creation order (local ids 2, 0, 3, 1)
    insp = _inspection([gid | 2, gid | 0, gid | 3, gid | 1])
    rec = nodecount.as_created(_marks(counts=np.array([0, 1, 3], U8),
                                      scopes=np.array([-1, 8, 9]), ops=np.array([-1, 7, -1])),
                               insp)
    # ranks: local 0 -> -1, local 1 -> 8, local 2 -> 8, local 3 -> 9
    assert rec.scope.tolist() == [8, -1, 9, 8]
    assert rec.node_id.tolist() == insp.node_id.tolist()
    assert rec.graph_id.tolist() == [4] * 4 and rec.node_type.tolist() == [0, 1, 2, 3]
    assert rec.op.tolist() == [7, -1, -1, 7] and rec.thread.tolist() == [1] * 4
    assert not len(rec.exec_id) and not len(rec.clone_id)


def test_a_window_with_no_marks_leaves_every_node_unscoped():
    rec = nodecount.as_created(_marks(), _inspection([1 << 32, (1 << 32) | 1]))
    assert rec.scope.tolist() == [-1, -1]


def test_nothing_is_noted_once_the_capture_is_ending(ext):
    # capture_end may destroy the graph (a failed capture): detach stops the notes first
    with nodecount.counting(fake=True) as out:
        nodecount.attach(0)
        native.push_scope(5)
        ext.count_fake_nodes(2)
        nodecount.detach()
        native.pop_scope()  # after capture_end: no driver call, no mark
        ext.retire_slots()
    assert out[0].counts.tolist() == [0] and out[0].scopes.tolist() == [5]
    assert out[0].attached and out[0].problem() == ""
    with nodecount.counting(fake=True) as out:
        nodecount.detach()  # never attached: still reported so
    assert not out[0].attached


def test_an_unplaced_window_gives_no_node_a_scope():
    m = _marks(counts=np.array([0], U8), scopes=np.array([8]), foreign=2)
    rec = nodecount.as_created(m.unplaced(), _inspection([1 << 32, (1 << 32) | 1]))
    assert rec.scope.tolist() == [-1, -1]


def test_the_mode_is_read_from_the_environment(monkeypatch):
    for raw, mode in (("0", "off"), ("off", "off"), ("1", "all"), ("all", "all"),
                      ("ALL", "all"), ("learned", "learned"), (" Learned ", "learned")):
        monkeypatch.setenv("GRAPHSCOPE_NODE_COUNTS", raw)
        assert nodecount.mode() == mode
    monkeypatch.delenv("GRAPHSCOPE_NODE_COUNTS")
    assert nodecount.mode() == "all"


def test_counting_by_the_streams_dependencies_notes_their_count(ext):
    # GIVEN notes counted by the capture stream's dependencies (their newest node + 1)
    with nodecount.counting(fake=True, how=nodecount.DEPS) as out:
        nodecount.attach(0)
        native.push_scope(5)
        ext.count_fake_nodes(3, 2)  # the graph has 3 nodes, the stream follows node 1
        native.push_scope(7)
        ext.count_fake_nodes(4, 1)  # a stream whose dependencies were reset: never fewer
        native.pop_scope()
        native.pop_scope()
        nodecount.detach()  # the end: one walk checks the last count (4 against 2)
    m = out[0]
    # THEN the notes carry the dependencies' counts, and the end's check says they differed
    assert m.counts.tolist() == [0, 2] and m.scopes.tolist() == [5, -1]
    assert m.how == nodecount.DEPS and m.mismatches == 1


def test_counting_by_dependencies_that_agree_with_the_walk_to_the_end_has_no_mismatch(ext):
    with nodecount.counting(fake=True, how=nodecount.DEPS) as out:
        nodecount.attach(0)
        native.push_scope(5)
        ext.count_fake_nodes(3)  # the stream's newest node is the graph's newest: equal
        native.pop_scope()
        nodecount.detach()
    assert out[0].counts.tolist() == [0, 3] and out[0].mismatches == 0


def test_verified_counting_keeps_the_walks_count_and_counts_disagreements(ext):
    with nodecount.counting(fake=True, how=nodecount.VERIFY) as out:
        nodecount.attach(0)
        native.push_scope(5)
        ext.count_fake_nodes(3, 2)  # another stream's newest node not joined: they differ
        native.push_scope(7)
        ext.count_fake_nodes(4)  # joined again: they agree
        native.pop_scope()
        native.pop_scope()
    m = out[0]
    assert m.counts.tolist() == [0, 3, 4] and m.scopes.tolist() == [5, 7, -1]
    assert m.how == nodecount.VERIFY and m.mismatches == 1


def test_an_unknown_count_method_is_refused(ext):
    with pytest.raises(Exception, match="unknown node count method 7"):
        with nodecount.counting(fake=True, how=7):
            pass
    assert not ext.counting()


def test_counting_by_dependencies_can_be_turned_off(monkeypatch):
    monkeypatch.delenv("GRAPHSCOPE_COUNT_DEPS", raising=False)
    assert nodecount.deps_allowed()
    monkeypatch.setenv("GRAPHSCOPE_COUNT_DEPS", "0")
    assert not nodecount.deps_allowed()
