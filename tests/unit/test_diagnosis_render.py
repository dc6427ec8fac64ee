"""The diagnosis in words (graphscope/render/diagnosis.py): the table's title and path column,
the findings table, and the sentences the views share."""

from __future__ import annotations

import os

from rich.console import Console

from graphscope.analysis.diagnosis import diagnose
from graphscope.model.bundle import Bundle
from graphscope.model.bundle_io import read_bundle
from graphscope.model.graph import CapturedGraph, Node
from graphscope.render.diagnosis import diagnosis_table, print_diagnosis, words
from tests.conftest import DATA

GID = 1 << 32


def _text(renderable, width=160):
    con = Console(width=width, record=True)
    con.print(renderable)
    return con.export_text()


def _rows(text):
    return [line for line in text.splitlines() if line.startswith("│")]


def test_a_cyclic_bundle_with_replays_is_titled_by_its_replays():
    # GIVEN a graph whose edges form a cycle, replayed and traced four times
    nodes = tuple(Node("g", i, GID + i, "kernel", durations_ns=(1_000,) * 4) for i in range(2))
    evs = tuple({"graph": "g", "replay": r, "exec_node_id": GID + i,
                 "start_ns": 100_000 * r + 2_000 * i, "dur_ns": 1_000, "stream": 7}
                for r in range(4) for i in range(2))
    b = Bundle("/x", {}, (CapturedGraph("g", 1, 1, nodes, ((0, 1), (1, 0))),), 4, events=evs)
    text = _text(diagnosis_table(diagnose(b)))
    # THEN the title is that of timed replays, the path column says why it is empty, and the
    # replays' span stands
    assert text.startswith("Diagnosis (median per replay)")
    assert "no timed replays" not in text
    (row,) = _rows(text)
    assert "cycle" in row and "3.0 µs" in row


def test_never_replayed_graphs_show_no_node_count_in_the_path_column():
    # run_ladder (H200): two buckets never replayed while traced
    d = diagnose(read_bundle(os.path.join(DATA, "run_ladder")))
    text = _text(diagnosis_table(d), width=200)
    never = [r for r in _rows(text) if "[96]" in r or "[64]" in r]
    assert len(never) == 2 and not any("nodes" in r for r in never)
    assert "-: a graph never replayed while traced" in " ".join(text.split())
    # a bundle with no timed replay at all counts nodes, and its title says so
    text = _text(diagnosis_table(diagnose(read_bundle(os.path.join(DATA, "mlp_annotate")))))
    assert text.startswith("Diagnosis (no timed replays: node counts)")
    assert "nodes" in _rows(text)[0]


def test_findings_come_first_with_their_saving_and_command():
    d = diagnose(read_bundle(os.path.join(DATA, "gpt_step_eager")))
    con = Console(width=220, record=True)
    print_diagnosis(d, con)
    text = con.export_text()
    assert text.index("What to do next") < text.index("Diagnosis (median per replay)")
    rows = _rows(text.split("Diagnosis (median")[0])
    assert rows[0].startswith("│ 1 │") and "stream-order-only edge(s)" in rows[0]
    assert any("--try-streams 4" in r for r in rows)
    assert any("--try-compile 'L.*'" in r for r in rows)


def test_words_for_the_views():
    d = diagnose(read_bundle(os.path.join(DATA, "sidestream_step")))
    w = words(d)
    assert w["findings"] == [] and w["findings_note"][0].startswith(
        "findings: nothing to gain above noise")
    sel = w["graphs"]["step"]["selection"]
    assert sel.startswith("the cold first replay (span 116.1 µs against 62.7 µs")
    d = diagnose(read_bundle(os.path.join(DATA, "branches_forward")))
    w = words(d)
    assert w["findings"][0]["try"] == ("graphscope capture sample_models/branches.py --mode "
                                       "forward --try-streams 4")
    assert w["graphs"]["forward"]["what_if"][0].startswith("what-if on up to 4 streams")
    assert "registers per thread not recorded" in w["graphs"]["forward"]["what_if"][1]
    assert any(v.startswith("serialized on one stream") for v in w["verdicts"])


