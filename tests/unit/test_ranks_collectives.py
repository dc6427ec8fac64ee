"""Collectives across ranks, their waits and the straggler verdict, on the recorded two-rank
DDP bundle tests/data/ddp_mlp_step (an MLP in two gradient buckets, H200s, 2026-11-30).
Expected values are worked out here from the fixture's own events, not copied from a run."""

import json
import os
import shutil
import statistics

import pytest

from graphscope.analysis.collectives import CLOCK_END_SPREAD_NS, align
from graphscope.analysis.stragglers import MIN_WAIT_NS, stragglers
from graphscope.model.ranks import read_ranks
from tests.conftest import DATA

DDP = os.path.join(DATA, "ddp_mlp_step")


def _events(rank):
    with open(os.path.join(DDP, f"rank{rank}", "timeline.json")) as f:
        return {(e["exec_node_id"], e["replay"]): (e["start_ns"], e["dur_ns"])
                for e in json.load(f)["events"]}


def _nccl_ids():
    with open(os.path.join(DDP, "rank0", "graph.json")) as f:
        nodes = json.load(f)["graphs"][0]["nodes"]
    return [n["exec_node_id"] for n in nodes if "nccl" in (n.get("kernel") or "").lower()]


def _with_clocks(tmp_path, origins, hosts=("h", "h")):
    """The fixture with each rank's manifest given a clock (origin, host)."""
    out = tmp_path / "ddp"
    shutil.copytree(DDP, out)
    for r, (o, h) in enumerate(zip(origins, hosts)):
        p = out / f"rank{r}" / "manifest.json"
        m = json.loads(p.read_text())
        m["clock"] = {"source": "cupti", "origin_ns": o, "host": h}
        p.write_text(json.dumps(m))
    return str(out)


def _end_offset():
    """rank 1's clock origin minus rank 0's that makes the ranks' collective ends meet."""
    e0, e1 = _events(0), _events(1)
    diffs = [sum(e0[k]) - sum(e1[k]) for k in e0 if k[0] in _nccl_ids()]
    return int(statistics.median(diffs))


def test_buckets_matched_in_issue_order_with_waits_from_the_ends():
    # GIVEN the two ranks' bundles, whose events start at each rank's own first kernel
    ranks = read_ranks(DDP)
    # WHEN the collectives are aligned
    a = align(ranks)
    # THEN both buckets' all-reduces are matched, on the end clock, over the kept replays
    assert a.clock == "end" and a.clock_reason == "not_recorded" and not a.unmatched
    assert [(c.index, c.kind, c.serves.bucket) for c in a.collectives] == [
        (0, "all_reduce", 0), (1, "all_reduce", 1)]
    assert a.replays == (0, 1, 2)
    e0, e1 = _events(0), _events(1)
    for c, nid in zip(a.collectives, _nccl_ids()):
        d0 = [e0[(nid, r)][1] for r in a.replays]
        d1 = [e1[(nid, r)][1] for r in a.replays]
        # each rank ends it together: the longer one waited the difference
        w0, w1 = (statistics.median(max(0, x - y) for x, y in zip(d0, d1)),
                  statistics.median(max(0, y - x) for x, y in zip(d0, d1)))
        assert (c.ranks[0].wait_ns, c.ranks[1].wait_ns) == (w0, w1)
        assert c.ranks[0].own_ns == c.ranks[1].own_ns == statistics.median(map(min, d0, d1))
    b0 = a.collectives[0]
    # the durations over every replay (rank 1's bucket-0 all-reduce: 32.8 us against 13.5 us)
    nodes = [{n.exec_node_id: n for n in b.work}[b0.ranks[0].exec_node_id] for _, b in ranks]
    assert [a.duration_ns for a in b0.ranks] == [statistics.median(n.durations_ns)
                                                 for n in nodes]
    assert b0.ranks[1].duration_ns > 2 * b0.ranks[0].duration_ns
    assert b0.last_rank == 0 and b0.ranks[0].last == 2 and b0.ranks[1].last == 1
    assert b0.late_ns == b0.ranks[1].wait_ns > MIN_WAIT_NS
    assert a.wait_per_replay_ns[1] > a.wait_per_replay_ns[0]
    # one shift puts rank 1's events on rank 0's clock: every instance's ends then meet
    # within a microsecond (the ranks did share one clock, shifted by their first events)
    assert a.offsets_ns == (0.0, _end_offset()) and a.offset_spread_ns < 1000


