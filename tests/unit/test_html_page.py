"""The report page as the command writes it: built from the one report the command builds,
"Wrote PATH" its only output, opening on the answer, each finding's command labelled on its own
line, a graph view that shows the model's structure, and nothing embedded twice."""

from __future__ import annotations

import json
import os
import re

import pytest

import graphscope.analysis.diagnosis as diagnosis_pkg
import graphscope.analysis.ranks as ranks_mod
import graphscope.analysis.report as report_mod
from graphscope.cli.main import main
from graphscope.model.bundle_io import read_bundle
from graphscope.render.dot import MAX_COLLAPSED_BOXES, graph_svgs
from tests.unit.test_html import CHROMIUM, DATA, _chromium, _page, selftest

chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


def _counting(monkeypatch):
    """build_report and diagnose wrapped to count their calls ({name: calls})."""
    calls = {"build_report": 0, "diagnose": 0}

    def wrap(name, fn):
        def counted(*a, **k):
            calls[name] += 1
            return fn(*a, **k)
        return counted

    from graphscope.analysis.diagnosis import diagnose

    monkeypatch.setattr(report_mod, "build_report", wrap("build_report", report_mod.build_report))
    counted = wrap("diagnose", diagnose)
    monkeypatch.setattr(diagnosis_pkg, "diagnose", counted, raising=False)
    monkeypatch.setattr(ranks_mod, "diagnose", counted)
    return calls


@pytest.mark.parametrize("name,diagnoses", [
    ("mlp_step", 0),  # its diagnosis.json is kept and current
    ("run_decode", 0),  # two graphs: each graph's view is its part of the bundle's diagnosis
    ("ddp_mlp_step", 2),  # two ranks: each rank's bundle once (the ranks section's)
])
def test_report_html_builds_the_report_once(tmp_path, capsys, monkeypatch, name, diagnoses):
    # GIVEN build_report and diagnose counted
    calls = _counting(monkeypatch)
    # WHEN the command writes the page of a recorded bundle
    assert main(["report", os.path.join(DATA, name), "--html", str(tmp_path / "r.html")]) == 0
    # THEN the report was built at most once and no set of graphs diagnosed twice
    assert calls["build_report"] <= 1 and calls["diagnose"] <= diagnoses, calls


def test_report_html_diagnoses_a_bundle_without_diagnosis_json_once(tmp_path, capsys,
                                                                     monkeypatch):
    # GIVEN a two-graph bundle whose diagnosis.json is gone
    import shutil

    b = tmp_path / "b"
    shutil.copytree(os.path.join(DATA, "run_decode"), b)
    os.remove(b / "diagnosis.json")
    calls = _counting(monkeypatch)
    # WHEN the command writes its page THEN the bundle is diagnosed once, for every view
    assert main(["report", str(b), "--html", str(tmp_path / "r.html")]) == 0
    assert calls == {"build_report": 1, "diagnose": 1}


@pytest.mark.parametrize("name", ["mlp_step", "ddp_mlp_step"])
def test_report_html_prints_only_the_path_it_wrote(tmp_path, capsys, name):
    # GIVEN a bundle WHEN `report --html F` writes its page
    out = tmp_path / "r.html"
    assert main(["report", os.path.join(DATA, name), "--html", str(out)]) == 0
    # THEN the terminal says where, and nothing else
    printed = capsys.readouterr()
    assert printed.out == f"Wrote {out}\n" and printed.err == ""
    assert out.read_text().startswith("<!doctype html>")


def test_report_html_with_json_still_prints_the_json(tmp_path, capsys):
    # GIVEN --html F and --json WHEN the command runs THEN stdout is the JSON document
    out = tmp_path / "r.html"
    assert main(["report", os.path.join(DATA, "mlp_step"), "--html", str(out), "--json"]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["report_version"] and printed.err == f"Wrote {out}\n"


def _text(dom, start):
    dom = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", dom, flags=re.S)
    part = dom[dom.index(start):]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part))


@chromium
def test_page_opens_on_the_summary(tmp_path):
    # GIVEN the branches sample's page, opened in Chromium with no tab asked for
    page = tmp_path / "report.html"
    page.write_text(_page("branches_forward"))
    dom = _chromium(tmp_path, page.as_uri(), "--dump-dom").stdout
    # THEN the Summary tab is the one shown, first of the tabs
    assert re.search(r'<section id="tab-summary" class="on">', dom), dom[:3000]
    tabs = re.findall(r'<button data-tab="(\w+)"', dom)
    assert tabs[0] == "summary"
    # AND it holds the report's answer: the bundle, where the time goes, what bounds the
    # graph and what to try first, with the command that tries it
    data = json.loads(re.search(r'<script id="payload" type="application/json">(.*?)</script>',
                                page.read_text(), re.S).group(1))
    text = _text(dom, 'id="summary"').split('id="tab-overview"')[0]
    said = [t for _, t in data["summary"] if not t.startswith("try: ")]
    assert said and all(re.sub(r"\s+", " ", t.replace("&", "&amp;")) in text for t in said)
    assert "What bounds" in text and "What to try first" in text
    assert re.search(r'<div class="try">try: <code>graphscope capture [^<]*--try-streams 4', dom)


