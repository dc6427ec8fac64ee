"""capture --try-streams's stream plan (graphscope/capture/streams.py ``Planner``): which
stream each op runs on and what it waits for, from the storages ops read and write."""

from __future__ import annotations

import pytest

from graphscope.capture.streams import Planner


def run(plan: Planner, ops):
    """ops: (reads, writes, outputs) per op; returns [(stream, ops waited for)]."""
    out = []
    for reads, writes, outputs in ops:
        s, waits = plan.place(reads, writes)
        plan.done(s, reads, writes, outputs)
        out.append((s, waits))
    return out


def test_two_independent_chains_take_two_streams_and_join_once():
    # x (100) -> left chain 1..3; x -> right chain 11..13; add(3, 13) -> 20
    ops = [([100], [], [1]), ([1], [], [2]), ([2], [], [3]),
           ([100], [], [11]), ([11], [], [12]), ([12], [], [13]),
           ([3, 13], [], [20])]
    got = run(Planner(4), ops)
    assert [s for s, _ in got] == [0, 0, 0, 1, 1, 1, 1]
    assert [w for _, w in got] == [[], [], [], [], [], [], [2]]  # only the join waits


def test_a_sequential_chain_stays_on_one_stream():
    ops = [([100], [], [1])] + [([i, 200 + i], [], [i + 1]) for i in range(1, 30)]
    got = run(Planner(4), ops)
    assert {s for s, _ in got} == {0} and all(not w for _, w in got)


def test_residual_reads_an_older_output_without_leaving_the_stream():
    # 1 -> 2 -> 3, then add(3, 1): the producer 3 is the stream's last op
    got = run(Planner(2), [([100], [], [1]), ([1], [], [2]), ([2], [], [3]),
                           ([3, 1], [], [4])])
    assert [s for s, _ in got] == [0, 0, 0, 0]


def test_diamond_forks_and_joins():
    # a -> (b, c) -> d: c's producer a is no longer its stream's last op, so c forks
    got = run(Planner(4), [([100], [], [1]), ([1], [], [2]), ([1], [], [3]),
                           ([2, 3], [], [4])])
    assert [s for s, _ in got] == [0, 0, 1, 1]
    assert got[2][1] == [0]  # c waits for a, not for b issued after it on stream 0
    assert got[3][1] == [1]  # d waits for b


def test_write_after_read_on_another_stream_waits_for_the_reader():
    # op0 makes 1 (s0); op1 reads 1 (continues s0); op2 reads 1 too (op0 is no longer s0's
    # last op: forks to s1, waits for op0); op3 continues s0 from op1; op4 writes 1 in place
    # (and reads op3's 4): it continues s0 and must wait for op2, the reader on s1
    plan = Planner(2)
    got = run(plan, [([100], [], [1]), ([1], [], [2]), ([1], [], [3]), ([2], [], [4]),
                     ([4], [1], [])])
    assert got == [(0, []), (0, []), (1, [0]), (0, []), (0, [2])]
    # and a later read of 1 depends on that in-place write, on its stream: no wait
    assert plan.place([1], []) == (0, [])


def test_waits_are_not_repeated_for_work_already_waited_for():
    # op2 (s1) waited for op0 (s0); op3 continues s1 and reads op0's output again: no wait
    got = run(Planner(2), [([100], [], [1]), ([1], [], [2]), ([1], [], [3]),
                           ([3, 1], [], [4])])
    assert got == [(0, []), (0, []), (1, [0]), (1, [])]


def test_no_free_stream_takes_the_one_whose_last_op_is_oldest():
    # three independent ops from the input on two streams: the third shares stream 0 (its
    # last op is older than stream 1's)
    got = run(Planner(2), [([100], [], [1]), ([100], [], [2]), ([100], [], [3])])
    assert [s for s, _ in got] == [0, 1, 0]


def test_a_block_handed_out_again_starts_a_new_history():
    plan = Planner(2)
    run(plan, [([100], [], [1]), ([100], [], [2]), ([2], [], [])])
    # block 2 freed and handed to a new op's output on stream 0: readers of the old tensor
    # (on stream 1) are no longer waited for by readers of the new one
    s, _ = plan.place([1], [])
    plan.done(s, [1], [], [2])
    assert plan.readers[2] == set() and plan.stream_of[plan.writer[2]] == s


def test_an_op_that_may_be_a_view_runs_where_its_input_was_made():
    # reshape of a tensor made on stream 1 (op2) after stream 1 moved on: placed on stream 1
    # (forced), no wait, although the free rule would have picked stream 0
    plan = Planner(2)
    run(plan, [([100], [], [1]), ([1], [], [2]), ([1], [], [3]), ([3], [], [4])])
    assert plan.stream_of == [0, 0, 1, 1]
    s, w = plan.place([3], [], stream=plan.producer_stream(3))
    assert (s, w) == (1, [])
    assert plan.place([3], []) == (0, [2])  # unforced: oldest last op, waits for op2


def test_a_plan_needs_a_stream():
    with pytest.raises(ValueError):
        Planner(0)
