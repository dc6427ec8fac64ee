"""The diagnosis where a user looks: report (terminal, --json), check budgets, diff, HTML."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner
from rich.console import Console

from graphscope._errors import ConfigError
from graphscope.analysis.budgets import evaluate, load_budgets
from graphscope.analysis.diff import diagnosis_deltas
from graphscope.cli.main import cli
from tests.conftest import DATA, SAMPLES
from tests.unit.test_check_diff import _b, _yaml


def test_report_prints_the_diagnosis_and_json_has_it():
    p = os.path.join(DATA, "sidestream_step")
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], terminal_width=120)
    assert r.exit_code == 0, r.output
    assert "Diagnosis" in r.output and "critical path by module" in r.output
    # the cold first replay (116 µs) set aside, and said so: the figures are the others'
    text = " ".join(r.output.split())
    assert ("the cold first replay (span 116.1 µs against 62.7 µs for the others) is set "
            "aside: the figures come from the other 3 traced replay(s); idle, gaps and launch "
            "latency from replay(s) 1, whose events were kept") in text
    assert "two or more nodes running 42% of the span" in text
    assert "findings: nothing to gain above noise" in text
    # launches not recorded (an older bundle): said once, in the table's caption
    assert r.output.count("launches not recorded") == 1
    assert "launch latency not recorded" not in r.output
    r = CliRunner().invoke(cli, ["report", p, "--json"])
    d = json.loads(r.output)["diagnosis"]
    o = d["graphs"][0]
    assert o["critical_path"]["length_ns"] < o["work_ns"] and o["concurrency_pct"] > 0
    r = CliRunner().invoke(cli, ["report", p, "--json", "--no-diagnosis"])
    assert "diagnosis" not in json.loads(r.output)


def test_report_says_what_the_measured_what_if_found():
    """branches_try_streams (H200): the one-stream branches re-captured over up to 4
    streams by capture --try-streams; the terminal, --json and the verdicts carry it beside
    the prediction."""
    p = os.path.join(DATA, "branches_try_streams")
    r = CliRunner().invoke(cli, ["report", p, "--json"])
    d = json.loads(r.output)["diagnosis"]
    o = d["graphs"][0]
    m = o["what_if_measured"]
    info = _b("branches_try_streams").graphs[0].info["what_if_streams"]
    # the medians of what was traced, the gain, and the prediction rescaled to them
    assert m["span_ns"] == info["median_ns"] and m["one_stream_ns"] == info[
        "median_one_stream_ns"]
    assert m["streams"] == 2 and m["max_streams"] == 4 and m["outputs_equal"] is True
    assert m["gain_pct"] == pytest.approx(100 * (1 - m["span_ns"] / m["one_stream_ns"]))
    wi = o["what_if"]
    k = m["one_stream_ns"] / wi["measured_span_ns"]
    assert m["predicted_ns"] == pytest.approx(wi["predicted_span_ns"] * k)
    assert m["off_prediction_pct"] == pytest.approx(
        100 * (m["span_ns"] / m["predicted_ns"] - 1))
    assert m["within_interval"] and abs(m["off_prediction_pct"]) < 15
    assert m["span_iqr_ns"][0] <= m["span_ns"] <= m["span_iqr_ns"][1]
    (v,) = [v for v in o["verdicts"] if v["code"] == "streams_measured"]
    assert v["from_ns"] == m["one_stream_ns"] and v["to_ns"] == m["span_ns"]
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert ("re-captured over 2 of up to 4 streams (129 aten ops, 1 cross-stream wait(s)): span "
            "777.4 µs (IQR 772.9 µs-779.6 µs) against 1.40 ms on one stream, 20 replays of each "
            "alternated (-45%); the what-if predicted 815.9 µs (its figure scaled to these "
            "replays' one-stream span), the measurement lies 5% below "
            "it, inside its interval") in text
    assert "measured on 2 stream(s) (--try-streams 4): span 777.4 µs against 1.40 ms on one " \
        "stream in the same replays (-45%)" in text
    assert "│ 815.5 µs -42% │ 777.4 µs -45% │" in r.output
    # the findings come first, with the command that tried it
    assert r.output.index("What to do next") < r.output.index("Diagnosis (median")
    assert "graphscope capture sample_models/branches.py --mode" in r.output
    assert "--try-streams 4" in r.output
    # a terminal under 120 columns leaves the column out (the line above holds it)
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], env={"COLUMNS": "100"})
    assert "tried" not in r.output.split("path: the nodes")[0] and "777.4 µs" in r.output


def _tried(**change):
    """branches_try_streams's diagnosis with its measurement changed."""
    import dataclasses

    from graphscope.analysis.diagnosis import diagnose

    b = _b("branches_try_streams")
    g = b.graphs[0]
    wi = {**g.info["what_if_streams"], **change}
    return diagnose(dataclasses.replace(b, graphs=(dataclasses.replace(
        g, info={**g.info, "what_if_streams": wi}),)))


