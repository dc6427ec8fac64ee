"""Eager vs graph on synthetic records and bundles: the marker attribution of eager
kernels, the comparison, eager.json in the bundle, report / diff / check, graph coverage."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from graphscope._errors import BundleError, CaptureError
from graphscope.analysis.eager import compare, graph_coverage, kernel_changes
from graphscope.capture.eager import attribute, note_owner
from graphscope.model.bundle import Bundle
from graphscope.model.bundle_files import read_eager
from graphscope.model.bundle_io import read_bundle, write_bundle
from graphscope.model.graph import CapturedGraph, Node

GID = 1 << 32
GEMM = "void gemm_kernel<float>(float*)"
RELU = "void at::native::relu_kernel(float*)"


def node(i, name, module, dur, phase=None, graph="step"):
    ann = {"module_name": module, **({"autograd_phase": phase} if phase else {})}
    return Node(graph=graph, local_id=i, exec_node_id=GID + i, type="kernel", kernel=name,
                demangled=name, annotation=ann, durations_ns=(dur, dur, dur))


def graph_bundle(path="/x"):
    nodes = [node(0, GEMM, "L.fc1", 100), node(1, RELU, "L.fc1", 10),
             node(2, GEMM, "L.fc2", 100), node(3, GEMM, "L.fc2", 50, "backward")]
    g = CapturedGraph("step", 1, 1, tuple(nodes), ())
    return Bundle(path, {"mode": "step"}, (g,), 3, replay_kernel_ns=(260, 260, 260))


def eager_doc(**kw):
    doc = {
        "eager_version": 1, "mode": "step", "runs": 2, "graphs": ["step"],
        "graph_wall_ns": [1000, 1000], "eager_wall_ns": [3000, 3000],
        "eager_gpu_ns": [300, 300], "backward_attribution": "autograd node",
        "kernels": [
            {"graph": "step", "module": "L.fc1", "phase": "forward", "kernel": "gemm_kernel",
             "count": 2, "ns": 200},
            {"graph": "step", "module": "L.fc1", "phase": "forward", "kernel": "relu_kernel",
             "count": 2, "ns": 20},
            # eager: fc2 ran a different GEMM (the graph replaced it), and a copy graphing lost
            {"graph": "step", "module": "L.fc2", "phase": "forward", "kernel": "gemv_kernel",
             "count": 2, "ns": 100},
            {"graph": "step", "module": "L.fc2", "phase": "forward", "kernel": "memcpy",
             "count": 2, "ns": 10},
            {"graph": "step", "module": "L.fc2", "phase": "backward", "kernel": "gemm_kernel",
             "count": 2, "ns": 200},
        ],
    }
    doc.update(kw)
    return doc


# ---------------------------------------------------------------- attribution by markers
def test_attribute_nests_scopes_in_correlation_order():
    M = 9  # the marker stream
    # correlation order: marker(None), open L, k, open L.a, k, k, close, k, close, k
    recs = [  # (correlation, stream, name, ns), shuffled: attribution must sort them
        (70, 1, "tail", 5), (1, M, "fill", 1), (2, M, "fill", 1), (3, 1, "root", 10),
        (4, M, "fill", 1), (5, 1, "a1", 20), (6, 1, "a2", 30), (55, M, "fill", 1),
        (60, 1, "root2", 40), (61, M, "fill", 1)]
    recs.sort(key=lambda r: r[3] * 13 % 7)
    corr = np.array([r[0] for r in recs])
    stream = np.array([r[1] for r in recs])
    names = [r[2] for r in recs]
    dur = np.array([r[3] for r in recs])
    events = [None, ("L", "forward"), ("L.a", "forward"), None, None]
    out = attribute(corr, stream, np.zeros(len(recs)), names, dur, events)
    assert out == {("L", "forward", "root"): [1, 10], ("L.a", "forward", "a1"): [1, 20],
                   ("L.a", "forward", "a2"): [1, 30], ("L", "forward", "root2"): [1, 40],
                   ("(unattributed)", "forward", "tail"): [1, 5]}


def test_attribute_refuses_a_marker_count_that_does_not_match():
    corr, stream = np.array([1, 2, 3]), np.array([9, 1, 9])
    with pytest.raises(CaptureError, match="2 scope markers traced, 3 launched"):
        attribute(corr, stream, np.zeros(3), ["f", "k", "f"], np.ones(3), [None, None, None])
    with pytest.raises(CaptureError, match="no work"):
        attribute(np.zeros(0), np.zeros(0), np.zeros(0), [], np.zeros(0), [None])
    # a record without a correlation id (0) does not name the marker stream
    out = attribute(np.array([0, 1, 2]), np.array([5, 9, 1]), np.array([1, 0, 0]),
                    ["memcpy", "f", "k"], np.array([7, 1, 3]), [None])
    assert out == {("(unattributed)", "forward", "memcpy"): [1, 7],
                   ("(unattributed)", "forward", "k"): [1, 3]}


# ---------------------------------------------------------------- comparison
def test_compare_per_module_phase_and_step():
    c = compare(graph_bundle(), eager_doc())
    rows = {(r["module"], r["phase"]): r for r in c["modules"]}
    fc1 = rows[("L.fc1", "forward")]
    assert (fc1["eager_kernels"], fc1["graph_kernels"]) == (2, 2)
    assert (fc1["eager_ns"], fc1["graph_ns"]) == (110, 110)
    assert not (fc1["added"] or fc1["missing"] or fc1["replaced"])
    fc2 = rows[("L.fc2", "forward")]
    assert fc2["replaced"] == [{"eager": "gemv_kernel", "graph": "gemm_kernel"}]
    assert fc2["missing"] == [{"kernel": "memcpy", "count": 1, "ns": 5.0}]
    # 45 ns more in the graph: within run-to-run noise (under 1 µs), not called slower
    assert fc2["graph_ns"] == 100 and fc2["eager_ns"] == 55 and not fc2["slower_in_graph"]
    assert rows[("L.fc2", "backward")]["eager_ns"] == 100
    assert c["kernel_set_changed"] and c["slower_in_graph"] == []
    s = c["step"]
    assert s["speedup"] == 3.0 and s["saved_ns"] == 2000
    assert s["gpu_speedup"] == pytest.approx(300 / 260)
    assert s["eager_kernels"] == 5 and s["graph_kernels"] == 4


def test_compare_rolls_modules_up_to_depth():
    # GIVEN the comparison of a recorded GPT step (tests/data/gpt_step_eager)
    import os

    from graphscope.model.bundle_files import read_eager
    from graphscope.model.bundle_io import read_bundle
    from tests.conftest import DATA

    path = os.path.join(DATA, "gpt_step_eager")
    b, doc = read_bundle(path), read_eager(path)
    full, top = compare(b, doc), compare(b, doc, depth=1)
    # WHEN rolled up to one level below the root
    mods = {r["module"] for r in top["modules"]}
    # THEN every module is at most L.<child> (pseudo modules whole), each row the sum of the
    # full rows it holds, kernels and times alike, and the step is the same
    assert mods and all(m.startswith("(") or m.count(".") <= 1 for m in mods)
    assert len(top["modules"]) < len(full["modules"])
    for r in top["modules"]:
        inner = [x for x in full["modules"] if x["phase"] == r["phase"] and (
            x["module"] == r["module"] or (r["module"] != "L" and x["module"].startswith(
                r["module"] + ".")))]
        assert inner
        assert r["graph_ns"] == pytest.approx(sum(x["graph_ns"] for x in inner))
        assert r["eager_ns"] == pytest.approx(sum(x["eager_ns"] for x in inner))
        assert r["graph_kernels"] == sum(x["graph_kernels"] for x in inner)
    assert top["step"] == full["step"]


def test_slower_in_the_graph_only_past_noise():
    """Slower in the graph: more than 1 µs and 10% over the eager time."""
    nodes = [node(0, GEMM, "L.a", 20_000), node(1, GEMM, "L.b", 10_500),
             node(2, GEMM, "L.c", 1_500)]
    b = Bundle("/x", {"mode": "forward"}, (CapturedGraph("step", 1, 1, tuple(nodes), ()),), 3,
               replay_kernel_ns=(32_000,) * 3)
    doc = eager_doc(kernels=[
        {"graph": "step", "module": m, "phase": "forward", "kernel": "gemm_kernel",
         "count": 2, "ns": 2 * ns} for m, ns in (("L.a", 10_000), ("L.b", 10_000),
                                                 ("L.c", 700))])
    c = compare(b, doc)
    assert c["slower_in_graph"] == ["L.a forward"]  # L.b: +5%; L.c: +114% but +0.8 µs


def test_compare_says_when_graphing_cost_time():
    c = compare(graph_bundle(), eager_doc(graph_wall_ns=[4000, 4000]))
    assert c["step"]["speedup"] == 0.75 and c["step"]["saved_ns"] == -1000
    from graphscope.render.eager import step_lines

    assert "graphing COST 1.0 µs per step" in step_lines(c)[0]


def test_kernel_changes_counts_per_run():
    ch = kernel_changes({"k": [3, 30.0]}, {"k": [1, 10.0]})
    assert ch == {"added": [{"kernel": "k", "count": 2, "ns": 30.0}], "missing": [],
                  "replaced": []}


def test_graph_coverage():
    b = graph_bundle()
    assert graph_coverage(b, {"outside_graph_records": 3}) is None  # before the field
    cov = graph_coverage(b, {"outside_graph_records": 3, "outside_graph_ns": 260})
    assert cov["graph_ns"] == 780 and cov["total_ns"] == 1040
    assert cov["pct"] == pytest.approx(75.0)


# ---------------------------------------------------------------- bundle, report, diff
def _write(tmp_path, name="b", **kw):
    b = graph_bundle()
    return write_bundle(str(tmp_path / name), manifest={"mode": "step"}, graphs=list(b.graphs),
                        timeline={"replays": 3, "replay_kernel_ns": [260] * 3,
                                  "replay_span_ns": [300] * 3, "events": [],
                                  "durations_ns": {str(n.exec_node_id): list(n.durations_ns)
                                                   for n in b.work}},
                        extra={"eager.json": eager_doc(**kw)})


def test_eager_json_round_trip_and_refusals(tmp_path):
    p = _write(tmp_path)
    assert "eager.json" in read_bundle(p).manifest["files"]
    assert read_eager(p) == eager_doc()
    with open(os.path.join(p, "eager.json"), "w") as f:
        json.dump({"schema_version": 1, **eager_doc(runs="2")}, f)
    with pytest.raises(BundleError, match="eager.json: 'runs' must be an integer in \\[1, "):
        read_eager(p)
    with open(os.path.join(p, "eager.json"), "w") as f:
        json.dump({"schema_version": 1, **eager_doc(eager_version=9)}, f)
    with pytest.raises(BundleError, match="eager_version 9"):
        read_eager(p)
    os.unlink(os.path.join(p, "eager.json"))
    assert read_eager(p) is None


def test_report_shows_eager_vs_graph(tmp_path):
    from graphscope.cli.main import cli

    p = _write(tmp_path)
    r = CliRunner().invoke(cli, ["report", p, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["eager"]["step"]["speedup"] == 3.0 and "graph_coverage" not in d
    r = CliRunner().invoke(cli, ["report", p], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "Eager vs graph by module" in r.output and "3.00× speed-up" in r.output
    assert "gemv_kernel → gemm_kernel" in r.output


def test_report_of_a_run_bundle_shows_coverage(tmp_path):
    from graphscope.cli.main import cli

    src = os.path.join(os.path.dirname(__file__), "..", "data", "run_whole_network")
    p = str(tmp_path / "run")
    shutil.copytree(src, p)
    tl = os.path.join(p, "timeline.json")
    with open(tl) as f:
        t = json.load(f)
    t["outside_graph_ns"] = 1000
    with open(tl, "w") as f:
        json.dump(t, f)
    r = CliRunner().invoke(cli, ["report", p, "--json"])
    assert r.exit_code == 0, r.output
    cov = json.loads(r.output)["graph_coverage"]
    assert cov["outside_ns"] == 1000 and cov["outside_records"] == t["outside_graph_records"]
    assert 0 < cov["pct"] < 100


def test_diff_compares_the_eager_baselines(tmp_path):
    from graphscope.cli.main import cli

    a = _write(tmp_path, "a")
    b = _write(tmp_path, "b", eager_wall_ns=[1500, 1500])
    r = CliRunner().invoke(cli, ["diff", a, b, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)["eager"]
    assert d["a"]["step"]["speedup"] == 3.0 and d["b"]["step"]["speedup"] == 1.5
    r = CliRunner().invoke(cli, ["diff", a, b], env={"COLUMNS": "200"})
    assert "Eager vs graph (A → B)" in r.output and "1.50×" in r.output
    assert "Eager vs graph by module (graph - eager, A → B)" in r.output
    assert "L.fc2  │ forward  │ +45 ns │ +45 ns │" in r.output  # per module, both sides
    # one side without a baseline is said, not silently left out
    os.remove(os.path.join(b, "eager.json"))
    r = CliRunner().invoke(cli, ["diff", a, b], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and f"eager baseline: only {a} has one" in r.output


def test_capture_refuses_eager_baseline_for_callables(capsys):
    from graphscope.cli.main import main

    assert main(["capture", "--mode", "callables", "--eager-baseline"]) == 2
    err = capsys.readouterr().err
    assert "--eager-baseline takes --mode step or forward, not 'callables'" in err
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- check budgets
def _budgets(tmp_path, text):
    from graphscope.analysis.budgets import load_budgets

    p = tmp_path / "budgets.yaml"
    p.write_text(text)
    return load_budgets(str(p))


def test_eager_and_coverage_budgets(tmp_path):
    from graphscope.analysis.budgets import evaluate

    b = _budgets(tmp_path, "capture: {eager_baseline: true}\n"
                 "eager: {min_speedup: 2.5, min_gpu_speedup: 1.5}\n"
                 "graph_coverage: {min_pct: 80}\n")
    assert b.capture == {"eager_baseline": True}
    res = {r.name: r for r in evaluate(graph_bundle(), b, eager=eager_doc(),
                                       outside={"outside_graph_ns": 260})}
    assert res["eager.speedup"].passed and res["eager.speedup"].measured == 3.0
    assert not res["eager.gpu_speedup"].passed  # 300 / 260 = 1.15x < 1.5x
    assert not res["graph_coverage"].passed and res["graph_coverage"].measured == 75.0
    res = {r.name: r for r in evaluate(graph_bundle(), b)}
    assert not res["eager.speedup"].passed
    assert "no eager baseline in the bundle" in res["eager.speedup"].message
    assert "not measured" in res["graph_coverage"].message


@pytest.mark.parametrize("text, msg", [
    ("eager: {min_speedup: fast}\n", "'eager.min_speedup' must be a number"),
    ("eager: {max_speedup: 1}\n", "unknown key 'eager.max_speedup'"),
    ("graph_coverage: {min_pct: 120}\n", "at most 100"),
    ("capture: {eager_baseline: 1}\n", "'capture.eager_baseline' must be bool"),
])
def test_eager_budget_errors(tmp_path, text, msg):
    from graphscope._errors import ConfigError

    with pytest.raises(ConfigError, match=msg):
        _budgets(tmp_path, text)


def test_html_report_has_the_eager_tab(tmp_path):
    from tests.unit.test_html import payload, render

    p = _write(tmp_path)
    b = read_bundle(p)
    assert payload(b, extras=_extras(b))["report"]["eager"]["step"]["speedup"] == 3.0
    # a bundle without eager.json: no tab
    assert "eager" not in payload(graph_bundle(""), extras=_extras(graph_bundle("")))["report"]
    page = tmp_path / "r.html"
    page.write_text(render(b, extras=_extras(b)))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed")
    from tests.unit.test_html import selftest

    res, dom = selftest(tmp_path, page)
    assert res["views"][0]["eager"] == 3  # a row per module and phase
    assert "gemv_kernel → gemm_kernel" in dom


# ---------------------------------------------------------------- torch.compile cudagraph trees
def test_tree_events_from_torchs_own_functions(monkeypatch):
    """The watch wraps torch's functions (stubbed here: the real ones need a GPU) and records
    what they are called with and return: warm-ups, recordings, re-recordings with torch's
    status message or the new shapes, and skips with torch's message."""
    from types import SimpleNamespace

    import torch
    from torch._inductor import cudagraph_trees as ct
    from torch._inductor import cudagraph_utils as cu
    from torch._inductor import output_code as oc

    from graphscope.capture.run.trees import TreeEvents

    M, N = ct.CUDAGraphTreeManager, ct.CUDAGraphNode
    monkeypatch.setattr(M, "record_function", lambda mgr, inputs, fid: "recorded")
    monkeypatch.setattr(M, "run_eager", lambda mgr, inputs, fid: "eager")
    status = ct.CheckInvariantStatus
    monkeypatch.setattr(N, "check_invariants",
                        lambda node, inputs: (status.StaticInputIdxMismatch,
                                              lambda: "static input data pointer changed"))
    stubs = (M.record_function, M.run_eager, N.check_invariants,
             cu.log_cudagraph_skip_and_bump_counter)
    assert oc.log_cudagraph_skip_and_bump_counter is stubs[3]  # bound by name there
    call = SimpleNamespace(model=object())  # one compiled callable, two functions
    mgr = SimpleNamespace(get_func_name=lambda fid: "forward", warmed_up_functions=set(),
                          id_to_mode={i: SimpleNamespace(name="INFERENCE") for i in range(3)},
                          ids_to_funcs={0: call, 1: call, 2: SimpleNamespace(model=object())})
    w = TreeEvents()
    w.install()
    try:
        a, b = [torch.zeros(2, 3)], [torch.zeros(4, 3)]
        assert M.run_eager(mgr, a, 0) == "eager"  # a warm-up
        mgr.warmed_up_functions.add(0)
        M.run_eager(mgr, a, 0)  # an eager run of a warmed-up function
        assert M.record_function(mgr, a, 0) == "recorded"
        M.record_function(mgr, b, 1)  # a new size of the same callable: re-recorded
        M.record_function(mgr, b, 2)  # another callable: a recording of its own
        N.check_invariants(object(), b)  # a recorded graph refuses these inputs ...
        M.record_function(mgr, b, 0)  # ... so torch records again
        oc.log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to cpu device (arg1)")
    finally:
        w.uninstall()
    assert (M.record_function, M.run_eager, N.check_invariants,
            cu.log_cudagraph_skip_and_bump_counter) == stubs
    assert oc.log_cudagraph_skip_and_bump_counter is stubs[3]
    d = w.doc()
    ev = [{k: v for k, v in e.items() if k != "t_s"} for e in d["events"]]
    assert ev == [
        {"event": "record", "function": "forward", "mode": "INFERENCE", "shapes": "2x3"},
        {"event": "re-record", "function": "forward", "mode": "INFERENCE", "shapes": "4x3",
         "reason": "input shapes 2x3 -> 4x3"},
        {"event": "record", "function": "forward", "mode": "INFERENCE", "shapes": "4x3"},
        {"event": "re-record", "function": "forward", "mode": "INFERENCE", "shapes": "4x3",
         "reason": "StaticInputIdxMismatch: static input data pointer changed"},
        {"event": "skip", "reason": "skipping cudagraphs due to cpu device (arg1)"}]
    assert d["warmups"] == {"forward": 1} and d["eager_runs"] == {"forward": 1}
    assert d["counters"] == {"cudagraph_skips": 1} and d["missing"] == []
    assert TreeEvents().doc() is None  # nothing happened: no file


