"""The diagnosis in the HTML report: payload, and the page in headless Chromium."""

from __future__ import annotations

import json
import re

import pytest

from tests.unit.test_html import CHROMIUM, _bundle, _chromium, _page, selftest, views_of


def _payload(text):
    return json.loads(re.search(r'<script id="payload" type="application/json">(.*?)</script>',
                                text, re.S).group(1))


def test_payload_has_the_diagnosis_and_critical_path_column():
    data = _payload(_page("sidestream_step"))
    (view,) = views_of(data)
    d = view["diagnosis"]
    o = d["graphs"][0]
    assert o["critical_path"]["length_ns"] < o["work_ns"] and "slack_ns" not in o
    ev = view["events"]
    assert len(ev["cp"]) == len(ev["t"])
    # every kept replay outlines the nodes of the path
    assert sum(ev["cp"]) == len(o["critical_path"]["nodes"])


def test_payload_of_a_run_bundle_has_one_diagnosis_per_view():
    data = _payload(_page("run_decode"))
    assert len(views_of(data)) == 3
    assert [len(v["diagnosis"]["graphs"]) for v in views_of(data)] == [2, 1, 1]
    assert views_of(data)[0]["diagnosis"]["between_replays"]["pairs"] == 2
    first = views_of(data)[1]["diagnosis"]["graphs"][0]["graph"]
    assert first == _bundle("run_decode").graphs[0].name


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
@pytest.mark.parametrize("name", ["sidestream_step", "run_decode"])
def test_diagnosis_tab_timeline_and_graph_in_chromium(tmp_path, name):
    page = tmp_path / "report.html"
    page.write_text(_page(name))
    res, _ = selftest(tmp_path, page)
    data = _payload(page.read_text())
    for got, view in zip(res["views"], views_of(data)):
        graphs = view["diagnosis"]["graphs"]
        assert got["diagnosis"] == len(graphs) and got["whatIf"] == len(graphs)
        assert got["timelineCrit"] > 0  # critical-path boxes outlined
        assert got["timelineGaps"] > 0  # idle time shaded
    if data["graph_svg"].get("clusters"):
        path = views_of(data)[0]["diagnosis"]["graphs"][0]["critical_path"]["nodes"]
        # the path's nodes and the edges between them
        assert res["views"][0]["graphCrit"] == 2 * len(path) - 1


def _ladder_rows(tmp_path, tab):
    """run_ladder's report page as Chromium draws the tab: its 10 buckets' table rows, cells
    joined by '|', and the DOM."""
    page = tmp_path / "report.html"
    page.write_text(_page("run_ladder"))
    dom = _chromium(tmp_path, page.as_uri() + "#tab=" + tab, "--dump-dom").stdout
    rows = [re.sub(r"<[^>]+>", "|", r) for r in re.findall(r"<tr[^>]*>(?:(?!</tr>).)*</tr>", dom)]
    ladder = [r for r in rows if "ladder.py:45 #" in r]
    assert len(ladder) == 10, rows[:3]
    return ladder, dom


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_never_replayed_graphs_read_not_replayed_in_chromium(tmp_path):
    """run_ladder (H200): the Diagnosis tab, as Chromium draws it, says the two buckets the
    program never replayed were not replayed (not that launches were not recorded), and the
    replayed ones show their launch latency."""
    ladder, _ = _ladder_rows(tmp_path, "diagnosis&view=0")
    never = [r for r in ladder if "|not replayed|" in r]
    assert sorted(r.split("ladder.py:45 ")[1][:7] for r in never) == ["#0 [96]", "#1 [64]"]
    assert "not recorded" not in "".join(ladder)
    assert all(re.search(r"\|[\d.]+ µs\|", r) for r in ladder if r not in never)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_measured_what_if_is_a_bar_of_the_figure_in_chromium(tmp_path):
    """branches_try_streams (H200, capture --try-streams 4): the what-if figure draws the
    span measured over more streams beside the bound and the one-stream span."""
    page = tmp_path / "report.html"
    page.write_text(_page("branches_try_streams"))
    res, _ = selftest(tmp_path, page)
    labels = res["views"][0]["whatIfLabels"]
    m = views_of(_payload(page.read_text()))[0]["diagnosis"]["graphs"][0]["what_if_measured"]
    i = labels.index("measured on 2 streams (--try-streams)")
    assert labels[i + 1].replace("\u00b5", "u").startswith(f"{m['span_ns'] / 1000:.1f}"[:3])


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_graphs_never_timed_read_a_dash_in_the_overview_in_chromium(tmp_path):
    """run_ladder (H200): the two buckets never replayed while traced have no time (null in
    the page's data since the JSON stopped calling it 0 ns); Chromium draws "-" for them."""
    ladder, dom = _ladder_rows(tmp_path, "overview")
    cells = {r.split("ladder.py:45 ")[1][:7]: [c for c in r.split("|") if c] for r in ladder}
    assert cells["#0 [96]"][-2] == "-" and cells["#1 [64]"][-2] == "-", cells["#0 [96]"]
    assert all(c[-2].endswith("µs") for k, c in cells.items() if k not in ("#0 [96]", "#1 [64]"))
    assert "NaN" not in dom and "null" not in "".join(ladder)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_diagnosis_tab_leads_with_the_findings_worded_as_the_terminal_does(tmp_path):
    # GIVEN the branches sample's page, drawn by Chromium on its Diagnosis tab
    from click.testing import CliRunner

    from graphscope.cli.main import cli
    from tests.unit.test_html import DATA

    page = tmp_path / "report.html"
    page.write_text(_page("branches_forward"))
    dom = _chromium(tmp_path, page.as_uri() + "#tab=diagnosis", "--dump-dom").stdout
    dom = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", dom, flags=re.S)
    tab = dom[dom.index('id="diag"'):]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", tab))
    # THEN the findings come first, with the command that tries each
    assert text.index("What to do next") < text.index("critical path")
    assert "--try-streams 4" in text
    # AND each with its predicted saving and interval, as the terminal's table has them
    from graphscope.analysis.diagnosis import diagnose
    from graphscope.model.bundle_io import read_bundle
    from graphscope.render.diagnosis import saving_text

    f = diagnose(read_bundle(f"{DATA}/branches_forward")).findings.findings[0]
    assert saving_text(f) in text and re.search(r"\d% \[", saving_text(f))
    # AND the what-if cell and the verdicts read as the terminal's (one wording, in Python)
    out = CliRunner().invoke(cli, ["report", f"{DATA}/branches_forward"], terminal_width=200)
    cell = re.search(r"│ (\S+ \S+ -\d+%) │\n", out.output).group(1)
    assert cell in text
    assert "serialized on one stream" in out.output and "serialized on one stream" in text
    assert "[object Object]" not in text
