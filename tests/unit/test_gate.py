"""Regression gates on the recorded fixtures: distributions over replays, the noise floor, the
verdicts, what changed, `diff`/`check` output (terminal, Markdown through a real Markdown
renderer, JSON) and `check --baseline` against `diff`."""

from __future__ import annotations

import dataclasses
import json
import os
import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from graphscope.analysis.budgets import evaluate, load_budgets
from graphscope.analysis.gate import REGRESSION, SPEED_UP, WITHIN_NOISE, compare
from graphscope.analysis.gate.stats import compare_rows
from graphscope.cli.main import main
from graphscope.model.bundle_io import read_bundle
from tests.conftest import DATA, ROOT

FWD, TWO = os.path.join(DATA, "branches_forward"), os.path.join(DATA, "branches_2s_forward")


def _b(name):
    return read_bundle(os.path.join(DATA, name))


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _yaml(tmp_path, text):
    p = tmp_path / "budgets.yaml"
    p.write_text(textwrap.dedent(text))
    return str(p)


# ------------------------------------------------------------------ the analysis


def test_two_streams_read_as_a_speed_up_of_span_and_critical_path():
    # GIVEN one program on one stream (A) and on two (B): kernels side by side run longer
    c = compare(_b("branches_forward"), _b("branches_2s_forward"), limit_pct=5)
    (g,) = c.graphs
    # THEN span and critical path fell beyond the noise, GPU work rose, the gate passes
    assert g.span.verdict == SPEED_UP and g.span.delta_pct == pytest.approx(-39.57, abs=0.01)
    assert g.span.ci_high_pct < 0 < g.work.ci_low_pct
    assert g.critical_path.verdict == SPEED_UP and g.work.verdict == REGRESSION
    assert g.span.a.median_ns == 1344063.5
    # B's first replay was cold: its diagnosis set it aside, and so do the gate's samples
    assert (g.set_aside_a, g.set_aside_b) == ((), (0,))
    assert (g.span.a.n, g.span.b.n) == (4, 3) and (g.work.a.n, g.work.b.n) == (4, 3)
    assert not c.failed and c.verdict == SPEED_UP and c.failures == ()


def test_the_replays_set_aside_are_said_by_side_and_by_graph_where_several():
    from graphscope.render.gate import set_aside_words

    c = compare(_b("branches_forward"), _b("branches_2s_forward"))
    (g,) = c.graphs
    assert set_aside_words(c) == ", a cold first replay set aside (B)"
    other = dataclasses.replace(g, graph="backward", set_aside_a=(0,), set_aside_b=())
    two = dataclasses.replace(c, graphs=(g, other))
    assert set_aside_words(two) == ", a cold first replay set aside (B forward, A backward)"
    none = dataclasses.replace(c, graphs=(dataclasses.replace(g, set_aside_b=()),))
    assert set_aside_words(none) == ""


@pytest.mark.parametrize("name", ["mlp_step", "gpt_step", "mlp_callables", "decode_kv_forward",
                                  "run_ladder", "run_decode"])
def test_a_bundle_against_itself_is_no_change_beyond_noise(name):
    b = _b(name)
    for on in ("span", "critical_path", "work", "module"):
        c = compare(b, b, on=on, limit_pct=0.0)
        changes = [x for g in c.graphs for x in (g.span, g.critical_path, g.work, *g.modules)
                   if x is not None]
        assert changes and {x.verdict for x in changes} == {WITHIN_NOISE}
        assert all(x.delta_ns == 0 and x.ci_low_ns <= 0 <= x.ci_high_ns for x in changes)
        assert not c.failed and c.verdict == WITHIN_NOISE


def test_graphs_never_traced_are_not_compared_and_say_why():
    c = compare(_b("run_ladder"), _b("run_ladder"))
    bucket = next(g for g in c.graphs if g.graph == "ladder.py:45 #0 [96]")
    assert bucket.span is None and [m.reason for m in bucket.missing] == ["no_samples_a"] * 3


def test_the_interval_is_seeded_and_holds_the_difference():
    a, b = _b("mlp_step"), _b("mlp_step_eager")
    one, two = compare(a, b), compare(a, b)
    assert one == two  # the same bundles, the same intervals
    s = one.graphs[0].span
    assert s.ci_low_ns <= s.delta_ns <= s.ci_high_ns