def test_report_prints_the_tree_events(tmp_path):
    from graphscope.cli.main import cli

    src = os.path.join(os.path.dirname(__file__), "..", "data", "run_compiled")
    p = str(tmp_path / "run")
    shutil.copytree(src, p)
    doc = {"schema_version": 1, "trees_version": 1, "dropped": 0, "missing": [],
           "events": [{"event": "record", "function": "f", "mode": "INFERENCE",
                       "shapes": "2x3", "t_s": 0.1},
                      {"event": "re-record", "function": "f", "mode": "INFERENCE",
                       "shapes": "4x3", "reason": "input shapes 2x3 -> 4x3", "t_s": 0.2},
                      {"event": "skip", "reason": "skipping cudagraphs due to cpu device",
                       "t_s": 0.3}],
           "warmups": {"f": 2}, "eager_runs": {}, "counters": {"cudagraph_skips": 1}}
    with open(os.path.join(p, "cudagraph_trees.json"), "w") as f:
        json.dump(doc, f)
    r = CliRunner().invoke(cli, ["report", p, "--json"])
    assert r.exit_code == 0, r.output
    t = json.loads(r.output)["cudagraph_trees"]
    assert t["recordings"] == 1 and t["warmup_runs"] == 2
    assert t["re_recordings"] == [{"function": "f", "shapes": "4x3",
                                   "reason": "input shapes 2x3 -> 4x3"}]
    assert t["skips"] == ["skipping cudagraphs due to cpu device"]
    r = CliRunner().invoke(cli, ["report", p], env={"COLUMNS": "200"})
    assert "1 recording(s), 1 re-recording(s), 1 skipped region(s), 2 warm-up" in r.output
    assert "re-recorded f (4x3): input shapes 2x3 -> 4x3" in r.output
    doc["events"][0]["t_s"] = "soon"
    with open(os.path.join(p, "cudagraph_trees.json"), "w") as f:
        json.dump(doc, f)
    r = CliRunner().invoke(cli, ["report", p])
    assert r.exit_code != 0 and ("cudagraph_trees.json: 'events[0].t_s' must be a finite "
                                 "number") in str(r.exception)


