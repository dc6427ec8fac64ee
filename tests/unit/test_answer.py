"""The answer first: `report` opens with what the bundle is, where the time goes, what bounds
each graph and what to try first, on one 80-column screen, with the figures the tables below
it print; a bucket ladder's graphs are one row; output into a file has no trailing spaces."""

from __future__ import annotations

import json
import os
import re

import pytest

from graphscope.cli.main import main
from tests.conftest import fixture_bundles

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def _report(capsys, *argv):
    rc = main(["report", *argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _answer(out: str) -> list[str]:
    """The answer's lines: from the first line to the blank line after it."""
    return out.split("\n\n", 1)[0].splitlines()


SINGLE = [b for b in fixture_bundles() if os.path.isfile(os.path.join(b, "manifest.json"))]


@pytest.mark.parametrize("bundle", SINGLE, ids=lambda p: os.path.relpath(p, DATA))
def test_every_report_opens_with_the_answer_on_one_80_column_screen(capsys, bundle):
    # GIVEN any recorded bundle, its report into a file (no terminal: 100 columns)
    out = _report(capsys, bundle)
    # THEN the first line says what the bundle is, and the answer fits 80 columns and a
    # screen, whatever the tables' width
    answer = _answer(out)
    assert answer[0].startswith("The bundle: ")
    assert all(len(line) <= 80 for line in answer), [ln for ln in answer if len(ln) > 80]
    assert len(answer) <= 24
    # AND no line of the whole report ends in spaces or exceeds the file's 100 columns
    lines = out.splitlines()
    assert not [ln for ln in lines if ln != ln.rstrip(" ")]
    assert max(map(len, lines)) <= 100


def test_a_one_graph_report_says_what_to_try_in_its_first_30_lines(capsys):
    # GIVEN a forward capture whose diagnosis found independent chains on one stream
    out = _report(capsys, os.path.join(DATA, "demo", "branches_forward"))
    first = "\n".join(out.splitlines()[:30])
    # THEN the first finding, its saving and the command that tries it are on the first screen
    assert "What to try first" in first
    assert "--try-streams 4" in first
    findings = out[out.index("What to do next"):]
    saving = re.search(r"│ 1 │\s+(\S+ µs) (\d+)%", findings)
    assert saving is not None
    assert f"1. {saving.group(1)} ({saving.group(2)}%) per replay" in " ".join(first.split())


@pytest.mark.parametrize("name", ["gpt_step", "run_decode", "mlp_step", "run_ladder"])
def test_the_answer_gives_the_figures_the_tables_give(capsys, name):
    # GIVEN a bundle's report and its JSON
    out = _report(capsys, os.path.join(DATA, name))
    doc = json.loads(_report(capsys, os.path.join(DATA, name), "--json"))
    text = " ".join(" ".join(_answer(out)).split())
    # THEN the answer's GPU work is the header's, and each module's share is the module
    # table's row, rounded as it is printed
    header = re.search(r"graph work (\S+ [µm]?s)", out)
    assert header is not None and f"GPU work {header.group(1)}" in text
    for m in doc["answer"]["modules"]:
        row = next(r for r in doc["modules"] if r["module"] == m["module"])
        assert m["pct"] == row["pct"] and m["time_ns"] == row["median_ns"]
        assert f"{m['module']} {row['pct']:.0f}%" in text


def test_the_answer_s_bounds_are_the_diagnosis_s_figures(capsys):
    doc = json.loads(_report(capsys, os.path.join(DATA, "gpt_step"), "--json"))
    (bound,) = doc["answer"]["bounds"]
    (graph,) = doc["diagnosis"]["graphs"]
    assert bound["span_low_ns"] == bound["span_high_ns"] == graph["span_ns"]
    assert bound["idle_pct"] == graph["idle_pct"]
    assert bound["path_pct"] == pytest.approx(
        100 * graph["critical_path"]["length_ns"] / graph["span_ns"])


def test_a_bucket_ladder_is_one_row_with_its_range_and_full_shows_each_graph(capsys):
    # GIVEN a program's 10-bucket ladder (8 traced)
    bundle = os.path.join(DATA, "run_ladder")
    doc = json.loads(_report(capsys, bundle, "--json"))
    times = [g["median_ns"] for g in doc["graphs"] if g["median_ns"]]
    out = _report(capsys, bundle)
    full = _report(capsys, bundle, "--full")
    # THEN by default one row holds the site's graphs and the range of their time per replay
    grouped = out[out.index("Graphs (a capture site's buckets as one row"):]
    row, below = grouped.splitlines()[4:6]
    assert "│ ladder.py:45:" in row and "│ 10 graphs, #0 [96] … #9 [1]" in below
    assert "8 of 10" in row
    lo, hi = min(times) / 1e3, max(times) / 1e3
    assert f"{lo:.1f} µs–{hi:.1f} µs" in row
    assert "ladder.py:45 #3 [32]" not in out.split("Diagnosis")[0]
    assert "report --ladder shows each bucket" in out
    # AND --full keeps a row per graph, the columns per graph and the bucket ladder
    assert all(g["name"] in full for g in doc["graphs"])
    assert "GPU time by module per graph of ladder.py:45" in full
    assert "Bucket ladder: ladder.py:45" in full
    assert len(out.splitlines()) < len(full.splitlines())


def test_the_answer_names_a_ladders_buckets_and_the_range_over_them(capsys):
    out = _report(capsys, os.path.join(DATA, "run_ladder"))
    text = " ".join(" ".join(_answer(out)).split())
    assert "10 graphs from 1 capture site" in text
    assert "ladder.py:45 (8 graphs: #2 [48], #3 [32], #4 [24], #5 [16], … 4 more)" in text


def test_into_a_file_the_width_is_columns_or_100(capsys, monkeypatch):
    bundle = os.path.join(DATA, "gpt_step")
    wide = _report(capsys, bundle)
    monkeypatch.setenv("COLUMNS", "80")
    narrow = _report(capsys, bundle)
    assert max(map(len, wide.splitlines())) == 100
    assert max(map(len, narrow.splitlines())) <= 80
    assert _answer(wide) == _answer(narrow)  # the answer is one screen at either width


def test_a_67_bucket_ladder_reads_in_at_most_150_lines_the_answer_first(capsys, tmp_path):
    # GIVEN the recorded 10-bucket ladder grown to vLLM's 67 decode sizes
    from tests.ladder_bundle import grow_ladder

    bundle = grow_ladder(os.path.join(DATA, "run_ladder"), str(tmp_path / "ladder67"), 67)
    out = _report(capsys, bundle)
    full = _report(capsys, bundle, "--full")
    # THEN the report fits 150 lines, opens with the answer, and every table holds the site's
    # graphs as one row; --full has every graph
    lines = out.splitlines()
    assert len(lines) <= 150, len(lines)
    assert lines[0].startswith("The bundle: ") and "67 graphs from 1" in lines[0]
    assert "Diagnosis (median per replay; a site's graphs as one row" in out
    assert "ladder.py:45 #30 [272]" not in out
    assert "ladder.py:45 #30 [272]" in full and len(full.splitlines()) > 150
    # AND at 80 columns no range is cut
    os.environ["COLUMNS"] = "80"
    try:
        narrow = _report(capsys, bundle)
    finally:
        del os.environ["COLUMNS"]
    assert "…" not in narrow.split("Diagnosis (median per replay")[1].split("verdict:")[0]
    assert max(map(len, narrow.splitlines())) <= 80


@pytest.mark.parametrize("name", ["demo/branches_forward", "decode_kv_forward"])
def test_at_80_columns_the_findings_are_lines_with_whole_commands(capsys, monkeypatch, name):
    # GIVEN a report at 80 columns of a bundle with findings
    monkeypatch.setenv("COLUMNS", "80")
    out = _report(capsys, os.path.join(DATA, name))
    block = out[out.index("What to do next"):out.index("Diagnosis (median")]
    # THEN the findings are numbered lines, not a table, and each command is whole on its
    # try: line(s), never split inside a word
    assert "┃" not in block and block.splitlines()[1].startswith("1. ")
    tries = [ln.strip() for ln in block.splitlines() if ln.strip().startswith("try:")]
    assert tries and all("graphscope capture sample_models/" in t for t in tries)
    assert max(map(len, out.splitlines())) <= 80


def test_findings_of_a_program_rank_by_what_they_save_its_run():
    # GIVEN two sites' findings: a rare bucket saving 50 µs per replay (10 replays), a busy
    # one saving 10 µs (1,000 replays)
    from types import SimpleNamespace

    from graphscope.analysis.answer import group_findings

    def finding(graph, ns):
        return SimpleNamespace(graph=graph, kind="fusion", saving_ns=ns, saving_pct=5.0)

    fs = [finding("a.py:1 #0 [64]", 50_000.0), finding("b.py:2 #0 [1]", 10_000.0)]
    site_of = {"a.py:1 #0 [64]": "a.py:1", "b.py:2 #0 [1]": "b.py:2"}
    # THEN a program's run ranks the busy one first, with what each saves over the run
    ranked = group_findings(fs, site_of, {"a.py:1 #0 [64]": 10, "b.py:2 #0 [1]": 1000})
    assert [g.site for g in ranked] == ["b.py:2", "a.py:1"]
    assert [g.program_ns for g in ranked] == [10_000_000.0, 500_000.0]
    # AND without counted replays (a model file's graphs, replayed alike) per replay
    assert [g.site for g in group_findings(fs, site_of)] == ["a.py:1", "b.py:2"]


def test_a_programs_answer_says_what_a_finding_saves_over_the_run(capsys):
    out = _report(capsys, os.path.join(DATA, "run_decode"))
    text = " ".join(" ".join(_answer(out)).split())
    assert "ranked by what it saves the program's run" in text
    assert re.search(r"per replay of each graph \(\d+\.\d µs over the run's replays\)", text)


def test_a_groups_bound_gives_one_graphs_figures_and_its_own_verdicts(capsys):
    # GIVEN the recorded ladder: its longest graph is #3 [32], latency bound are others
    doc = json.loads(_report(capsys, os.path.join(DATA, "run_ladder"), "--json"))
    (bound,) = doc["answer"]["bounds"]
    longest = max((g for g in doc["diagnosis"]["graphs"] if g["timed"]),
                  key=lambda g: g["span_ns"])
    # THEN the sentence's path, idle and verdicts are that one graph's, and it is named
    assert bound["widest"] == longest["graph"].split(" ", 1)[1]
    assert bound["idle_pct"] == longest["idle_pct"]
    assert [v["code"] for v in bound["verdicts"]] == [v["code"] for v in longest["verdicts"]]
    text = " ".join(" ".join(_answer(_report(capsys, os.path.join(DATA, "run_ladder")))).split())
    assert f"the longest, {bound['widest']}: critical path" in text


def test_the_page_and_the_markdown_carry_no_wrapping_marks(capsys, tmp_path):
    page = tmp_path / "p.html"
    _report(capsys, os.path.join(DATA, "run_decode"), "--html", str(page))
    md = _report(capsys, os.path.join(DATA, "run_decode"), "--markdown")
    assert "\\u0000" not in page.read_text() and "\x00" not in md


def test_at_80_columns_a_ladders_row_keeps_its_site_whole(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = _report(capsys, os.path.join(DATA, "run_ladder"))
    table = out[out.index("Graphs (a capture site"):].splitlines()
    assert table[4].startswith("│ ladder.py:45:") and max(map(len, out.splitlines())) <= 80
