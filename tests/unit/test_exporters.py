"""DOT and Chrome/Perfetto trace exports from recorded bundles."""

import json
import os
import re

import pytest

from graphscope._errors import GraphscopeError
from graphscope.model.bundle_io import read_bundle
from graphscope.render.dot import DotOptions, build_dot, render
from graphscope.render.perfetto import build_trace
from tests.conftest import DATA, fixture_bundles


def _b(name):
    p = os.path.join(DATA, name)
    if not os.path.isdir(p):
        pytest.skip(f"fixture {name} not recorded")
    return read_bundle(p)


def test_dot_clusters_follow_module_tree_and_keep_edges():
    pydot = pytest.importorskip("pydot")
    b = _b("mlp_step")
    text, notes = build_dot(b)
    assert not notes
    g = pydot.graph_from_dot_data(text)[0]
    labels = {sg.get_label().strip('"') for sg in _all_subgraphs(g)}
    assert {"L", "fc1", "fc2", "head", "act"} <= labels
    n_edges = len(re.findall(r" -> ", text))
    assert n_edges == len(b.graphs[0].edges)
    assert "dashed" in text  # backward nodes are styled
    assert build_dot(b)[0] == text  # deterministic


def _all_subgraphs(g):
    for sg in g.get_subgraphs():
        yield sg
        yield from _all_subgraphs(sg)


def test_dot_collapse_filter_and_group():
    pytest.importorskip("pydot")
    b = _b("cnn_step")
    text, _ = build_dot(b, DotOptions(collapse=True, depth=1))
    assert "nodes" in text and text.count("->") >= 1
    text, _ = build_dot(b, DotOptions(filter=r"layer1\.0"))
    assert "conv" in text or "bn" in text
    assert "stem" not in text.replace("L.stem", "")
    text, _ = build_dot(b, DotOptions(group="phase"))
    assert '"backward"' in text and '"forward"' in text


def test_dot_auto_collapse_above_threshold(monkeypatch):
    pytest.importorskip("pydot")
    from graphscope.render import dot

    monkeypatch.setattr(dot, "AUTO_COLLAPSE_NODES", 10)
    text, notes = build_dot(_b("mlp_step"))
    assert notes and "collapsed" in notes[0]


def test_render_without_graphviz_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere
    with pytest.raises(GraphscopeError, match="install Graphviz"):
        render("digraph {}", "svg")


def test_trace_is_valid_trace_event_json_with_annotations():
    b = _b("mlp_step")
    tr = json.loads(json.dumps(build_trace(b)))
    evs = tr["traceEvents"]
    xs = [e for e in evs if e["ph"] == "X"]
    for e in xs:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= set(e)
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    kern = [e for e in xs if e.get("cat") == "kernel"]
    assert len(kern) == len([n for n in b.work_nodes() if n.type == "kernel"]) * len(
        {e["replay"] for e in b.events})
    assert all("graph node id" in e["args"] for e in kern)
    assert any(e["args"].get("module_name") == "L.fc1" and e["args"].get("op") for e in kern)
    spans = [e for e in xs if e.get("cat") == "module" and e["args"]["replay"] == 0]
    # one slice per run of a module's work: the training step's forward, the loss, the
    # backward in reverse; every child inside a run of its parent, siblings apart
    assert [(s["tid"], s["args"]["module_name"]) for s in spans] == [
        (0, "L"), (1, "L.fc1"), (1, "L.act"), (1, "L.fc2"), (1, "L.act"), (1, "L.head"),
        (0, "(loss)"), (0, "L"), (1, "L.head"), (1, "L.act"), (1, "L.fc2"), (1, "L.act"),
        (1, "L.fc1")]
    end = lambda s: s["ts"] + s["dur"]  # noqa: E731
    for k in spans:
        if "." in k["args"]["module_name"]:
            assert any(p["args"]["module_name"] == "L" and p["ts"] <= k["ts"]
                       and end(k) <= end(p) + 1e-6 for p in spans)
    for lane in (0, 1):
        row = [s for s in spans if s["tid"] == lane]
        assert all(end(a) <= b["ts"] + 1e-6 for a, b in zip(row, row[1:]))  # never nested
    assert sum(s["args"]["nodes"] for s in spans if s["tid"] == 0) == len(
        list(b.work_nodes()))
    lanes = {e["tid"] for e in kern}
    assert lanes == set(range(len(lanes)))  # compacted stream lanes
    names = [e for e in evs if e["ph"] == "M" and e["name"] == "thread_name"]
    assert names


def _need_dot():
    import shutil

    if shutil.which("dot") is None:
        if os.environ.get("GRAPHSCOPE_REQUIRE_DOT"):  # CI installs Graphviz: never skip there
            pytest.fail("Graphviz `dot` is not installed but GRAPHSCOPE_REQUIRE_DOT is set")
        pytest.skip("Graphviz `dot` is not installed")


@pytest.mark.parametrize("path", fixture_bundles(), ids=os.path.basename)
def test_graphviz_renders_every_fixture_graph(path):
    """What pydot accepts Graphviz must accept too: every graph, full and collapsed."""
    from graphscope.model.bundle_io import read_bundle

    _need_dot()
    b = read_bundle(path)
    for g in b.graphs:
        for collapse in (False, True):
            text, _ = build_dot(b, DotOptions(graph=g.name, collapse=collapse))
            svg = render(text, "svg")
            assert b"<svg" in svg and b"</svg>" in svg


