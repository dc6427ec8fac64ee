"""The HTML report: payload on the CPU; every view of every fixture in a real headless Chromium
(where installed: CI installs it), driven by real DOM events through the page's self-check."""

import json
import os
import re
import shutil
import subprocess

import pytest

from graphscope.analysis.page import build_page
from graphscope.analysis.ranks import ranks_report
from graphscope.analysis.report import ReportOptions, build_report
from graphscope.cli.main import main
from graphscope.model.bundle_files import (
    BundleExtras,
    read_diagnosis,
    read_extras,
    read_manifest_mode,
)
from graphscope.model.bundle_io import read_bundle
from graphscope.model.ranks import read_ranks
from graphscope.render import html
from graphscope.render.dot import graph_svgs
from tests.conftest import DATA

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FIXTURES = sorted(n for n in os.listdir(DATA)
                  if os.path.isdir(os.path.join(DATA, n))
                  and n not in ("golden", "gates", "demo"))  # not bundles (sets of them)


def _bundle(name="gpt_step"):
    return read_bundle(os.path.join(DATA, name))


def built(b, extras=None, ranks=None):
    """The report and the page of bundle ``b`` (its optional files ``extras``), built as the
    command builds them; of ``ranks`` (then ``b`` is rank 0's): no report, the page from their
    ranks section and each rank's kept diagnosis."""
    if ranks:
        return None, build_page(None, b, ranks=ranks, section=ranks_report(ranks),
                                kept=[read_diagnosis(r.path) for _, r in ranks])
    rep = build_report(b, extras or BundleExtras(), ReportOptions())
    return rep, build_page(rep, b)


def payload(b, extras=None, ranks=None):
    """The page's data of bundle ``b`` as :func:`built` builds it."""
    return html.payload(*built(b, extras, ranks))


def render(b, extras=None, ranks=None, graph_svg=None):
    """The page of bundle ``b`` as :func:`built` builds it."""
    return html.render(*built(b, extras, ranks), graph_svg=graph_svg or {})


def views_of(data):
    """The page's views as its script reads them: the whole bundle's numbers, and each graph's
    part of its diagnosis, from the report the page embeds."""
    rep = data.get("report") or {}
    out = []
    for v in data["views"]:
        if v.get("from_report"):
            v = {**v, "total_ns": rep.get("replay_kernel_median_ns") or 0,
                 "coverage": rep["coverage"], "modules": rep["modules"],
                 "top_kernels": rep["top_kernels"],
                 "diagnosis": {**rep["diagnosis"], "words": v["words"]}
                 if rep.get("diagnosis") else None}
        elif v.get("diagnosis") and "report_graph" in v["diagnosis"]:
            d, g = rep["diagnosis"], v["diagnosis"]["report_graph"]
            v = {**v, "diagnosis": {
                **d, "graphs": [o for o in d["graphs"] if o["graph"] == g],
                "between_replays": None, "verdicts": [], "words": v["diagnosis"]["words"],
                "findings": {**d["findings"], "findings": [
                    f for f in d["findings"]["findings"] if f["graph"] == g]}}}
        out.append(v)
    return out


def _page(name):
    """The page `report --html` writes of tests/data/NAME (the bundle's optional files too)."""
    path = os.path.join(DATA, name)
    if os.path.exists(os.path.join(path, "manifest.json")):
        b = read_bundle(path)
        extras = read_extras(path, read_manifest_mode(path))
        return render(b, graph_svg=graph_svgs(b), extras=extras)
    ranks = read_ranks(path)
    return render(ranks[0][1], ranks=ranks, graph_svg=graph_svgs(ranks[0][1], ranks))


def test_payload_is_columnar_with_interned_strings():
    b = _bundle()
    p = payload(b)
    (v,) = views_of(p)
    assert p["report"]["modules"][0]["module"] == "L"
    ev = v["events"]
    replay0 = [e for e in b.events if e["replay"] == 0]
    assert len(ev["t"]) == len(replay0) > 0 and ev["t"][0] == 0
    assert ev["t"] == sorted(ev["t"]) and all(d >= 0 for d in ev["d"])
    mods = {p["strings"][i] for i in ev["module"]}
    assert "L.blocks.0.attn.qkv" in mods
    assert {ev["phase"][i] for i in range(len(ev["t"]))} == {0, 1}  # forward, backward
    assert sum(ev["acc"]) == sum(1 for e in replay0 if b.graphs[0].nodes and any(
        n.exec_node_id == e["exec_node_id"] and n.annotation.get("grad_accumulation")
        for n in b.graphs[0].nodes))
    top = v["module_kernels"]["L.blocks.0.attn"]
    assert 1 <= len(top) <= 3 and top[0][1] >= top[-1][1]


