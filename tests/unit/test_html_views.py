"""The HTML report's tabs, legends and columns fit the bundle they show: tabs only for the
sections the report has, a timeline whose critical-path marking keeps the module colours, a
colour legend, whole graph names, the bands of a ``--try-streams`` measurement, phase and rank
columns only where they have data. On recorded bundles, in a real headless Chromium."""

from __future__ import annotations

import json
import re

import pytest

from graphscope.model.bundle_files import read_extras, read_manifest_mode
from tests.unit.test_html import (
    CHROMIUM,
    DATA,
    _bundle,
    _chromium,
    _page,
    payload,
    selftest,
    views_of,
)

chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


def _data(page_text):
    return json.loads(re.search(r'<script id="payload" type="application/json">(.*?)</script>',
                                page_text, re.S).group(1))


def _open(tmp_path, name):
    """tests/data/NAME's page as `report --html` writes it, after its self-test in Chromium:
    (self-test results, the page's data, the DOM)."""
    page = tmp_path / "report.html"
    page.write_text(_page(name))
    res, dom = selftest(tmp_path, page)
    return res, _data(page.read_text()), dom


def _extras(name):
    path = f"{DATA}/{name}"
    return read_extras(path, read_manifest_mode(path))


# ---------------------------------------------------------------- tabs
@chromium
def test_eager_tab_only_where_the_report_has_an_eager_baseline(tmp_path):
    # GIVEN a `graphscope run` bundle: graph coverage recorded, no eager baseline
    res, data, dom = _open(tmp_path, "run_ladder")
    assert data["report"]["absent"]["eager"]["reason"] == "no_eager_baseline"
    assert "graph_coverage" in data["report"]
    # THEN no "Eager vs graph" tab; the program's coverage has a tab of its own, worded as the
    # terminal words it
    assert "Eager vs graph" not in res["tabs"] and "Program" in res["tabs"]
    assert res["views"][0]["program"] == len(data["program_words"]) >= 1
    assert "of their GPU time in graphs" in data["program_words"][0]
    assert data["program_words"][0] in dom
    # AND a bundle captured with an eager baseline has the tab, its verdict as the terminal's
    res, data, dom = _open(tmp_path, "gpt_step_eager")
    assert "Eager vs graph" in res["tabs"] and "Program" not in res["tabs"]
    assert res["views"][0]["eager"] == len(data["report"]["eager"]["modules"]) > 0
    from graphscope.render.eager import step_lines

    assert step_lines(data["report"]["eager"])[0].replace("×", "&times;") in dom.replace(
        "×", "&times;")


def test_page_words_of_the_eager_and_program_tabs_are_the_terminals():
    from graphscope.render.eager import coverage_line, step_lines, tree_lines

    p = payload(_bundle("gpt_step_eager"), extras=_extras("gpt_step_eager"))
    assert p["eager_words"] == step_lines(p["report"]["eager"]) and "program_words" not in p
    p = payload(_bundle("run_ladder"), extras=_extras("run_ladder"))
    assert p["program_words"] == [coverage_line(p["report"]["graph_coverage"])]
    assert "eager_words" not in p
    p = payload(_bundle("run_compiled_trees"), extras=_extras("run_compiled_trees"))
    assert p["program_words"] == [coverage_line(p["report"]["graph_coverage"]),
                                  *tree_lines(p["report"]["cudagraph_trees"])]
    assert any(line.startswith("  skipped: ") for line in p["program_words"])


# ---------------------------------------------------------------- timeline
@chromium
@pytest.mark.parametrize("name", ["branches_try_streams", "gpt_step"])
def test_critical_path_marking_keeps_the_module_colours(tmp_path, name):
    # GIVEN a one-stream graph, every kernel on its critical path
    res, data, dom = _open(tmp_path, name)
    ev = views_of(data)[0]["events"]
    assert sum(ev["cp"]) == len(ev["t"]) > 0
    # THEN no critical box shows the marking's red at its centre; each is marked under it
    px = res["views"][0]["critPixels"]
    assert px["boxes"] == len(ev["t"]) and px["hidden"] == 0
    assert px["marked"] == px["wide"] > 0
    # AND the legend says what the marking means and which colour is which module
    assert "crit" in res["views"][0]["legendShown"]
    assert "on the critical path" in dom
    shown = res["views"][0]["legend"]
    assert shown and set(shown) <= {r["module"] for r in views_of(data)[0]["modules"]}