def test_two_processes_of_one_model_are_within_the_noise():
    # mlp_step and mlp_step_eager: one model, two processes; replays 0.1% apart, medians 1.7%
    s = compare(_b("mlp_step"), _b("mlp_step_eager")).graphs[0].span
    assert s.a.p90_ns - s.a.p10_ns < 0.002 * s.a.median_ns
    assert s.delta_pct == pytest.approx(1.73, abs=0.01) and s.verdict == WITHIN_NOISE
    assert s.noise_ns == pytest.approx(0.02 * s.a.median_ns)


@pytest.mark.parametrize(("shift", "spread", "verdict"), [
    (0.10, 0.01, REGRESSION), (-0.10, 0.01, SPEED_UP), (0.01, 0.01, WITHIN_NOISE),
    (0.10, 0.30, WITHIN_NOISE)])
def test_verdict_needs_the_interval_and_the_noise_floor(shift, spread, verdict):
    # GIVEN 30 replays of 100 µs with a spread, and B shifted by a share of it
    rng = np.random.default_rng(1)
    a = 100_000 * (1 + spread * rng.standard_normal(30))
    b = 100_000 * (1 + shift + spread * rng.standard_normal(30))
    ((_, _, _, lo, hi, noise, v),) = compare_rows(a[None], b[None])
    assert v == verdict and lo <= hi and noise >= 2_000.0


def test_what_changed_names_kernels_added_removed_and_replaced():
    a, b = _b("mlp_step"), _b("marked_step")
    ex = compare(a, b).graphs[0].explanation
    assert ex.kernels_added_total == 62 and ex.kernels_removed_total == 22
    (swap,) = ex.kernels_replaced
    assert swap.module == "(loss)" and swap.a.name.startswith("vectorized_elementwise_kernel")
    assert swap.b.name.startswith("reduce_kernel") and swap.b.shape == "float32[32,128]"
    added = ex.kernels_added[0]
    assert (added.module, added.shape) == ("L", "float32[32,128]") and added.median_ns > 0


def test_what_changed_names_new_stream_order_edges_and_memory():
    # GIVEN the two-stream recording as A and the one-stream as B: the stream-order-only
    # edge between the branches appears
    a, b = _b("branches_2s_forward"), _b("branches_forward")
    ex = compare(a, b).graphs[0].explanation
    assert (ex.stream_order_edges.a, ex.stream_order_edges.b) == (0, 1)
    (e,) = ex.stream_order_edges_added
    assert (e.src_module, e.dst_module) == ("L.left.31.1", "L.right.0.0")
    # AND pool memory and capture time come from each graph's info where recorded
    ladder = _b("run_ladder")
    g = ladder.graphs[2]
    bigger = dataclasses.replace(g, info={**g.info, "pool_bytes": g.info["pool_bytes"] * 2,
                                          "capture_s": 0.5})
    b2 = dataclasses.replace(ladder, graphs=(*ladder.graphs[:2], bigger, *ladder.graphs[3:]))
    ex2 = next(x for x in compare(ladder, b2).graphs if x.graph == g.name).explanation
    assert ex2.pool_bytes.b == 2 * ex2.pool_bytes.a and ex2.capture_s.b == 0.5
    from graphscope.analysis.gate.changed import what_changed
    from graphscope.render.gate import item_text

    gc = next(x for x in compare(ladder, b2).graphs if x.graph == g.name)
    lines = [item_text(m) for m in what_changed(gc.explanation, gc.modules, 1e3, 2.0)]
    assert "pool memory 36.0 MiB → 72.0 MiB (+36.0 MiB)" in lines
    assert any(x.startswith("capture time ") and x.endswith("ms)") for x in lines), lines


# ------------------------------------------------------------------ diff


def test_diff_reads_the_two_stream_change_as_a_speed_up_and_passes(capsys):
    rc, out, _ = _run(capsys, "diff", FWD, TWO, "--fail-above", "5")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].rstrip().endswith("branches_2s_forward")  # the headline table first
    assert out.index("│ span ") < out.index("A, B: medians over") < out.index("What changed")
    span = next(ln for ln in lines if "│ span " in ln)
    assert "1.34 ms" in span and "812.2 µs" in span and "-39.6%" in span and "speed-up" in span
    # B's cold first replay set aside (as its diagnosis does): the noise is the steady replays'
    assert "a cold first replay set aside (B)" in out
    assert lines[-1] == ("pass: span of forward 1.34 ms → 812.2 µs (-39.6%, 95% interval -41.4% "
                         "… -39.4%, noise 26.9 µs): speed-up (limit +5.0% on span)")


@pytest.mark.parametrize(("on", "rc"), [("span", 0), ("critical_path", 0), ("work", 1),
                                        ("module", 1)])