# ---------------------------------------------------------------- the scope markers, on a CPU
class _Marks:
    """Markers without a GPU: the same bookkeeping, no fill launched."""

    def __init__(self):
        self.events, self.forward, self.seqs, self.owners = [], [], [], []
        self.around = "(unattributed)"

    def mark(self, scope):
        self.events.append(scope)

    def open(self, name):
        self.forward.append(name)
        self.mark((name, "forward"))
        note_owner(self)

    def close(self):
        self.forward.pop()
        self.mark(None)
        note_owner(self)


def test_scopes_mark_forward_modules_and_backward_autograd_nodes():
    import torch
    from torch import nn

    from graphscope.capture.eager import _attributed_step, _scopes
    from graphscope.capture.source import ModelJob

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    job = ModelJob(model=model, args=(torch.randn(2, 4),), kwargs={},
                   loss_fn=lambda out: out.sum(), warmup=0, depth=None, backward=True,
                   record_ops=False)
    marks = _Marks()
    with _scopes(job, marks):
        _attributed_step(job, marks)()
    ev = marks.events
    fwd = ev[:ev.index(("(loss)", "backward"))]
    assert fwd == [("L", "forward"), ("L.0", "forward"), None, ("L.1", "forward"), None, None,
                   ("(loss)", "forward"), None]
    bwd = ev[len(fwd):]
    # backward() is bracketed by the loss's backward scope; each node about to run sets its
    # owner's: the sum's node the loss, relu L.1, the Linear's node and its parameters'
    # AccumulateGrad nodes L.0 (as the capture's sequence-number rule gives them)
    assert bwd[0] == ("(loss)", "backward") and bwd[-1] is None
    sets = bwd[1:-1]
    assert all(len(e) == 3 and e[1:] == ("backward", "set") for e in sets)
    owners = [e[0] for e in sets]
    assert owners[0] == "(loss)" and owners.count("L.1") == 1
    # addmm, the weight's transpose, the weight's and bias's AccumulateGrad
    assert owners[owners.index("L.1") + 1:] == ["L.0"] * 4
    assert "L" not in owners  # L's own ops are its children's
    assert model[0].weight.grad is not None
    # the hooks are gone: a plain forward marks nothing
    n = len(marks.events)
    model(torch.randn(2, 4)).sum().backward()
    assert len(marks.events) == n


