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