def test_diff_on_picks_the_metric_and_a_speed_up_never_fails(capsys, on, rc):
    got, out, _ = _run(capsys, "diff", FWD, TWO, "--fail-above", "0", "--on", on)
    assert got == rc, out.splitlines()[-1]
    if rc:  # GPU work grew 11% while the graph got faster
        assert out.splitlines()[-1].startswith("FAIL: GPU work of ")


def test_diff_of_a_bundle_with_itself_says_no_change_beyond_noise(capsys):
    rc, out, _ = _run(capsys, "diff", FWD, FWD, "--fail-above", "0")
    assert rc == 0
    assert out.splitlines()[-1].startswith("pass: span of forward 1.34 ms → 1.34 ms (+0.0%, ")
    assert out.splitlines()[-1].endswith("no change beyond noise (limit +0.0% on span)")
    assert "What changed" not in out


def test_diff_explains_a_regression(capsys):
    # GIVEN the one-stream recording against the two-stream one: the span grew
    rc, out, _ = _run(capsys, "diff", TWO, FWD, "--fail-above", "5")
    assert rc == 1
    assert out.splitlines()[-1].startswith("FAIL: span of forward 812.2 µs → 1.34 ms (+65.5%")
    assert "What changed in forward:" in out
    assert ("  new stream-order-only edge: L.left.31.1 vectorized_elementwise_kernel → "
            "L.right.0.0 memset") in out.splitlines()


