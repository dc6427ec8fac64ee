"""`diff`'s one document: every view (terminal, JSON, Markdown) prints the same figures,
verdicts and "what changed" items; the headline and the diagnosis table give one figure one
value; a regression under the limit is not called a regression; what changed holds only what
moved beyond its noise, the largest first; the terminal at 80 and 120 columns cuts no table
and splits no figure."""

from __future__ import annotations

import json
import os
import re

import pytest

from graphscope.analysis.gate import CompareOptions, Side, build_comparison
from graphscope.analysis.gate.changed import what_changed
from graphscope.cli.main import main
from graphscope.model.bundle_files import read_diagnosis
from graphscope.model.bundle_io import read_bundle
from tests.conftest import DATA

GATES = os.path.join(DATA, "gates")
PAIRS = [("branches_forward", "branches_2s_forward"), ("mlp_step", "marked_step"),
         ("mlp_step", "mlp_step_eager"), ("gpt_step", "cnn_step"),
         ("branches_2s_forward", "branches_forward")]


def _run(capsys, monkeypatch, *argv, columns=120):
    monkeypatch.setenv("COLUMNS", str(columns))
    for var in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(var, raising=False)
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _side(path):
    return Side(read_bundle(path), path, read_diagnosis(path))


def _cells(line):
    return [c.strip() for c in line.strip().strip("│").split("│")]


def _headline(out):
    """graph metric -> (A, B) of the headline table."""
    rows, graph = {}, ""
    for ln in out.split("What changed")[0].split("A, B: medians")[0].splitlines():
        if ln.startswith("│"):
            c = _cells(ln)
            graph = c[0] or graph
            rows[(graph, c[1])] = (c[2], c[3])
    return rows


def _diagnosis(out):
    """graph figure -> "A → B" of the "Diagnosis A → B" table."""
    rows, graph = {}, ""
    for ln in out.split("Diagnosis A → B")[1].splitlines():
        if ln.startswith("│"):
            c = _cells(ln)
            graph = c[0] or graph
            rows[(graph, c[1])] = c[2].split(" (")[0]
    return rows


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_the_headline_and_the_diagnosis_give_one_value_in_every_view(capsys, monkeypatch, a,
                                                                    b):
    # GIVEN two recorded bundles
    pa, pb = os.path.join(DATA, a), os.path.join(DATA, b)
    # WHEN diff prints them on a terminal and as JSON
    _, out, _ = _run(capsys, monkeypatch, "diff", pa, pb)
    _, text, _ = _run(capsys, monkeypatch, "diff", pa, pb, "--json")
    doc = json.loads(text)
    # THEN the diagnosis table's span and critical path are the headline's, in both views
    head, diag = _headline(out), _diagnosis(out)
    for g in doc["graphs"]:
        for metric, figure in (("span", "span"), ("critical_path", "critical path")):
            row = next(r for r in doc["diagnosis"]["graphs"] if r["graph"] == g["graph"])
            assert row[f"{metric}_ns"]["a"] == g[metric]["a"]["median_ns"]
            assert row[f"{metric}_ns"]["b"] == g[metric]["b"]["median_ns"]
            shown_a, shown_b = head[(g["graph"], figure)]
            assert diag[(g["graph"], figure)] == f"{shown_a} → {shown_b}"


def _what_changed_terminal(out):
    block = re.split(r"GPU work by module|\nnote: ", out.split("What changed in ", 1)[1])[0]
    items: list[str] = []
    for ln in block.splitlines()[1:]:
        if ln.startswith("    "):  # a continuation line, indented deeper than its item
            items[-1] += " " + ln.strip()
        elif ln.startswith("  "):
            items.append(ln.strip())
    return items


def test_terminal_markdown_and_json_show_the_same_verdicts_figures_and_changes(capsys,
                                                                             monkeypatch):
    # GIVEN the one-stream recording against the two-stream one, gated at 3%
    argv = ("diff", os.path.join(DATA, "branches_2s_forward"),
            os.path.join(DATA, "branches_forward"), "--fail-above", "3")
    rc, out, _ = _run(capsys, monkeypatch, *argv)
    _, md, _ = _run(capsys, monkeypatch, *argv, "--markdown")
    _, text, _ = _run(capsys, monkeypatch, *argv, "--json")
    doc = json.loads(text)
    # THEN the terminal's what changed is the Markdown's, item for item, and JSON's count
    terminal = _what_changed_terminal(out)
    markdown = [ln[2:].replace("`", "") for ln in md.split("**What changed in")[1].splitlines()
                if ln.startswith("- ")]
    assert terminal == markdown and len(terminal) == len(doc["changed"][0]["items"])
    # AND the verdict line is the same words in both, and the headline figures match
    assert out.splitlines()[-1] in md.replace("`", "")
    for (graph, metric), (a, b) in _headline(out).items():
        assert f"| {metric} | {a} | {b} |" in md, (graph, metric)
    assert rc == 1 and doc["failed"] is True