def test_several_graphs_get_a_view_each_and_an_overview():
    p = payload(_bundle("run_decode"))
    assert [v["label"] for v in views_of(p)][0] == "all graphs"
    assert len(views_of(p)) == 1 + len(p["overview"]) and len(p["overview"]) >= 2
    assert all(o["pool_bytes"] for o in p["overview"])


def test_ranks_get_a_view_each():
    ranks = read_ranks(os.path.join(DATA, "ddp_mlp_step"))
    p = payload(ranks[0][1], ranks=ranks)
    assert [v["label"] for v in views_of(p)] == ["rank 0", "rank 1"]
    assert [o["rank"] for o in p["overview"]] == [0, 1]
    assert p["title"] == "ddp_mlp_step"


def test_page_is_self_contained_and_deterministic():
    html = render(_bundle())
    assert render(_bundle()) == html
    assert not re.search(r"(src|href)=[\"']https?://", html)  # no CDN, no network
    blob = re.search(r'<script id="payload" type="application/json">(.*?)</script>', html, re.S)
    data = json.loads(blob.group(1))
    assert data["title"] == "gpt_step" and views_of(data)[0]["events"]["t"]


def test_page_size_is_proportional_to_the_bundle():
    for name in ("mlp_step", "gpt_step", "train_step_bf16"):
        page = _page(name)
        n = sum(len(g.nodes) for g in _bundle(name).graphs)
        data = json.loads(re.search(r'<script id="payload" type="application/json">(.*?)'
                                    r"</script>", page, re.S).group(1))
        svg = sum(len(v or "") for v in data.pop("graph_svg").values())
        # the report document as `report --json` prints it rides along (test_report_model.py
        # checks it is that document); the page's own data stays columnar
        data.pop("report")
        assert len(json.dumps(data)) < 8_000 + 400 * n, name  # columns, interned strings
        assert svg < 20_000 + 4_000 * n, name  # Graphviz's drawings (clusters up to 1,500)


def test_cli_writes_html_for_one_and_for_many_ranks(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", os.path.join(DATA, "mlp_step"), "--html", str(out)]) == 0
    assert out.read_text().startswith("<!doctype html>")
    assert f"Wrote {out}" in capsys.readouterr().out
    out2 = tmp_path / "ranks.html"
    assert main(["report", os.path.join(DATA, "ddp_mlp_step"), "--html", str(out2)]) == 0
    assert '"rank 1"' in out2.read_text()


def _chromium(tmp_path, url, *extra):
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--window-size=1280,900", *extra, url]
    return subprocess.run(flags, capture_output=True, text=True, timeout=180)


def selftest(tmp_path, page):
    """Chromium opens ``page`` (a file) with ``#selftest``: the page's own self-test result
    (it must have run with no uncaught error) and the DOM it left."""
    dom = _chromium(tmp_path, page.as_uri() + "#selftest", "--dump-dom")
    m = re.search(r'<div id="status"[^>]*>', dom.stdout)
    assert m, dom.stderr[-2000:]
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(0)))
    assert attrs.get("state") == "ok", m.group(0)  # no uncaught error on the page
    return json.loads(attrs["selftest"].replace("&quot;", '"')), dom.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
