"""torch.compile's cudagraph trees in a real program's bundle: tests/data/run_compiled_trees,
``graphscope run`` of sample_models/programs/compiled_trees.py recorded on the H200
(bench/record_demo_fixtures.py): a reduce-overhead model that sees a second batch size and
comes back to the first, and a compiled helper that writes its input in place (a region
torch will not graph). The report's cudagraph-trees section, in every view."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from graphscope.cli.main import cli
from tests.conftest import DATA

BUNDLE = os.path.join(DATA, "run_compiled_trees")


def _run(*args: str) -> str:
    r = CliRunner().invoke(cli, ["report", BUNDLE, *args], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    return r.output


def test_each_batch_size_is_a_graph_of_its_own_and_a_recording():
    doc = json.loads(_run("--json"))
    names = [g["name"] for g in doc["graphs"]]
    # THEN three graphs: batch 8, batch 32, and batch 8 again (a re-recording)
    assert [n.rsplit(" ", 1)[-1] for n in names] == ["[8,256]", "[32,256]", "[8,256]"]
    assert all("compiled_trees.py:16 (forward) compiled #" in n for n in names)
    t = doc["cudagraph_trees"]
    # AND the section counts 2 recordings and 1 re-recording: a graph each
    assert t["recordings"] + len(t["re_recordings"]) == len(names) == 3
    rr = t["re_recordings"][0]
    assert rr["reason"].startswith("input shapes 32x256") and "-> 8x256" in rr["reason"]
    # AND the in-place helper is the skipped region, with torch's reason and the line
    assert len(t["skips"]) == 1 and t["counters"]["cudagraph_skips"] == 1
    assert "mutated inputs" in t["skips"][0] and "compiled_trees.py\", line 22" in t["skips"][0]


def test_terminal_and_markdown_say_what_was_recorded_and_skipped():
    out = _run()
    assert ("torch.compile cudagraph trees: 2 recording(s), 1 re-recording(s), 1 skipped "
            "region(s)") in out
    assert "skipped: skipping cudagraphs due to mutated inputs" in out
    md = _run("--markdown")
    assert "### torch.compile cudagraph trees" in md
    assert "- skipped: skipping cudagraphs due to mutated inputs (1 instances)." in md
    assert "- re-recorded partition_0" in md


def test_every_graph_is_diagnosed_and_the_cold_first_replay_set_aside():
    doc = json.loads(_run("--json"))
    graphs = doc["diagnosis"]["graphs"]
    assert len(graphs) == 3 and all(g["timed"] for g in graphs)
    # torch replays a graph right after recording it: that cold replay is not a figure
    sel = graphs[0]["selection"]
    assert sel["set_aside"] == [0] and sel["used"] == [1, 2]
    assert sel["set_aside_span_ns"] > 1.5 * sel["others_span_ns"]


def test_graphs_traced_a_different_number_of_times_are_said_so():
    # GIVEN the three graphs, traced 3, 3 and 1 times: no traced replay holds one of each
    out = " ".join(_run().split())
    # THEN the header and the module table say their figure is the median of the totals
    assert ("graph work 45.2 µs per traced replay (the median of the replays' totals; not "
            "every graph ran in every traced replay (traced 3, 3, 1 times)") in out
    assert "GPU time by module (median of the traced replays' totals)" in out
    # AND the per-graph table has the third graph's own median, not "-": each column the
    # graph's time per replay over its counted replays (its cold first one set aside)
    doc = json.loads(_run("--json"))
    by = {r["module"]: r["per_graph_ns"] for r in doc["by_graph"]["rows"]}
    assert by["L"][2] == 28832.0
    assert by["L"] == [g["median_ns"] for g in doc["graphs"]]