@chromium
def test_each_findings_command_is_labelled_on_its_own_line(tmp_path):
    # GIVEN the branches sample's page on its Diagnosis tab
    page = tmp_path / "report.html"
    page.write_text(_page("branches_forward"))
    dom = _chromium(tmp_path, page.as_uri() + "#tab=diagnosis", "--dump-dom").stdout
    # THEN each finding's command is its own block, labelled "try:", in a code element
    findings = re.findall(r'<li class="finding">(.*?)</li>', dom, re.S)
    assert findings
    for f in findings:
        m = re.search(r'<div class="try">try: <code>([^<]+)</code></div>$', f)
        assert m, f
        assert m.group(1) not in f[:m.start()]  # not glued to the sentence as well


def _mlp_forward(path, blocks=8):
    """A forward capture of an MLP of ``blocks`` blocks (fc1, act, fc2 and a norm each)."""
    from graphscope.model.bundle_io import write_bundle
    from graphscope.model.graph import CapturedGraph, Node

    nodes, edges, dur = [], [], {}
    for b in range(blocks):
        for part in ("ln", "fc1", "act", "fc2", "fc2", "drop", "add"):
            i = len(nodes)
            nodes.append(Node(graph="forward", local_id=i, exec_node_id=i, type="kernel",
                              kernel="k", demangled="void k<1>(int)",
                              annotation={"module_name": f"L.blocks.{b}.{part}",
                                          "phase": "forward"}))
            dur[i] = [100, 110]
            if i:
                edges.append((i - 1, i))
    write_bundle(str(path), manifest={"mode": "forward", "tool": "graphscope"},
                 graphs=[CapturedGraph("forward", 0, 0, tuple(nodes), tuple(edges), {})],
                 timeline={"replays": 2, "durations_ns": dur, "events": [],
                           "replay_kernel_ns": [100 * len(nodes), 110 * len(nodes)]})


def _boxes(svg):
    """The collapsed view's boxes, by their first label line (module, " (bwd)" backward)."""
    return [re.findall(r"<text[^>]*>([^<]*)</text>", g)[0]
            for g in re.findall(r'<g id="node\d+" class="node">(.*?)</g>', svg, re.S)]


def _boxes_at(nodes, depth):
    """The boxes a collapsed view at ``depth`` draws: a module cut to depth + 1 names, and
    whether backward."""
    return {(".".join(n.module.split(".")[:depth + 1]), n.phase == "backward") for n in nodes}


def test_default_graph_view_of_a_block_model_shows_its_blocks(tmp_path):
    if not graph_svgs(read_bundle(os.path.join(DATA, "mlp_step"))):
        pytest.skip("Graphviz is not installed")
    # GIVEN a forward capture of an 8-block MLP (56 nodes under L.blocks)
    _mlp_forward(tmp_path / "b")
    b = read_bundle(str(tmp_path / "b"))
    # WHEN the page's graph drawings are made
    (svg,) = graph_svgs(b).values()
    # THEN the default view shows more than one box: each block's parts
    boxes = _boxes(svg["collapsed"])
    assert len(boxes) > 1 and "L.blocks" not in boxes, boxes
    assert len(boxes) <= MAX_COLLAPSED_BOXES


@pytest.mark.parametrize("name", ["branches_forward", "mlp_step", "gpt_step"])
def test_default_graph_view_is_the_deepest_level_that_fits(name):
    b = read_bundle(os.path.join(DATA, name))
    svgs = graph_svgs(b)
    if not svgs:
        pytest.skip("Graphviz is not installed")
    for g in b.graphs:
        (svg,) = [v for k, v in svgs.items() if json.loads(k)[1] == g.name]
        boxes = _boxes(svg["collapsed"])
        # THEN more than one box, the boxes of one module depth, and one level deeper would
        # draw more than fit (or nothing more)
        assert len(boxes) > 1, boxes
        nodes = list(g.nodes)
        depth = next(d for d in range(1, 12) if len(_boxes_at(nodes, d)) == len(boxes))
        deeper = len(_boxes_at(nodes, depth + 1))
        assert deeper > MAX_COLLAPSED_BOXES or deeper == len(boxes), (name, depth, deeper)


@chromium
def test_icicle_names_each_thing_once(tmp_path):
    # GIVEN a step's page (forward and backward) after its self-test in Chromium
    page = tmp_path / "report.html"
    page.write_text(_page("gpt_step"))
    res, _ = selftest(tmp_path, page)
    labels = res["views"][0]["icicleLabels"]
    # THEN the phase buttons and the breadcrumb never say the same word
    assert len(labels) == len(set(labels)) == 4, labels
    assert res["summary"] > 0 and res["summaryTries"] > 0


def _values(x, path="$"):
    """Every list and object inside ``x`` with its path."""
    if isinstance(x, dict):
        yield path, x
        for k, v in x.items():
            yield from _values(v, f"{path}.{k}")
    elif isinstance(x, list):
        yield path, x
        for i, v in enumerate(x):
            yield from _values(v, f"{path}[{i}]")


@pytest.mark.parametrize("name", ["gpt_step_eager", "run_compiled_trees", "run_decode"])
def test_page_embeds_the_report_once(name):
    # GIVEN the page of a bundle with an eager baseline, a program's trees, several graphs
    page = _page(name)
    data = json.loads(re.search(r'<script id="payload" type="application/json">(.*?)</script>',
                                page, re.S).group(1))
    data.pop("graph_svg")
    # THEN no sizeable part of the page's own data repeats the report it embeds (the
    # document `report --json` prints, whole): its tabs and the whole bundle's view read it
    seen = {json.dumps(v, sort_keys=True): path for path, v in _values(data.pop("report"))}
    for path, v in _values(data):
        text = json.dumps(v, sort_keys=True)
        assert len(text) < 400 or text not in seen, f"{path} repeats {seen.get(text)}"