@pytest.mark.parametrize("name", FIXTURES)
def test_every_view_works_in_headless_chromium(tmp_path, name):
    page = tmp_path / "report.html"
    page.write_text(_page(name))
    res, dom = selftest(tmp_path, page)
    data = json.loads(re.search(r'<script id="payload" type="application/json">(.*?)</script>',
                                page.read_text(), re.S).group(1))
    assert len(res["views"]) == len(views_of(data))
    # the header's graph work is one replay of each graph, summed, where there are several;
    # over every rank, and each rank's, where there are ranks (never rank 0's alone)
    meta = re.search(r'id="meta"[^>]*>([^<]*)<', dom).group(1)
    several, untraced = len(data["overview"]) > 1, data["untraced_graphs"]
    if data["ranks"]:
        totals = data["ranks"]["section"]["totals"]
        assert "per replay over all ranks" in meta, meta
        assert all(f"rank {t['rank']} " in meta for t in totals), meta
    else:
        # several graphs: one replay of each, or (traced unevenly) the replays' totals
        assert ("for one replay of each" in meta) == (several and not data["uneven_words"]), meta
        assert ("per replay" in meta) != several, meta
    if several and not data["ranks"]:  # a ladder's buckets never traced: not in the sum, said
        # the untraced graphs worded as the terminal's header words them
        want = (f"per traced replay (the median of the replays' totals; "
                f"{data['uneven_words']})" if data["uneven_words"] else
                f"of each of the {len(data['overview']) - untraced} traced graphs "
                f"({data['untraced_words']})" if untraced else "of each graph")
        assert want in meta, meta
        assert not untraced or "never replayed" in data["untraced_words"] or (
            "never traced" in data["untraced_words"])
    for got, view in zip(res["views"], views_of(data)):
        n_events = len(view["events"]["t"])
        timed = view["total_ns"] > 0
        assert got["rows"] == len(view["modules"]) > 0  # the table shows every module
        assert got["filtered"] is True  # a filter that matches nothing hides every row
        assert got["sorted"] is True  # sorting by time puts the slowest, then the fastest, first
        if any("." in r["module"] for r in view["modules"]):
            assert got["collapsed"] is True  # folding a row hides its descendants
        assert got["graph"] in ("svg", "note")
        if timed:
            assert got["icicle"] > 1 and got["icicleHover"] and got["icicleZoom"]
        if n_events:
            assert got["timeline"] > 0 and got["zoomed"] and got["panned"] and got["reset"]
            assert got["timelineHover"], (name, view["label"])
        if len(data["overview"]) > 1:
            assert got["overview"] == len(data["overview"])
        # the Graph tab draws the selected view's graph and names it
        assert got["graphName"] == view["graph"], (name, view["label"])
        if view["graph"] is None:
            assert got["graph"] == "note"
        elif got["graph"] == "svg":
            assert got["graphTitle"] == "graphscope_" + view["graph"], (name, view["label"])
        if n_events:  # a time axis; a band per graph where the view has several
            assert got["ticks"] >= 2
            graphs = {data["strings"][i] for i in view["events"]["g"]}
            assert got["graphBands"] == (len(graphs) if len(graphs) > 1 else 0)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_screenshots_of_each_view(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(_page("gpt_step"))
    keep = os.environ.get("GRAPHSCOPE_SCREENSHOT_DIR")
    for tab in ("icicle", "timeline", "graph", "table"):
        shot = tmp_path / f"report_{tab}.png"
        _chromium(tmp_path, page.as_uri() + f"#tab={tab}", f"--screenshot={shot}",
                  "--hide-scrollbars")
        assert shot.exists() and shot.stat().st_size > 10_000
        if keep:
            shutil.copy(shot, os.path.join(keep, shot.name))


# ------------------------------------------------------------------ graph views and scale
def test_each_graph_view_names_its_graph_and_its_drawing():
    p = payload(_bundle("mlp_callables"))
    assert [(v["label"], v["graph"]) for v in views_of(p)] == [
        ("all graphs", None), ("forward", "forward"), ("backward", "backward")]
    assert [o["view"] for o in p["overview"]] == [1, 2]
    if shutil.which("dot"):
        b = _bundle("mlp_callables")
        html = render(b, graph_svg=graph_svgs(b))
        data = json.loads(re.search(r'<script id="payload" type="application/json">(.*?)'
                                    r"</script>", html, re.S).group(1))
        for v in views_of(data)[1:]:
            svg = data["graph_svg"][v["svg"]]["collapsed"]
            assert f"<title>graphscope_{v['graph']}</title>" in svg
            assert ("1 nodes" not in svg) and ("nodes" in svg or "node" in svg)


def test_a_tall_graph_is_drawn_left_to_right():
    if not shutil.which("dot"):
        pytest.skip("Graphviz is not installed")
    from graphscope.render.dot import TALL, _aspect, _svgs

    svg = _svgs(_bundle("gpt_step"), "step")["collapsed"]
    assert 0 < _aspect(svg) <= TALL


def test_timeline_events_carry_their_graph_and_relative_sources():
    p = payload(_bundle("run_decode"))
    all_view = views_of(p)[0]
    graphs = [p["strings"][i] for i in all_view["events"]["g"]]
    assert set(graphs) == {"decode.py:71 #0 [1,1] [1]", "decode.py:71 #1 [8,1] [1]"}
    sources = {p["strings"][i] for i in all_view["events"]["source"] if i >= 0}
    assert "decode.py:48 (forward)" in sources  # the program's directory is left out
    assert not any(s.startswith("/work/") for s in sources)
    b = _bundle("run_decode")  # the bundle keeps the absolute path
    assert any(n.source and n.source.startswith("/") for n in b.nodes())


def test_a_shared_pool_is_shown_once_in_the_overview(tmp_path):
    src = os.path.join(DATA, "run_partial_network")
    dst = tmp_path / "b"
    shutil.copytree(src, dst)
    g = json.loads((dst / "graph.json").read_text())
    for gr in g["graphs"]:
        gr["info"]["pool_id"] = [0, 1]
    (dst / "graph.json").write_text(json.dumps(g))
    ov = payload(read_bundle(str(dst)))["overview"]
    shared = [o["pool_shared"] for o in ov]
    assert [s["first"] for s in shared] == [True] + [False] * 5
    assert shared[0]["bytes"] == max(o["pool_bytes"] for o in ov) and shared[0]["graphs"] == 6


def _many_graphs(path, n):
    from graphscope.model.bundle_io import write_bundle
    from graphscope.model.graph import CapturedGraph, Node

    graphs, dur, events = [], {}, []
    for i in range(n):
        name = f"g.py:1 #{i}"
        node = Node(graph=name, local_id=0, exec_node_id=i, type="kernel", kernel="k",
                    demangled="void k<1>(int)", annotation={"module_name": "L.a"})
        graphs.append(CapturedGraph(name, 0, i, (node,), (), {"site": "g.py:1", "ordinal": i,
                                                              "replays": 3, "pool_bytes": 1024}))
        dur[i] = [100 + i % 7, 200]
        events.append({"replay": 0, "exec_node_id": i, "start_ns": i * 1000, "dur_ns": 100,
                       "graph": name, "stream": 7})
    write_bundle(str(path), manifest={"mode": "run", "tool": "graphscope"}, graphs=graphs,
                 timeline={"replays": 2, "durations_ns": dur, "events": events,
                           "replay_kernel_ns": [100 * n, 200 * n]})


def test_a_bundle_of_100000_graphs_reports_in_seconds(tmp_path, capsys):
    import time

    from graphscope.analysis.page import MAX_GRAPH_VIEWS

    path = tmp_path / "many"
    _many_graphs(path, 100_000)
    t = time.monotonic()
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    # one capture site's graphs are one row of the Graphs table (--full: the first 50)
    table = out[out.index("Graphs (a capture site's buckets as one row"):]
    assert out.count("│ g.py:1 #") == 0 and "│ g.py:1:" in table.splitlines()[4]
    assert "Diagnosis left out: 100000 graphs" in out  # --diagnosis asks for it
    t_report = time.monotonic() - t
    t = time.monotonic()
    p = payload(read_bundle(str(path)))
    t_html = time.monotonic() - t
    assert len(p["overview"]) == 100_000 and len(views_of(p)) == 1 + MAX_GRAPH_VIEWS
    assert sum(o["view"] is not None for o in p["overview"]) == MAX_GRAPH_VIEWS
    assert t_report < 20 and t_html < 20, (t_report, t_html)


def test_payload_counts_the_graphs_never_traced():
    # GIVEN a recorded ladder whose program never replayed its two largest buckets
    b = _bundle("run_ladder")
    # THEN the page's header is told how many graphs its one-replay-of-each sum leaves out
    never = [g.name for g in b.graphs if g.info.get("traced_replays") == 0]
    assert len(never) == 2 and payload(b)["untraced_graphs"] == 2
    assert payload(_bundle("mlp_step"))["untraced_graphs"] == 0