def test_html_of_a_run_bundle_shows_coverage_and_tree_events(tmp_path):
    from tests.unit.test_html import payload, render

    src = os.path.join(os.path.dirname(__file__), "..", "data", "run_compiled")
    p = str(tmp_path / "run")
    shutil.copytree(src, p)
    with open(os.path.join(p, "timeline.json")) as f:
        t = json.load(f)
    t["outside_graph_ns"] = 0
    with open(os.path.join(p, "timeline.json"), "w") as f:
        json.dump(t, f)
    with open(os.path.join(p, "cudagraph_trees.json"), "w") as f:
        json.dump({"schema_version": 1, "trees_version": 1, "dropped": 0, "missing": [],
                   "events": [{"event": "skip", "reason": "skipping cudagraphs due to cpu",
                               "t_s": 0.5}],
                   "warmups": {}, "eager_runs": {}, "counters": {}}, f)
    b = read_bundle(p)
    d = payload(b, extras=_extras(b))
    r = d["report"]
    assert r["graph_coverage"]["pct"] == 100.0 and r["cudagraph_trees"]["skips"]
    assert "eager" not in r
    page = tmp_path / "r.html"
    page.write_text(render(b, extras=_extras(b)))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed")
    from tests.unit.test_html import selftest

    _, dom = selftest(tmp_path, page)
    assert "skipped: skipping cudagraphs due to cpu" in dom
    assert "100.0% of their GPU time in graphs" in dom


