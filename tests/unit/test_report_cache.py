"""The diagnosis a bundle keeps (diagnosis.json, written with it): `report` shows it without
reading the nodes, and it is exactly the diagnosis the nodes give, in every view."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from graphscope.analysis.report import report_diagnosis
from graphscope.cli.main import cli
from graphscope.model.bundle_files import DIAGNOSIS_FILE, read_diagnosis
from graphscope.model.bundle_io import read_bundle
from tests.conftest import DATA

KEPT = sorted(os.path.dirname(os.path.join(root, DIAGNOSIS_FILE))
              for root, _, files in os.walk(DATA) if DIAGNOSIS_FILE in files)


def test_fixtures_keep_their_diagnosis():
    # every single-rank fixture bundle with a summary keeps its diagnosis too
    with_summary = {root for root, _, files in os.walk(DATA) if "summary.json" in files}
    assert with_summary == set(KEPT)


@pytest.mark.parametrize("path", KEPT, ids=lambda p: os.path.relpath(p, DATA))
def test_a_kept_diagnosis_is_current_and_what_the_nodes_give(path):
    # GIVEN a fixture's diagnosis.json, written when the fixture was (tests/refresh_summaries.py)
    kept = read_diagnosis(path)
    # THEN this graphscope takes it as current, and it is the diagnosis of the bundle's nodes
    # (numbers through JSON, as the report prints them)
    assert kept is not None, f"{path}: stale diagnosis.json (run tests/refresh_summaries.py)"
    fresh = json.loads(json.dumps(report_diagnosis(read_bundle(path))))
    assert _same(kept, fresh)


def _same(a, b) -> bool:
    """Equal, floats to a relative 1e-9 (another CPU's numpy may round a sum otherwise)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
            a == pytest.approx(b, rel=1e-9, abs=1e-6))
    return a == b


def _report(path, *args):
    r = CliRunner().invoke(cli, ["report", path, *args], terminal_width=100)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("name", ["mlp_step", "demo/branches_forward", "try_streams_step",
                                  "demo/gpt_step"])
@pytest.mark.parametrize("view", [[], ["--json"], ["--markdown"]])
def test_the_kept_diagnosis_prints_as_the_computed_one(name, view):
    path = os.path.join(DATA, name)
    # WHEN the report is printed from the kept files and from the nodes (--recompute)
    # THEN every view is the same
    assert _report(path, *view) == _report(path, "--recompute", *view)


def test_a_stale_or_broken_diagnosis_is_not_used(tmp_path):
    # GIVEN a bundle whose graph.json changed after its diagnosis was kept
    b = tmp_path / "b"
    shutil.copytree(os.path.join(DATA, "mlp_step"), b)
    assert read_diagnosis(str(b)) is not None
    g = b / "graph.json"
    g.write_text(g.read_text() + "\n")
    # THEN the kept diagnosis is not read (the report diagnoses the nodes again)
    assert read_diagnosis(str(b)) is None
    # AND one that is not a diagnosis's shape, or not JSON, is not read either
    shutil.copytree(os.path.join(DATA, "mlp_step"), tmp_path / "c")
    d = tmp_path / "c" / DIAGNOSIS_FILE
    doc = json.loads(d.read_text())
    doc["diagnosis"]["graphs"] = {}
    d.write_text(json.dumps(doc))
    assert read_diagnosis(str(tmp_path / "c")) is None
    d.write_text("{not json")
    assert read_diagnosis(str(tmp_path / "c")) is None
    assert "Diagnosis" in _report(str(tmp_path / "c"))


@pytest.mark.parametrize(("where", "value"), [
    (("findings", "findings", 0, "saving_ns"), "12"), (("graphs", 0, "span_ns"), -5),
    (("graphs",), []), (("graphs", 0, "idle_pct"), float("nan"))])