def test_diff_has_the_measured_span_where_a_side_has_one():
    d = diagnosis_deltas(_b("branches_forward"), _b("branches_try_streams"))
    (row,) = d["graphs"]
    assert row["tried_ns"] == {"a": None, "b": 777396.5, "delta": None}
    r = CliRunner().invoke(cli, ["diff", os.path.join(DATA, "branches_forward"),
                                 os.path.join(DATA, "branches_try_streams")],
                           env={"COLUMNS": "160"})
    assert r.exit_code == 0 and "- → 777.4 µs │" in r.output, r.output


def test_a_slower_or_wrong_measurement_says_so():
    from graphscope.render.diagnosis import diagnosis_lines, diagnosis_table, verdict_lines

    # slower over more streams: "+21%, slower", not "no gain"
    d = _tried(median_ns=1.21 * 1402186.5, median_one_stream_ns=1402186.5)
    assert verdict_lines(d)[-1].endswith("in the same replays (+21%, slower)")
    con = Console(width=160, record=True)
    con.print(diagnosis_table(d, width=160))
    assert "1.70 ms +21%, slower" in con.export_text()
    # outputs that differ are flagged in the cell, the line and the verdict
    d = _tried(outputs_equal=False, max_abs_diff=0.626)
    con = Console(width=200, record=True)
    con.print(diagnosis_table(d, width=200))
    con.print(diagnosis_lines(d))
    text = " ".join(con.export_text().split())
    assert "777.4 µs -45% (outputs differ)" in text
    assert "outputs DIFFER (max |diff| 0.626)" in text
    assert "its outputs differ from the graph's (max |diff| 0.626): an ordering the stream plan " \
        "missed, or a nondeterministic model" in text
    d = _tried(outputs_equal=False, max_abs_diff=None)
    assert "(output structure differs)" in verdict_lines(d)[-1]
    # faster than predicted: below it, and outside the interval
    d = _tried(median_ns=600000.0)
    con = Console(width=200, record=True)
    con.print(diagnosis_lines(d))
    assert ("the what-if predicted 815.9 µs (its figure scaled to these replays' one-stream "
            "span), the measurement lies 26% below it, outside its "
            "interval") in " ".join(con.export_text().split())


def test_a_failed_try_streams_capture_is_a_verdict_not_a_crash():
    from graphscope.analysis.diagnosis import diagnose
    from graphscope.model.bundle import Bundle

    b = _b("branches_forward")
    g = b.graphs[0]
    import dataclasses

    g2 = dataclasses.replace(g, info={**g.info, "what_if_streams": {
        "max_streams": 3, "error": "RuntimeError: operation not permitted when stream is "
        "capturing"}})
    from graphscope.render.diagnosis import verdict_lines

    d = diagnose(Bundle(b.path, b.manifest, (g2,), b.replays, b.replay_kernel_ns,
                        b.replay_span_ns, b.events, b.unjoined_records, b.launches))
    m = d.graphs[0].what_if_measured
    assert m.max_streams == 3 and m.error == g2.info["what_if_streams"]["error"]
    assert ("--try-streams 3: the capture over more streams failed: RuntimeError: operation "
            "not permitted when stream is capturing") in verdict_lines(d)