def test_graphviz_renders_hostile_module_names():
    """Module names are data: quotes, backslashes, braces and HTML survive into valid DOT."""
    import dataclasses

    from graphscope.model.bundle_io import read_bundle
    from tests.conftest import DATA

    _need_dot()
    b = read_bundle(os.path.join(DATA, "mlp_step"))
    evil = ['L.a"b', "L.c\\d", "L.{x}", "L.<!--<script>", "L.[/x]", "L.__GRAPH__ ;]"]
    g = b.graphs[0]
    nodes = tuple(dataclasses.replace(n, annotation={**n.annotation,
                                                     "module_name": evil[i % len(evil)]})
                  if n.is_work else n for i, n in enumerate(g.nodes))
    b2 = dataclasses.replace(b, graphs=(dataclasses.replace(g, nodes=nodes),))
    for collapse in (False, True):
        text, _ = build_dot(b2, DotOptions(collapse=collapse))
        assert b"</svg>" in render(text, "svg")


_PHASES = {"X", "B", "E", "i", "I", "M", "C", "b", "e", "n", "s", "t", "f"}


def _strict_trace_events(text):
    """The Trace Event Format as Perfetto and chrome://tracing read it: strict JSON (no NaN or
    Infinity), a traceEvents list, every event with a known ph, numeric non-negative ts/dur,
    integer or string pid/tid, and metadata events naming something."""
    def no_constants(c):
        raise AssertionError(f"{c} is not JSON")

    tr = json.loads(text, parse_constant=no_constants)
    evs = tr["traceEvents"] if isinstance(tr, dict) else tr
    assert isinstance(evs, list) and evs
    for e in evs:
        assert e["ph"] in _PHASES, e
        assert isinstance(e.get("pid", 0), (int, str)) and isinstance(e.get("tid", 0), (int, str))
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["dur"] >= 0 and isinstance(e["name"], str)
        if e["ph"] == "M":
            assert isinstance(e["args"]["name"], str)
    return evs


@pytest.mark.parametrize("path", [p for p in fixture_bundles()
                                  if read_bundle(p).events], ids=os.path.basename)
def test_every_fixture_trace_is_strict_trace_event_json(tmp_path, path):
    from graphscope.cli.main import main

    out = tmp_path / "t.json"
    assert main(["dump", path, "--trace", "-o", str(out)]) == 0
    evs = _strict_trace_events(out.read_text())
    assert any(e.get("cat") == "kernel" for e in evs)


def test_multirank_trace_is_strict_trace_event_json(tmp_path):
    from graphscope.cli.main import main

    out = tmp_path / "t.json"
    assert main(["dump", os.path.join(DATA, "ddp_mlp_step"), "--trace", "-o", str(out)]) == 0
    evs = _strict_trace_events(out.read_text())
    assert len({e["pid"] for e in evs if e["ph"] == "X"}) >= 2  # a process per rank


def test_one_graphs_trace_is_strict_trace_event_json(tmp_path):
    # dump --graph --trace: the view of one ladder bucket, in the format Perfetto reads
    from graphscope.cli.main import main

    out = tmp_path / "t.json"
    assert main(["dump", os.path.join(DATA, "run_ladder"), "--trace", "--graph", "#3", "-o",
                 str(out)]) == 0
    evs = _strict_trace_events(out.read_text())
    assert any(e.get("cat") == "kernel" for e in evs)


def test_trace_module_slices_never_span_two_graphs():
    # GIVEN a program's two decode graphs, replayed apart (graph #1 30 ms after #0)
    b = _b("run_decode")
    spans = [e for e in build_trace(b)["traceEvents"] if e.get("cat") == "module"]
    top = [s for s in spans if s["tid"] == 0 and s["args"]["replay"] == 0]
    # THEN each graph's replay 0 has its own root slice, as long as that graph's work
    assert len(top) == 2 and len({s["args"]["graph"] for s in top}) == 2
    assert all(s["dur"] < 1000 for s in top), [s["dur"] for s in top]


@pytest.mark.parametrize("path", fixture_bundles(), ids=os.path.basename)
def test_trace_module_slices_nest_as_trace_viewers_need(path):
    """Perfetto and chrome://tracing draw a lane's complete events as a stack: on one lane
    (a module depth) slices never overlap, and each lies inside a slice one depth up, for every
    recorded bundle (side streams included)."""
    from graphscope.model.bundle_io import read_bundle

    b = read_bundle(path)
    if not b.events:
        pytest.skip("no replay events")
    spans = [e for e in build_trace(b)["traceEvents"] if e.get("cat") == "module"]
    end = lambda s: s["ts"] + s["dur"]  # noqa: E731
    for lane in {s["tid"] for s in spans}:
        row = sorted((s for s in spans if s["tid"] == lane), key=lambda s: s["ts"])
        assert all(end(a) <= c["ts"] + 1e-9 for a, c in zip(row, row[1:])), lane
        if lane:
            up = [s for s in spans if s["tid"] == lane - 1]
            assert all(any(p["ts"] <= s["ts"] and end(s) <= end(p) + 1e-9 and
                           s["args"]["module_name"].startswith(p["args"]["module_name"] + ".")
                           for p in up) for s in row), lane


def test_graphviz_renders_the_dot_file_dump_writes_with_its_mark(tmp_path, monkeypatch):
    """The file `dump` writes starts with graphscope's mark (a DOT comment): Graphviz itself
    reads the file, mark and all."""
    import subprocess

    from graphscope.cli.main import main

    _need_dot()
    monkeypatch.chdir(tmp_path)
    bundle = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "mlp_step")
    assert main(["dump", bundle]) == 0
    path = tmp_path / "mlp_step.step.dot"
    assert path.read_text().startswith("// generator: graphscope\n")
    svg = subprocess.run(["dot", "-Tsvg", str(path)], capture_output=True, check=True).stdout
    assert b"</svg>" in svg