@chromium
def test_module_colours_are_distinct_at_the_chosen_depth(tmp_path):
    # GIVEN a page whose timeline colours 13 modules at depth 3 (16 colours in the palette)
    page = tmp_path / "report.html"
    page.write_text(_page("run_decode"))
    dom = _chromium(tmp_path, page.as_uri() + "#tab=timeline&view=0", "--dump-dom").stdout
    legend = re.search(r'<span id="tlmodules">(.*?)</span></div>', dom, re.S).group(1)
    colours = re.findall(r'<i class="sw" style="background: ([^"]+);"></i>([^<]+)</span>', legend)
    # THEN the legend names each module once, and no two share a colour
    assert len({m for _, m in colours}) == len(colours) == 13
    assert len({c for c, _ in colours}) == len(colours)


@chromium
@pytest.mark.parametrize("name", ["run_decode", "run_ladder"])
def test_graph_band_names_are_shown_whole(tmp_path, name):
    # GIVEN a view of several graphs (run_ladder: 8 traced buckets side by side)
    res, data, _ = _open(tmp_path, name)
    view, got = views_of(data)[0], res["views"][0]
    names = list(dict.fromkeys(data["strings"][g] for g in view["events"]["g"]))
    assert len(names) > 1
    # THEN the legend lists every graph's whole name, numbered in order of its band
    assert got["legendGraphs"] == names
    # AND each band is labelled with its whole name where there is room, else its number
    assert len(got["graphLabels"]) == got["graphBands"]
    for label in got["graphLabels"]:
        assert "…" not in label
        assert label in names or names[int(label) - 1]
    assert any(label in names for label in got["graphLabels"])


def test_try_streams_bands_hold_the_measured_spans():
    for name in ("branches_try_streams", "try_streams_step"):
        (view,) = views_of(payload(_bundle(name)))
        d = view["diagnosis"]
        (o,) = d["graphs"]
        m = o["what_if_measured"]
        bands = d["words"]["graphs"][o["graph"]]["tried_bands"]
        assert [b["ns"] for b in bands] == [m["span_ns"], m["one_stream_ns"]], name
        assert [b["iqr"] for b in bands] == [m["span_iqr_ns"], m["one_stream_iqr_ns"]]
        assert bands[0]["label"].startswith(f"{m['streams']} streams")
    (view,) = views_of(payload(_bundle("branches_forward")))
    assert "tried_bands" not in view["diagnosis"]["words"]["graphs"]["forward"]


@chromium
@pytest.mark.parametrize("name", ["branches_try_streams", "try_streams_step"])
def test_timeline_draws_the_graph_measured_on_more_streams(tmp_path, name):
    res, data, _ = _open(tmp_path, name)
    (view,) = views_of(data)
    bands = view["diagnosis"]["words"]["graphs"][view["graph"]]["tried_bands"]
    # THEN the timeline has a band for the re-captured graph and one for the graph as captured
    assert res["views"][0]["tried"] == [[b["label"], b["ns"]] for b in bands]
    assert "tried" in res["views"][0]["legendShown"]


# ---------------------------------------------------------------- columns
@chromium
@pytest.mark.parametrize("name, head", [
    ("tiny_forward", ["module", "time", "%", "fwd", "kernels"]),
    ("mlp_step", ["module", "time", "%", "fwd", "bwd", "kernels", "fwd/bwd"]),
    ("train_step_bf16", ["module", "time", "%", "fwd", "bwd", "opt", "acc", "kernels",
                         "fwd/bwd/opt"]),
])
def test_module_table_has_the_phase_columns_of_the_bundle(tmp_path, name, head):
    res, _, _ = _open(tmp_path, name)
    assert res["views"][0]["tableHead"] == head


@chromium
def test_rank_column_only_on_a_multi_rank_bundle(tmp_path):
    res, _, _ = _open(tmp_path, "run_decode")
    assert res["views"][0]["overviewHead"][:2] == ["graph", "nodes"]
    res, _, _ = _open(tmp_path, "ddp_mlp_step")
    assert res["views"][0]["overviewHead"][:2] == ["rank", "graph"]
