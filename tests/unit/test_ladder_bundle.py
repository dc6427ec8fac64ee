"""tests/ladder_bundle.py grows the recorded 10-bucket ladder (tests/data/run_ladder) into
vLLM's 67 decode buckets: the grown bundle validates on read, every exec node id is the copy's
own wherever it appears, its times are the recording's, and `graphscope report` reads it."""

import json
import os

import numpy as np
import pytest

from graphscope.cli.main import main
from graphscope.model.bundle_io import has_raw_dot, read_bundle
from tests.conftest import DATA
from tests.ladder_bundle import decode_sizes, grow_ladder

SRC = os.path.join(DATA, "run_ladder")


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    return grow_ladder(SRC, str(tmp_path_factory.mktemp("ladder") / "b"))


def _traced(g):
    return any(n.durations_ns for n in g.nodes)


def test_decode_sizes_are_vllms_default():
    # GIVEN vLLM's default decode batch sizes: 1, 2, 4, then 8 to 512 by 8
    # WHEN the builder lists 67 of them
    sizes = decode_sizes(67)
    # THEN they are those, each once
    assert sizes == [1, 2, 4, *range(8, 513, 8)]


def test_the_grown_ladder_reads_as_67_distinct_buckets(grown):
    # GIVEN the recorded ladder grown to 67 buckets
    recorded = read_bundle(SRC)
    # WHEN it is read (every file validated)
    b = read_bundle(grown)
    # THEN it holds 67 graphs of distinct names and exec ids, largest bucket first, as the
    # manifest lists them
    assert len(b.graphs) == 67
    names = [g.name for g in b.graphs]
    assert names == [f"ladder.py:45 #{i} [{s}]"
                     for i, s in enumerate(sorted(decode_sizes(67), reverse=True))]
    assert list(b.manifest["graphs"]) == names
    assert len({g.exec_id for g in b.graphs}) == 67
    assert [g.info["ordinal"] for g in b.graphs] == list(range(67))
    # AND the nodes are what the copies add up to: the never replayed graphs once, then the
    # traced ones over and over from the smallest bucket up
    never = [g for g in recorded.graphs if not _traced(g)]
    traced = [g for g in recorded.graphs if _traced(g)][::-1]
    expected = (sum(len(g.nodes) for g in never)
                + sum(len(traced[i % len(traced)].nodes) for i in range(67 - len(never))))
    assert sum(len(g.nodes) for g in b.graphs) == expected
    # AND as many buckets were never replayed as in the recording, the largest ones
    assert [g.info["traced_replays"] for g in b.graphs[:len(never)]] == [0] * len(never)
    assert not any(_traced(g) for g in b.graphs[:len(never)])
    assert all(_traced(g) for g in b.graphs[len(never):])


def test_the_smallest_buckets_are_the_recorded_ones_of_their_size(grown):
    # GIVEN the recorded buckets that were traced, by their shapes
    recorded = {g.info["shapes"]: g for g in read_bundle(SRC).graphs if _traced(g)}
    # WHEN the grown ladder's seven smallest buckets are read (1 to 32: sizes recorded)
    smallest = read_bundle(grown).graphs[-7:]
    # THEN each has its recorded bucket's kernels, edges and measured times
    assert [g.info["shapes"] for g in smallest] == ["[32]", "[24]", "[16]", "[8]", "[4]", "[2]",
                                                    "[1]"]
    for g in smallest:
        r = recorded[g.info["shapes"]]
        assert [(n.local_id, n.kernel, n.durations_ns) for n in g.nodes] == \
            [(n.local_id, n.kernel, n.durations_ns) for n in r.nodes]
        assert g.edges == r.edges


def test_every_exec_node_id_is_the_copys_own(grown):
    # GIVEN the grown ladder
    b = read_bundle(grown)
    ids = {n.exec_node_id: g.name for g in b.graphs for n in g.nodes}
    # WHEN its nodes, annotations, durations, events, launches and raw DOT are read
    with open(os.path.join(grown, "annotations.json"), encoding="utf-8") as f:
        annotated = {int(k) for k in json.load(f)["annotations"]}
    durations = np.load(os.path.join(grown, "durations.npy"))
    # THEN every node's id is its graph's exec id and its local id
    assert all(n.exec_node_id == g.exec_id << 32 | n.local_id for g in b.graphs for n in g.nodes)
    # AND the annotations and durations name the grown nodes, all that were timed
    assert annotated <= set(ids)
    assert set(durations[:, 0].tolist()) == {n.exec_node_id for n in b.nodes() if n.durations_ns}
    # AND each event names a node of the graph it names, each launch a graph of the bundle
    assert all(ids.get(e["exec_node_id"]) == e["graph"] for e in b.events)
    assert {x["graph"] for x in b.launches} == {g.name for g in b.graphs if _traced(g)}
    # AND every graph has its own raw DOT, the manifest lists the files written
    assert all(has_raw_dot(b, g.name) for g in b.graphs)
    on_disk = {os.path.relpath(os.path.join(d, f), grown)
               for d, _, fs in os.walk(grown) for f in fs}
    assert set(b.manifest["files"]) == on_disk


def test_each_launch_comes_before_its_replay_runs(grown):
    # GIVEN the grown ladder's events and launches, laid out one graph after another
    b = read_bundle(grown)
    first = {}
    for e in b.events:
        key = (e["graph"], e["replay"])
        first[key] = min(first.get(key, e["start_ns"]), e["start_ns"])
    # WHEN each traced replay's launch is set against its first event
    # THEN the host launched it before the GPU ran it, once per traced replay
    assert len(b.launches) == len(first)
    assert all(x["start_ns"] < first[(x["graph"], x["replay"])] for x in b.launches)


def test_grown_to_its_own_size_the_replay_totals_are_the_recordings(tmp_path):
    # GIVEN the recorded ladder
    recorded = read_bundle(SRC)
    # WHEN it is grown to its own 10 buckets
    b = read_bundle(grow_ladder(SRC, str(tmp_path / "b"), len(recorded.graphs)))
    # THEN each replay's GPU time adds up as recorded
    assert b.replay_kernel_ns == recorded.replay_kernel_ns
    assert b.replays == recorded.replays


def test_report_json_lists_the_67_buckets(grown, capsys):
    # GIVEN the grown ladder
    # WHEN `graphscope report --json` reads it, from the kept summary, then recomputed
    assert main(["report", grown, "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert main(["report", grown, "--json", "--recompute"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    # THEN it lists 67 graphs and a ladder of 67 buckets, 2 never replayed
    assert len(kept["graphs"]) == 67
    assert [len(x["buckets"]) for x in kept["ladder"]] == [67]
    assert kept["untraced_graphs"] == 2
    # AND the kept summary and diagnosis are what a fresh analysis gives
    assert kept == fresh


def test_report_prints_the_grown_ladder(grown, capsys):
    # GIVEN the grown ladder
    # WHEN `graphscope report` prints it
    rc = main(["report", grown])
    out = capsys.readouterr().out
    # THEN it succeeds and names the site
    assert rc == 0
    assert "ladder.py:45" in out