def test_a_hand_edited_diagnosis_is_not_trusted(tmp_path, where, value):
    # GIVEN a kept diagnosis edited by hand (its key left as it was)
    shutil.copytree(os.path.join(DATA, "demo", "branches_forward"), tmp_path / "b")
    d = tmp_path / "b" / DIAGNOSIS_FILE
    doc = json.loads(d.read_text())
    at = doc["diagnosis"]
    for k in where[:-1]:
        at = at[k]
    at[where[-1]] = value
    d.write_text(json.dumps(doc))
    # THEN it is not read: the report diagnoses the nodes again and prints their figures
    assert read_diagnosis(str(tmp_path / "b")) is None
    assert _report(str(tmp_path / "b")) == _report(os.path.join(DATA, "demo", "branches_forward"))


def test_a_forged_diagnosis_with_its_key_made_anew_is_checked(tmp_path):
    # GIVEN a diagnosis whose figure was made negative and whose key was computed anew
    from graphscope.model.bundle_files import SUMMARY_KEY, diagnosis_digest

    b = tmp_path / "b"
    shutil.copytree(os.path.join(DATA, "mlp_step"), b)
    d = b / DIAGNOSIS_FILE
    doc = json.loads(d.read_text())
    doc["diagnosis"]["graphs"][0]["span_ns"] = -5
    manifest = json.loads((b / "manifest.json").read_text())
    doc[SUMMARY_KEY] = diagnosis_digest(str(b), manifest, doc["diagnosis"])
    d.write_text(json.dumps(doc))
    # THEN its figures are checked all the same
    assert read_diagnosis(str(b)) is None


def test_a_diagnosis_kept_by_another_graphscope_is_not_used(tmp_path, monkeypatch):
    shutil.copytree(os.path.join(DATA, "mlp_step"), tmp_path / "b")
    import graphscope._version as v

    monkeypatch.setattr(v, "__version__", v.__version__ + ".later")
    assert read_diagnosis(str(tmp_path / "b")) is None


@pytest.mark.parametrize("text", ["garbage{", "{}", '{"schema_version": 1, "graphs": 3}'])
def test_a_summary_that_cannot_be_read_is_recomputed(tmp_path, text):
    # GIVEN a bundle whose summary.json is not JSON, or not of this schema
    b = tmp_path / "b"
    shutil.copytree(os.path.join(DATA, "mlp_step"), b)
    (b / "summary.json").write_text(text)
    # THEN the report recomputes the tables, as for a stale summary
    assert _report(str(b)) == _report(os.path.join(DATA, "mlp_step"))


def test_a_program_bundle_reads_its_nodes_for_coverage_but_keeps_its_diagnosis(monkeypatch):
    # GIVEN a `graphscope run` bundle (its graph coverage needs the nodes) with a current
    # diagnosis.json, and an analysis that would fail if it ran
    import graphscope.analysis.diagnosis.compute as compute

    path = os.path.join(DATA, "run_decode")
    want = _report(path)

    def no(*a, **k):
        raise AssertionError("diagnosed again")

    monkeypatch.setattr(compute, "diagnose", no)
    # THEN the report is printed all the same, from the kept diagnosis
    assert _report(path) == want


def test_a_capture_whose_analysis_fails_writes_its_bundle_without_a_kept_diagnosis(
        tmp_path, monkeypatch):
    # GIVEN a capture's last step, and an analysis that fails on what it captured
    import importlib

    import graphscope.analysis.report as report
    from graphscope.capture.source import RawCapture

    fin = importlib.import_module("graphscope.capture.finish")  # (the package's name: a function)

    def fails(bundle):
        raise ValueError("an analysis bug\nits second line")

    monkeypatch.setattr(report, "report_diagnosis", fails)
    monkeypatch.setattr(fin, "versions", lambda: {"graphscope": "test"})
    # WHEN the bundle is written
    res = fin.finish(RawCapture(graphs=[]), output=str(tmp_path / "b"),
                     manifest={"tool": "graphscope", "command": ["graphscope"], "mode": "step",
                               "depth": None}, force=False)
    # THEN it is there, without diagnosis.json, and the capture says why in one line
    assert os.path.isfile(tmp_path / "b" / "manifest.json")
    assert not os.path.exists(tmp_path / "b" / DIAGNOSIS_FILE)
    assert res.diagnosis_error == "ValueError: an analysis bug"