def test_finish_writes_a_sources_extra_files(tmp_path, monkeypatch):
    import sys

    from graphscope.capture import RawCapture, finish

    # the module (the package's name "finish" is the function)
    monkeypatch.setattr(sys.modules["graphscope.capture.finish"], "versions",
                        lambda: {"torch": "x"})  # no GPU to name here

    made = []

    def make():
        made.append(1)
        return eager_doc()

    res = finish(RawCapture([], extra_files={"eager.json": make}), output=str(tmp_path / "b"),
                 manifest={"mode": "step"}, force=False)
    assert made == [1] and "eager" in res.phases_s
    assert read_eager(res.bundle_path) == eager_doc()
    with open(os.path.join(res.bundle_path, "manifest.json")) as f:
        assert "eager.json" in json.load(f)["files"]


def test_compare_of_one_graph_of_several():
    b = graph_bundle()
    doc = eager_doc(graphs=["step", "other"])
    doc["kernels"].append({"graph": "other", "module": "L.x", "phase": "forward",
                           "kernel": "k", "count": 2, "ns": 2})
    rows = {(r["module"], r["phase"]) for r in compare(b, doc)["modules"]}
    assert ("L.x", "forward") not in rows and ("L.fc1", "forward") in rows


# ---------------------------------------------- eager baselines recorded on the H200
@pytest.mark.parametrize("name, kernels", [("mlp_step_eager", 24), ("gpt_step_eager", 114)])
def test_recorded_eager_baselines_match_the_graph_module_by_module(name, kernels):
    """`capture --mode step --eager-baseline` of the MLP and the GPT: every (module, phase) has
    the same kernels eager and in the graph (backward too: eager attributes autograd nodes by
    the capture's sequence-number rule), graphing bought a host-side speed-up."""
    src = os.path.join(os.path.dirname(__file__), "..", "data", name)
    c = compare(read_bundle(src), read_eager(src))
    assert not c["kernel_set_changed"]
    phases = {r["phase"] for r in c["modules"]}
    assert {"forward", "backward"} <= phases
    for r in c["modules"]:
        assert r["eager_kernels"] == r["graph_kernels"], r
        assert not (r["added"] or r["missing"] or r["replaced"]), r
    s = c["step"]
    assert s["eager_kernels"] == s["graph_kernels"] == kernels
    assert s["speedup"] > 1 and s["eager_wall_ns"] > s["graph_wall_ns"] > 0
    assert s["eager_gpu_ns"] > 0 and s["graph_gpu_ns"] > 0


def test_scopes_mark_the_optimizers_step_and_zero_grad():
    """The optimizer's step and its zero_grad are optimizer work, as the capture's hooks have
    them (the ViT user step on the H200 put 152 zero_grad fills under (step) before this)."""
    import torch
    from torch import nn

    from graphscope.capture.eager import _scopes
    from graphscope.capture.source import ModelJob

    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    job = ModelJob(model=model, args=(), kwargs={}, loss_fn=None, warmup=0, depth=None,
                   backward=False, record_ops=False)
    marks = _Marks()
    real = torch.optim.Optimizer.zero_grad
    with _scopes(job, marks, backward=False):
        assert torch.optim.Optimizer.zero_grad is not real
        opt.zero_grad(set_to_none=False)
        opt.step()
    assert marks.events == [("(optimizer)", "optimizer"), None,
                            ("(optimizer)", "optimizer"), None]
    assert torch.optim.Optimizer.zero_grad is real
    n = len(marks.events)
    opt.zero_grad()  # unhooked after the run
    assert len(marks.events) == n


def _extras(b):
    """The bundle's optional files, as `graphscope report` reads them for the page."""
    from graphscope.model.bundle_files import read_extras

    return read_extras(b.path, b.manifest.get("mode")) if b.path else None