def test_diff_json_follows_the_documented_schema(capsys):
    rc, out, _ = _run(capsys, "diff", TWO, FWD, "--fail-above", "5", "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["schema"] == "graphscope.gate/2" and doc["failed"] is True
    assert doc["on"] == "span" and doc["limit_pct"] == 5 and doc["verdict"] == "fail"
    span = doc["graphs"][0]["span"]
    assert span["verdict"] == "regression" and span["a"]["n"] == 3 and span["b"]["n"] == 4
    assert doc["graphs"][0]["set_aside_a"] == [0] and doc["graphs"][0]["set_aside_b"] == []
    assert doc["failures"][0]["graph"] == "forward" and "modules_work" in doc
    # every field of the JSON is in docs/gates.md
    docs = open(os.path.join(ROOT, "docs", "gates.md"), encoding="utf-8").read()

    def keys(x, out):
        if isinstance(x, dict):
            for k, v in x.items():
                out.add(k)
                keys(v, out)
        elif isinstance(x, list):
            for v in x:
                keys(v, out)
        return out

    missing = sorted(k for k in keys(doc, set()) if f"`{k}`" not in docs)
    assert not missing, missing


# ------------------------------------------------------------------ Markdown


def _html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(md)


def test_diff_markdown_renders_with_a_markdown_library(capsys):
    rc, out, _ = _run(capsys, "diff", TWO, FWD, "--fail-above", "5", "--markdown", "--link",
                      "https://ci.example/run 7/report.html")
    html = _html(out)
    assert rc == 1 and html.startswith("<h3>graphscope diff: ❌ FAIL — 1 regression(s) over "
                                       "the limit</h3>")
    root = ET.fromstring(f"<div>{html}</div>")
    head = [th.text for th in root.iter("th")]
    assert head == ["graph", "metric", "A", "B", "change", "95% interval", "noise", "verdict"]
    rows = [[("".join(td.itertext())) for td in tr.iter("td")] for tr in root.iter("tr")][1:]
    assert rows[0][:5] == ["forward", "span", "812.2 µs", "1.34 ms", "+65.5%"]
    assert rows[0][7] == "regression"
    items = ["".join(li.itertext()) for li in root.iter("li")]
    assert ("new stream-order-only edge: L.left.31.1 vectorized_elementwise_kernel → "
            "L.right.0.0 memset") in items
    (a,) = list(root.iter("a"))
    assert a.get("href") == "https://ci.example/run%207/report.html" and a.text == "Full report"


def test_markdown_names_stay_whole_in_a_table():
    from graphscope.render.gate import md_code, md_table

    name = "decode.py:71 #0 [1|2] `x`"
    md = "\n".join(md_table(["graph", "n"], [[md_code(name, in_table=True), "1"]]))
    root = ET.fromstring(f"<div>{_html(md)}</div>")
    (code,) = root.iter("code")
    assert code.text.strip() == name and len(list(root.iter("td"))) == 2


def test_check_markdown_puts_failures_first(tmp_path, capsys):
    p = _yaml(tmp_path, """
        total: {max_kernels: 1000, max_time_us: 1}
        regression: {max_pct: 5}
    """)
    rc, out, _ = _run(capsys, "check", FWD, "--budget", p, "--baseline", TWO, "--markdown")
    html = _html(out)
    assert rc == 1 and html.startswith("<h3>❌ graphscope check: FAIL, 2 of 4 checks failed</h3>")
    root = ET.fromstring(f"<div>{html}</div>")
    tables = list(root.iter("table"))
    first = [["".join(td.itertext()) for td in tr.iter("td")] for tr in tables[0].iter("tr")][1:]
    assert [r[:2] for r in first] == [["total.time", "FAIL"], ["regression[forward].span", "FAIL"],
                                      ["bundle", "pass"], ["total.kernels", "pass"]]
    assert len(tables) == 2  # the baseline's comparison under the results


# ------------------------------------------------------------------ check and budgets


def test_check_prints_failures_first_and_one_summary_line_last(tmp_path, capsys):
    p = _yaml(tmp_path, """
        total: {max_kernels: 1000, max_time_us: 1}
        graphs:
          "*": {max_span_us: 1e6, max_critical_path_us: 1}
    """)
    junit = tmp_path / "j.xml"
    rc, out, _ = _run(capsys, "check", FWD, "--budget", p, "--junit", str(junit))
    lines = [ln for ln in out.splitlines() if ln.startswith("│")]
    results = [ln.split("│")[1].strip() for ln in lines if ln.split("│")[1].strip()]
    assert rc == 1 and results[:2] == ["total.time", "graphs[forward].critical_path"]
    assert out.splitlines()[-2:] == ["graphscope check: FAIL, 2 of 5 checks failed",
                                     f"Wrote {junit}"]
    root = ET.parse(junit).getroot()
    cases = [c.get("name") for c in root.iter("testcase")]
    assert cases[:2] == ["total.time", "graphs[forward].critical_path"]
    assert root.find("system-out").text == "graphscope check: FAIL, 2 of 5 checks failed"


def test_module_globs_one_level_or_every_descendant(tmp_path):
    b = _b("run_ladder")
    res = evaluate(b, load_budgets(_yaml(tmp_path, """
        modules:
          "L.blocks.*": {max_kernels: 1000}
          "L.blocks.**": {max_time_us: 1e9}
    """)))
    kids = [r.name for r in res if r.name.endswith(".kernels")]
    deep = [r.name for r in res if r.name.endswith(".time")]
    assert kids == [f"modules[L.blocks.{i}].kernels" for i in range(4)]
    assert "modules[L.blocks.0.up].time" in deep and "modules[L.blocks].time" not in deep
    assert len(deep) == 16 and all(r.passed for r in res)


def test_graph_budgets_on_pool_bytes_capture_time_and_kernels_of_a_run_bundle(tmp_path):
    b = _b("run_ladder")
    g = b.graphs[2]
    res = {r.name: r for r in evaluate(b, load_budgets(_yaml(tmp_path, f"""
        graphs:
          "{g.name}": {{max_pool_bytes: {g.info['pool_bytes'] - 1}, max_capture_ms: 1e3,
                        max_kernels: 1000, max_span_us: 1e6}}
    """)))}
    pool = res[f"graphs[{g.name}].pool_bytes"]
    assert not pool.passed and pool.measured == g.info["pool_bytes"]
    # its detail in the units the report shows memory in, the exact figure in `measured`
    from graphscope.render.fmt import fmt_bytes

    assert pool.message.endswith(f"pool {fmt_bytes(g.info['pool_bytes'])} (max "
                                 f"{fmt_bytes(g.info['pool_bytes'] - 1)})"), pool.message
    assert res[f"graphs[{g.name}].capture_ms"].measured == pytest.approx(
        g.info["capture_s"] * 1e3)
    assert res[f"graphs[{g.name}].kernels"].passed and res[f"graphs[{g.name}].span"].passed


def test_module_budgets_on_critical_path_pool_and_capture_time(tmp_path):
    b = _b("run_ladder")
    res = {r.name: r for r in evaluate(b, load_budgets(_yaml(tmp_path, """
        modules:
          "L.blocks.0.up": {max_pool_bytes: 1, max_capture_ms: 1e3, max_critical_path_us: 1e6}
    """)))}
    pool = res["modules[L.blocks.0.up].pool_bytes"]
    assert not pool.passed and pool.measured > 1
    assert res["modules[L.blocks.0.up].capture_ms"].passed
    assert res["modules[L.blocks.0.up].critical_path"].measured > 0


def test_a_budget_on_a_bundle_without_memory_records_says_so(tmp_path):
    res = evaluate(_b("branches_forward"), load_budgets(_yaml(tmp_path, """
        graphs:
          forward: {max_pool_bytes: 1}
    """)))
    (r,) = res
    assert not r.passed and "pool memory not recorded" in r.message


@pytest.mark.parametrize(("text", "msg"), [
    ("regression: {max_pct: 5, on: spam}\n",
     r"budgets\.yaml:1: 'regression\.on' must be one of span, critical_path, work, module"),
    ("graphs:\n  '*': {max_pool_mb: 1}\n", r"budgets\.yaml:2: unknown key 'graphs\.\*\.max_pool"),
])
def test_budget_errors_name_the_file_line_and_key(tmp_path, text, msg):
    from graphscope._errors import ConfigError

    with pytest.raises(ConfigError, match=msg):
        load_budgets(_yaml(tmp_path, text))


PAIRS = [("branches_forward", "branches_2s_forward"), ("branches_2s_forward", "branches_forward"),
         ("mlp_step", "mlp_step_eager"), ("mlp_step_eager", "mlp_step"), ("mlp_step", "gpt_step"),
         ("gpt_step", "gpt_step_eager"), ("branches_forward", "branches_try_streams"),
         ("run_ladder", "run_ladder"), ("decode_kv_forward", "decode_kv_forward")]


@pytest.mark.parametrize(("a", "b"), PAIRS)
@pytest.mark.parametrize(("on", "limit"), [("span", "3"), ("critical_path", "1"),
                                           ("work", "5"), ("module", "10")])
def test_check_baseline_agrees_with_diff(tmp_path, capsys, a, b, on, limit):
    p = _yaml(tmp_path, f"regression: {{max_pct: {limit}, on: {on}}}\n")
    pa, pb = os.path.join(DATA, a), os.path.join(DATA, b)
    rc_diff = main(["diff", pa, pb, "--fail-above", limit, "--on", on])
    rc_check = main(["check", pb, "--budget", p, "--baseline", pa])
    rc_flags = main(["check", pb, "--budget", _yaml(tmp_path, "total: {max_kernels: 100000}\n"),
                     "--baseline", pa, "--fail-above", limit, "--on", on])
    capsys.readouterr()
    assert rc_diff == rc_check == rc_flags


def test_the_docs_show_what_diff_markdown_prints(capsys, monkeypatch):
    # GIVEN docs/cli.md's --markdown example and the command it names
    text = open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8").read()
    shown = text.split("```markdown\n", 1)[1].split("\n```", 1)[0]
    monkeypatch.chdir(DATA)
    rc, out, _ = _run(capsys, "diff", "branches_2s_forward", "branches_forward", "--fail-above",
                      "3", "--markdown", "--link", "https://ci.example/runs/7/report.html")
    # THEN the docs show today's output, and it renders as a heading, a table and a link
    assert rc == 1 and shown == out.rstrip("\n")
    root = ET.fromstring(f"<div>{_html(shown)}</div>")
    assert root.find("h3") is not None and root.find("table") is not None
    assert root.find("p/a").get("href") == "https://ci.example/runs/7/report.html"


def test_a_gate_that_compares_nothing_fails_in_diff_and_check(tmp_path, capsys):
    # GIVEN bundles without a graph in common (another model's step against a forward)
    a, b = os.path.join(DATA, "branches_forward"), os.path.join(DATA, "mlp_step")
    rc, out, err = _run(capsys, "diff", a, b, "--fail-above", "3")
    # THEN the gate fails and says why, and check --baseline agrees; without a gate, diff
    # only reports
    assert rc == 1 and out.splitlines()[-1] == ("FAIL: not compared: no graph has span figures "
                                                "in both bundles (limit +3.0% on span)")
    assert "1 only in A: forward; 1 only in B: step" in err
    p = _yaml(tmp_path, "regression: {max_pct: 3}\n")
    assert main(["check", b, "--budget", p, "--baseline", a]) == 1
    assert "nothing to compare" in capsys.readouterr().out
    assert main(["diff", a, b]) == 0


def test_diff_at_80_columns_keeps_the_verdict_whole():
    # GIVEN diff of two recorded bundles on an 80-column terminal
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    r = subprocess.run([sys.executable, "-m", "graphscope", "diff",
                        os.path.join(DATA, "branches_2s_forward"),
                        os.path.join(DATA, "demo", "branches_forward")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "COLUMNS": "80"})
    head = r.stdout.split("What changed")[0]
    # THEN every line fits, the verdicts and graph name read whole, and the left-out columns
    # are said
    assert all(len(x) <= 80 for x in head.splitlines()), head
    assert "│ forward │" in head and "regression" in head and "speed-up" in head
    assert "noise columns: a terminal of 96 columns or more, or --json" in " ".join(head.split())
