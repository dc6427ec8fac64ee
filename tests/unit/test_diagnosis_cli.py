"""The diagnosis where a user looks: report (terminal, --json), check budgets, diff, HTML."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from graphscope._errors import ConfigError
from graphscope.analysis.budgets import evaluate, load_budgets
from graphscope.analysis.diff import diagnosis_deltas
from graphscope.cli.main import cli
from tests.conftest import DATA
from tests.unit.test_check_diff import _b, _yaml


def test_report_prints_the_diagnosis_and_json_has_it():
    p = os.path.join(DATA, "sidestream_step")
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], terminal_width=120)
    assert r.exit_code == 0, r.output
    assert "Diagnosis" in r.output and "critical path by module" in r.output
    assert "two or more nodes running 28% of the span" in r.output
    assert "launch latency not recorded" in r.output
    r = CliRunner().invoke(cli, ["report", p, "--json"])
    d = json.loads(r.output)["diagnosis"]
    o = d["graphs"][0]
    assert o["critical_path"]["length_ns"] < o["work_ns"] and o["concurrency_pct"] > 0
    r = CliRunner().invoke(cli, ["report", p, "--json", "--no-diagnosis"])
    assert "diagnosis" not in json.loads(r.output)


def test_report_run_bundle_gaps_between_replays():
    p = os.path.join(DATA, "run_decode")
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "between replays: 2 gap(s), median 6.38 ms" in r.output
    assert "synchronized and flushed by graphscope's tracer" in r.output
    r = CliRunner().invoke(cli, ["report", p, "--graph", "#1", "--json"])
    d = json.loads(r.output)["diagnosis"]
    assert [o["graph"] for o in d["graphs"]] == ["decode.py:71 #1 [8,1] [1]"]


def test_graph_budgets_pass_fail_and_missing(tmp_path):
    b = _b("sidestream_step")
    p = _yaml(tmp_path, """
        graphs:
          "st*": {max_critical_path_us: 1000, max_idle_pct: 5, max_launch_latency_us: 50}
          "nope": {max_idle_pct: 5}
    """)
    res = {r.name: r for r in evaluate(b, load_budgets(p))}
    cp = res["graphs[step].critical_path"]
    assert cp.passed and 40 < cp.measured < 60
    assert not res["graphs[step].idle_pct"].passed and res["graphs[step].idle_pct"].measured > 5
    lat = res["graphs[step].launch_latency"]
    assert not lat.passed and "launch latency not recorded" in lat.message
    assert not res["graphs[nope]"].passed
    p = _yaml(tmp_path, "graphs:\n  step: {max_critical_path_us: 10}\n")
    assert not evaluate(b, load_budgets(p))[0].passed


def test_graph_budgets_skip_buckets_never_replayed(tmp_path):
    # GIVEN a recorded ladder whose program never replayed its first two buckets while traced
    from graphscope.render.junit import junit_xml

    b = _b("run_ladder")
    p = _yaml(tmp_path, """
        graphs:
          "ladder.py:45 #*": {max_critical_path_us: 100000, max_idle_pct: 100}
          "ladder.py:45 #0*": {max_idle_pct: 100}
    """)
    res = evaluate(b, load_budgets(p))
    by = {r.name: r for r in res}
    # THEN each such bucket is one skipped result that passes, the replayed ones are checked
    skipped = [r for r in res if r.skipped]
    assert {r.name for r in skipped} >= {"graphs[ladder.py:45 #0 [96]]",
                                         "graphs[ladder.py:45 #1 [64]]"}
    assert all(r.passed and "never replayed while traced" in r.message for r in skipped)
    assert by["graphs[ladder.py:45 #2 [48]].critical_path"].passed
    # AND a pattern that matches only never-replayed buckets fails: it checked nothing
    assert not by["graphs[ladder.py:45 #0*]"].passed
    # AND JUnit marks the skips as skipped, not as failures
    xml = junit_xml(res)
    assert xml.count("<skipped ") == len(skipped) and f'skipped="{len(skipped)}"' in xml


@pytest.mark.parametrize(("text", "msg"), [
    ("graphs:\n  step:\n    max_idle: 3\n",
     r"budgets\.yaml:3: unknown key 'graphs\.step\.max_idle'"),
    ("graphs:\n  step: 3\n", r"'step' must be a mapping"),
    ("graphs:\n  step: {max_idle_pct: -1}\n", r"'graphs\.step\.max_idle_pct' must be a finite"),
])
def test_graph_budget_errors(tmp_path, text, msg):
    with pytest.raises(ConfigError, match=msg):
        load_budgets(_yaml(tmp_path, text))


def test_diff_diagnosis_deltas():
    d = diagnosis_deltas(_b("gpt_step"), _b("gpt_step"))
    (row,) = d["graphs"]
    assert row["critical_path_ns"]["delta"] == 0 and row["idle_pct"]["delta"] == 0
    d = diagnosis_deltas(_b("gpt_step"), _b("cnn_step"))
    cp = d["graphs"][0]["critical_path_ns"]
    assert cp["delta"] == pytest.approx(cp["b"] - cp["a"]) and cp["delta"] != 0
    r = CliRunner().invoke(cli, ["diff", os.path.join(DATA, "gpt_step"),
                                 os.path.join(DATA, "cnn_step"), "--json"])
    assert json.loads(r.stdout)["diagnosis"]["graphs"][0]["graph"] == "step"
    r = CliRunner().invoke(cli, ["diff", os.path.join(DATA, "gpt_step"),
                                 os.path.join(DATA, "cnn_step")], terminal_width=120)
    assert "Diagnosis A → B" in r.output


def test_report_leaves_the_diagnosis_out_of_a_large_bundle_fast_path(monkeypatch):
    import graphscope.cli.commands.report as R

    monkeypatch.setattr(R, "DIAGNOSIS_AUTO_BYTES", 0)
    p = os.path.join(DATA, "gpt_step")
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], terminal_width=120)
    assert r.exit_code == 0 and "left out" in r.output and "Diagnosis (median" not in r.output
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0", "--diagnosis"],
                           terminal_width=120)
    assert "Diagnosis (median" in r.output
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0", "--recompute"],
                           terminal_width=120)  # the bundle is read anyway
    assert "Diagnosis (median" in r.output