def test_a_path_without_timed_replays_counts_the_chain_against_the_graph():
    # GIVEN a bundle with no timed replay at all (annotate: never replayed)
    d = diagnose(read_bundle(os.path.join(DATA, "mlp_annotate")))
    # THEN the path cell gives the longest chain against the graph's work nodes, never a bare
    # count that reads as the graph's size
    assert words(d)["graphs"]["step"]["path"] == "24 of 24 nodes"
    (row,) = _rows(_text(diagnosis_table(d)))
    assert "│ 24 of 24 nodes │" in row


def test_no_fixture_shows_a_node_count_for_a_graph_never_timed_beside_timed_ones():
    import glob

    # GIVEN every recorded bundle (each rank, each gate bundle)
    seen = 0
    for manifest in sorted(glob.glob(os.path.join(DATA, "**", "manifest.json"),
                                     recursive=True)):
        d = diagnose(read_bundle(os.path.dirname(manifest)))
        w = words(d)
        # THEN where any graph was timed, one that was not has no path ("-"), in every view
        if any(o.timed for o in d.graphs):
            for o in (o for o in d.graphs if not o.timed):
                seen += 1
                assert w["graphs"][o.graph]["path"] == "-", (manifest, o.graph)
        else:
            assert all(w["graphs"][o.graph]["path"].endswith(f" of {o.work_nodes} nodes")
                       for o in d.graphs), manifest
    assert seen == 4  # run_ladder's two buckets, run_partial_network's two graphs


def _lines(d, **kw):
    from graphscope.render.diagnosis import diagnosis_lines

    return _text(diagnosis_lines(d, **kw), width=400).splitlines()


def test_the_details_line_counts_traced_graphs_and_says_why_the_others_have_none():
    # GIVEN a ladder of 10 buckets, 8 traced, the first two never replayed by the program
    d = diagnose(read_bundle(os.path.join(DATA, "run_ladder")))
    never = {"ladder.py:45 #0 [96]", "ladder.py:45 #1 [64]"}
    replays = {o.graph: 0 if o.graph in never else 3 for o in d.graphs}
    # WHEN the first three traced graphs' details are shown
    lines = _lines(d, replays=replays)
    # THEN the line under them counts the five more traced graphs only, and says the other
    # two were never replayed at all (their details are not in --json either)
    assert "(details of 5 more traced graphs: --json; 2 graphs captured but never replayed)" \
        in lines
    # AND a graph the program replayed while not traced is told apart from one never replayed
    lines = _lines(d, replays={**replays, "ladder.py:45 #1 [64]": 12})
    assert ("(details of 5 more traced graphs: --json; 1 graph captured but never replayed; "
            "1 graph replayed but never traced)") in lines
    # AND without replay counts (a capture's graphs) it says what the bundle knows
    assert ("(details of 5 more traced graphs: --json; 2 graphs never replayed while traced)"
            in _lines(d))
    # AND one more traced graph is one graph
    assert ("(details of 1 more traced graph: --json; 2 graphs never replayed while traced)"
            in _lines(d, graphs=7))


def test_the_details_line_of_a_bundle_without_timed_replays_counts_every_graph():
    # GIVEN five graphs, none replayed
    graphs = tuple(CapturedGraph(f"g{i}", i + 1, i + 1,
                                 (Node(f"g{i}", 0, ((i + 1) << 32), "kernel"),), ())
                   for i in range(5))
    d = diagnose(Bundle("/x", {}, graphs, 0))
    # WHEN the first three graphs' lines are shown THEN the two more are counted, not
    # dropped, and none is called traced
    lines = _lines(d)
    assert "(details of 2 more graphs: --json)" in lines
    assert not any("traced" in x for x in lines)
