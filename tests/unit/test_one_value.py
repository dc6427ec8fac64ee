"""One figure, one value: a graph's span, GPU work and critical path are the same numbers in
`report --json` (the Graphs table's time per replay, the diagnosis), `report --recompute`,
`diff --json` (its headline and its diagnosis table), `check`'s budgets and the terminal's
tables, on every recorded bundle (the definitions: docs/cli.md, Diagnosis)."""

from __future__ import annotations

import json
import os

import pytest

from graphscope.cli.main import main
from graphscope.render.fmt import fmt_ns
from tests.conftest import fixture_bundles

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
SINGLE = [b for b in fixture_bundles() if os.path.isfile(os.path.join(b, "manifest.json"))]


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    return out


def _figures(doc):
    """graph -> (span, work, critical path) of a `report --json` document's diagnosis."""
    return {g["graph"]: (g["span_ns"], g["work_ns"], (g.get("critical_path") or {}).get(
        "length_ns")) for g in doc["diagnosis"]["graphs"] if g["timed"]}


@pytest.mark.parametrize("bundle", SINGLE, ids=lambda p: os.path.relpath(p, DATA))
def test_span_work_and_critical_path_have_one_value_in_every_command(capsys, bundle):
    # GIVEN a recorded bundle's report, recomputed report and diff against itself
    doc = json.loads(_run(capsys, "report", bundle, "--json"))
    if "diagnosis" not in doc or not doc.get("replays"):
        pytest.skip("no timed replays: no figures")
    fresh = json.loads(_run(capsys, "report", bundle, "--json", "--recompute"))
    cmp = json.loads(_run(capsys, "diff", bundle, bundle, "--json"))
    figures = _figures(doc)
    # THEN the kept and the recomputed report give the same figures
    assert _figures(fresh) == figures
    # AND the Graphs table's time per replay is the diagnosis's GPU work
    for row in doc["graphs"]:
        if row["name"] in figures and row["median_ns"] is not None:
            assert row["median_ns"] == figures[row["name"]][1], row["name"]
    # AND diff's headline and its diagnosis table print the same span, work and path
    table = {g["graph"]: g for g in cmp["diagnosis"]["graphs"]}
    for g in cmp["graphs"]:
        if g["graph"] not in figures:  # never replayed while traced: nothing to compare
            continue
        span, work, path = figures[g["graph"]]
        for key, want in (("span", span), ("work", work), ("critical_path", path)):
            if g.get(key) is not None and want is not None:
                assert g[key]["a"]["median_ns"] == want, (g["graph"], key)
        assert table[g["graph"]]["span_ns"]["a"] == span
        assert table[g["graph"]]["critical_path_ns"]["a"] == path


@pytest.mark.parametrize("name", ["mlp_step", "branches_2s_forward", "run_decode"])
def test_the_terminal_prints_the_figures_of_the_json(capsys, name):
    bundle = os.path.join(DATA, name)
    doc = json.loads(_run(capsys, "report", bundle, "--json"))
    out = _run(capsys, "report", bundle, "--full")
    diff = _run(capsys, "diff", bundle, bundle)
    for span, work, path in _figures(doc).values():
        # the Diagnosis table's cells, and diff's headline, as the JSON gives them
        for v in (span, work, path):
            assert fmt_ns(v) in out
        assert fmt_ns(span) in diff and fmt_ns(path) in diff


@pytest.mark.parametrize("view", [(), ("--markdown",), ("--json",)])
def test_a_kept_diagnosis_is_read_into_its_types_once_per_report(capsys, monkeypatch, view,
                                                                 tmp_path):
    # GIVEN a bundle whose diagnosis.json is kept, and a count of the reads into its types
    from graphscope.analysis.diagnosis import types

    calls = []
    real = types.from_json

    def counting(cls, data, *rest):
        if cls is types.Diagnosis:
            calls.append(cls)
        return real(cls, data, *rest)

    monkeypatch.setattr(types, "from_json", counting)
    # WHEN report prints it (terminal, Markdown, JSON) or writes its page
    _run(capsys, "report", os.path.join(DATA, "demo", "branches_forward"), *view)
    # THEN the diagnosis was read once, and every part of the view drew from that reading
    assert len(calls) == 1
    calls.clear()
    _run(capsys, "report", os.path.join(DATA, "demo", "branches_forward"), "--html",
         str(tmp_path / "page.html"))
    assert len(calls) == 1


@pytest.mark.parametrize("name", ["mlp_step", "gpt_step", "branches_2s_forward"])
def test_a_collapsed_dot_box_gives_the_module_tables_time(capsys, name):
    # GIVEN a bundle's module table and its graph drawn one box per module and phase
    import re

    bundle = os.path.join(DATA, name)
    doc = json.loads(_run(capsys, "report", bundle, "--json"))
    dot = _run(capsys, "dump", bundle, "--dot", "--collapse", "-o", "-")
    rows = {r["module"]: r for r in doc["modules"]}
    boxes = re.findall(r'label="([^"\\]+?)( \(bwd\))?\\n\d+ nodes?\\n([^"]+)"', dot)
    assert boxes
    # THEN each box's time is its module's forward or backward time in the table
    checked = 0
    names = {m for m, _, _ in boxes}
    for module, bwd, shown in boxes:
        row = rows.get(module)
        # a box of a module that has boxes below it holds its own nodes only; the table's row
        # holds its sub-modules' too
        if row is None or any(n.startswith(module + ".") for n in names) or row["opt_ns"]:
            continue
        assert shown == fmt_ns(row["bwd_ns"] if bwd else row["fwd_ns"]), (module, bwd)
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize(("a", "b"), [("branches_forward", "branches_2s_forward"),
                                      ("mlp_step", "marked_step"), ("gpt_step", "gpt_step")])
def test_a_changes_interval_holds_the_difference_printed_beside_it(capsys, a, b):
    cmp = json.loads(_run(capsys, "diff", os.path.join(DATA, a), os.path.join(DATA, b),
                          "--json"))
    for g in cmp["graphs"]:
        for key in ("span", "critical_path", "work"):
            c = g.get(key)
            if c is not None:
                assert c["ci_low_ns"] - 1e-6 <= c["delta_ns"] <= c["ci_high_ns"] + 1e-6, key