def test_the_straggler_is_rank_0_at_bucket_0_and_it_started_late():
    # GIVEN the aligned collectives of the fixture
    ranks = read_ranks(DDP)
    a = align(ranks)
    # WHEN the verdicts are made
    out = stragglers(ranks, a)
    # THEN one straggler: rank 0 is late to bucket 0, rank 1 waits for it; rank 0 did no more
    # work before it than rank 1 (its work excess is far below its lateness): a later start
    assert len(out) == 1
    s = out[0]
    assert (s.rank, s.serves.bucket, s.kind, s.waiting_rank) == (0, 0, "all_reduce", 1)
    assert s.wait_ns == a.collectives[0].ranks[1].wait_ns
    assert s.cause == "start" and abs(s.work_excess_ns) < 0.1 * s.late_ns
    assert s.start_ns == pytest.approx(s.late_ns - s.work_excess_ns)
    # the last work before the all-reduce: bucket 0 holds L.fc2 and L.head, fc2's backward
    # ends last
    assert (s.preceding_module, s.preceding_phase) == ("L.fc2", "backward")


def test_host_clock_agrees_with_the_ends(tmp_path):
    # GIVEN clock origins one host apart by the offset that the collectives' ends imply
    offset = _end_offset()
    path = _with_clocks(tmp_path, [10**15, 10**15 + offset])
    # WHEN aligned on the host clock
    a = align(read_ranks(path))
    # THEN the host clock is used, every collective's ends agree within a microsecond, and
    # the waits are those of the end clock within that
    assert a.clock == "host" and a.clock_reason == "recorded"
    assert all(c.end_spread_ns < 1000 for c in a.collectives)
    assert a.offsets_ns == (0.0, offset)
    ref = align(read_ranks(DDP))
    for c, r in zip(a.collectives, ref.collectives):
        for x, y in zip(c.ranks, r.ranks):
            assert x.wait_ns == pytest.approx(y.wait_ns, abs=1000)
        assert c.last_rank == r.last_rank


@pytest.mark.parametrize("shift, hosts, reason", [
    (2 * CLOCK_END_SPREAD_NS, ("h", "h"), "ends_disagree"),
    (0, ("h", "other"), "hosts_differ")])
def test_clocks_that_cannot_be_one_fall_back_to_the_ends(tmp_path, shift, hosts, reason):
    # GIVEN origins that put the ends far apart, or ranks on two hosts
    path = _with_clocks(tmp_path, [10**15, 10**15 + _end_offset() + int(shift)], hosts)
    # WHEN aligned
    a = align(read_ranks(path))
    # THEN the ends are used, and say why
    assert (a.clock, a.clock_reason) == ("end", reason)
    assert a.collectives == align(read_ranks(DDP)).collectives


def test_ranks_that_issue_different_collectives_are_not_matched(tmp_path):
    # GIVEN rank 1's second all-reduce relabelled as another bucket's
    out = tmp_path / "ddp"
    shutil.copytree(DDP, out)
    p = out / "rank1" / "graph.json"
    g = json.loads(p.read_text())
    second = _nccl_ids()[1]
    for n in g["graphs"][0]["nodes"]:
        if n["exec_node_id"] == second:
            n["annotation"]["ddp_bucket"] = 7
    p.write_text(json.dumps(g))
    # WHEN aligned
    a = align(read_ranks(str(out)))
    # THEN the first is matched and the rest of the graph is reported unmatched, with why
    assert [c.index for c in a.collectives] == [0]
    assert [(u.graph, u.index, u.reason, u.counts) for u in a.unmatched] == [
        ("step", 1, "serves", (2, 2))]