@pytest.mark.parametrize("args,msg", [
    (["--mode", "forward", "--try-streams", "1"],
     "command line: try_streams must be 0 (off) or 2..16 streams, not 1"),
    (["--mode", "forward", "--try-streams", "64"], "must be 0 (off) or 2..16 streams, not 64"),
    (["--mode", "step", "--try-streams", "1", "--nproc", "2"],
     "must be 0 (off) or 2..16 streams"),  # refused by the launcher, not by each rank
])
def test_try_streams_refused_before_any_work(tmp_path, capsys, args, msg):
    from graphscope.cli.main import main

    out = tmp_path / "b"
    assert main(["capture", os.path.join(SAMPLES, "branches.py"), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_try_streams_from_yaml_and_environment_name_where(tmp_path, capsys):
    from graphscope.cli.main import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("mode: forward\ntry_streams: 1\n")
    assert main(["capture", "--config", str(cfg), "-o", str(tmp_path / "b")]) == 2
    assert f"{cfg}:2: try_streams must be 0 (off) or 2..16 streams, not 1" in (
        capsys.readouterr().err)
    from graphscope.capture.config import from_env

    assert from_env({"GRAPHSCOPE_TRY_STREAMS": "4"}) == {"try_streams": 4}
    with pytest.raises(ConfigError, match=r"\$GRAPHSCOPE_TRY_STREAMS: try_streams must be"):
        from_env({"GRAPHSCOPE_TRY_STREAMS": "-3"})


def test_report_run_bundle_gaps_between_replays():
    p = os.path.join(DATA, "run_decode")
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], terminal_width=200)
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())  # as one line, however the terminal wraps it
    assert "gaps between replays: 2, median 6.38 ms" in said
    assert "synchronized and flushed by graphscope's tracer" in said
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
    # (#0 is matched by both patterns: its result is named with the glob that gave it)
    assert {r.name for r in skipped} == {"graphs[ladder.py:45 #*][ladder.py:45 #0 [96]]",
                                         "graphs[ladder.py:45 #1 [64]]"}
    assert all(r.passed and "never replayed while traced" in r.message for r in skipped)
    assert by["graphs[ladder.py:45 #2 [48]].critical_path"].passed
    # AND a pattern that matches only never-replayed buckets fails once: it checked nothing
    assert not by["graphs[ladder.py:45 #0*]"].passed
    assert len(by) == len(res)  # no two results share a name
    # AND JUnit marks the skips as skipped, not as failures
    xml = junit_xml(res)
    assert xml.count("<skipped ") == len(skipped) and f'skipped="{len(skipped)}"' in xml


def test_graph_budgets_name_each_result_once(tmp_path):
    # GIVEN the graphs budgets of docs/cli.md: one graph by its name, and every graph
    from graphscope.render.junit import junit_xml

    b = _b("run_ladder")
    p = _yaml(tmp_path, """
        graphs:
          "ladder.py:45 #0 [96]": {max_critical_path_us: 300}
          "ladder.py:45 #2 [48]": {max_critical_path_us: 100000}
          "*": {max_critical_path_us: 100000, max_idle_pct: 100}
    """)
    res = evaluate(b, load_budgets(p))
    names = [r.name for r in res]
    # THEN no two results (JUnit test cases) share a name: the graph the exact pattern names
    # fails once (never replayed while traced), and "*" names the graphs it also matched
    assert len(names) == len(set(names))
    assert [r.name for r in res if r.name.startswith("graphs[ladder.py:45 #0")] == [
        "graphs[ladder.py:45 #0 [96]]"]
    by = {r.name: r for r in res}
    assert not by["graphs[ladder.py:45 #0 [96]]"].passed
    assert by["graphs[ladder.py:45 #2 [48]].critical_path"].passed
    assert by["graphs[*][ladder.py:45 #2 [48]].critical_path"].passed
    assert by["graphs[*][ladder.py:45 #0 [96]]"].skipped
    assert by["graphs[ladder.py:45 #3 [32]].idle_pct"].passed  # matched by "*" only
    xml = junit_xml(res)
    assert len(set(re.findall(r'<testcase [^>]*name="([^"]*)"', xml))) == len(res)


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
    # AND a change of idle, a share, is in percentage points
    from rich.console import Console

    from graphscope.analysis.diff import DiagnosisDeltas, DiagnosisRow, delta
    from graphscope.render.diff import diagnosis_diff_table

    con = Console(width=200, record=True)
    con.print(diagnosis_diff_table(DiagnosisDeltas((DiagnosisRow(
        "g", critical_path_ns=delta(1.0, 1.0), span_ns=delta(1.0, 1.0),
        idle_pct=delta(11.0, 16.0), launch_latency_ns=delta(None, None),
        tried_ns=delta(None, None)),), (), (), delta(None, None))))
    assert "11% → 16% (+5 pp)" in con.export_text()


def test_report_leaves_the_diagnosis_out_of_a_large_bundle_fast_path(monkeypatch):
    import graphscope.analysis.report as R

    monkeypatch.setattr(R, "DIAGNOSIS_MAX_NODES", 0)
    p = os.path.join(DATA, "gpt_step")
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0"], terminal_width=120)
    assert r.exit_code == 0 and "left out" in r.output and "Diagnosis (median" not in r.output
    r = CliRunner().invoke(cli, ["report", p, "--depth", "0", "--diagnosis"],
                           terminal_width=120)
    assert "Diagnosis (median" in r.output