def test_a_regression_under_the_limit_reads_slower_not_regression(capsys, monkeypatch,
                                                                  tmp_path):
    # GIVEN a recording with an extra kernel (+6.5% span) and a 10% gate
    a, b = os.path.join(GATES, "aa_00"), os.path.join(GATES, "extra_3pct")
    rc, out, _ = _run(capsys, monkeypatch, "diff", a, b, "--fail-above", "10")
    # THEN the gate passes and neither the headline nor the verdict line says "regression"
    span = next(ln for ln in out.splitlines() if "│ span " in ln)
    assert rc == 0 and "slower, under the limit" in span and "regression" not in span
    last = out.splitlines()[-1]
    assert last.startswith("pass: ") and last.endswith(
        "slower, under the limit (limit +10.0% on span)"), last
    # AND check --baseline's passing row says the same
    budget = tmp_path / "b.yaml"
    budget.write_text("regression: {max_pct: 10}\n")
    _, text, _ = _run(capsys, monkeypatch, "check", b, "--budget", str(budget), "--baseline",
                      a, "--json")
    (row,) = [r for r in json.loads(text)["results"] if r["name"].startswith("regression")]
    assert row["passed"] and row["message"].endswith("; max +10%): slower, under the limit")


def test_what_changed_holds_only_what_moved_beyond_noise_largest_first():
    # GIVEN two separate processes of one model (A/A) and one with an extra kernel
    aa = build_comparison(_side(os.path.join(GATES, "aa_00")),
                          _side(os.path.join(GATES, "aa_01")))
    (g,) = aa.graphs
    # the explanation holds critical-path modules that grew by less than their noise ...
    noise = {c.module: c.noise_ns for c in g.modules}
    small = [m for m in g.explanation.critical_path_modules
             if m.b_ns - m.a_ns <= noise.get(m.module, 1e3)]
    assert small
    # THEN none of them is listed, nor a capture time within its spread (113 ms → 102 ms)
    items = what_changed(g.explanation, g.modules, 1e3, 2.0)
    assert not [m for m in items if m.kind in ("critical_path", "capture_s")]
    cmp = build_comparison(_side(os.path.join(GATES, "aa_00")),
                           _side(os.path.join(GATES, "extra_3pct")), CompareOptions())
    (changed,) = cmp.changed
    sizes = [m.size_ns for m in changed.items if m.size_ns is not None]
    # AND what is listed comes largest first: the module with the extra kernel leads
    assert sizes == sorted(sizes, reverse=True) and len(sizes) > 3
    first = changed.items[0]
    assert first.kind == "module_work" and first.change.module == "L.left.1"
    assert not [m for m in changed.items if m.kind == "capture_s"]


# a unit with no number before it on its line: a figure split across two lines
_SPLIT_UNIT = re.compile(r"(?<![\d.] )(?<![\d.])\b(?:µs|ms|ns|pp|MiB|GiB|KiB)\b")
_BOX = {"┏": "┓", "┃": "┃", "┡": "┩", "│": "│", "└": "┘"}


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_diff_fits_the_terminal_without_cutting_a_table_or_a_figure(capsys, monkeypatch,
                                                                    columns, a, b):
    # GIVEN a terminal of 80 or 120 columns
    _, out, _ = _run(capsys, monkeypatch, "diff", os.path.join(DATA, a), os.path.join(DATA, b),
                     columns=columns)
    lines = out.splitlines()[:-1]  # the verdict line is one line on purpose (for a CI log)
    # THEN no line is wider than the terminal, every table keeps its right border and no
    # header is cut short
    assert all(len(ln) <= columns for ln in lines), max(lines, key=len)
    for ln in lines:
        if ln[:1] in _BOX:
            assert ln.rstrip().endswith(_BOX[ln[0]]), ln
            assert not re.search(r"…\s*[┃│]", ln), ln
    # AND no figure is split across lines (no unit without its number, no number ending in .)
    for ln in lines:
        assert not _SPLIT_UNIT.search(ln.replace("(", " ")), ln
        assert not re.search(r"\d\.\s*(?:[│┃]|$)", ln), ln
    # AND what changed's continuation lines sit deeper than its items
    if "What changed in " in out:
        block = re.split(r"GPU work by module|\nnote: ", out.split("What changed in ", 1)[1])[0]
        assert all(ln.startswith("  ") for ln in block.splitlines()[1:] if ln.strip())


def test_a_speed_up_is_explained_by_what_left_the_critical_path(capsys):
    # GIVEN the one-stream branches against the same graph on two streams (a speed-up)
    from graphscope.cli.main import main

    data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
    assert main(["diff", os.path.join(data, "branches_forward"),
                 os.path.join(data, "branches_2s_forward"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (g,) = doc["changed"]
    cp = [m for m in g["items"] if m["kind"] == "critical_path"]
    # THEN the first items are the modules of the branch that left the path
    assert cp and all(m["share"]["module"].startswith("L.right.") and m["share"]["b_ns"] == 0
                      for m in cp)


def test_bundles_with_no_graph_in_common_get_no_empty_table(capsys):
    # GIVEN two bundles of different models: no graph in both
    data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
    assert main(["diff", os.path.join(data, "demo", "mlp_step"),
                 os.path.join(data, "branches_forward")]) == 0
    out = capsys.readouterr().out
    # THEN no headline table without rows: the graphs of each side are named instead
    assert "┃ graph    " not in out.split("GPU work by module")[0]
    assert "graphs only in A, not compared: step" in out.split("GPU work by module")[0]
