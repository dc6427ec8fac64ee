"""compile.json's numbers (graphscope/capture/compile_doc.py) from Graph-model nodes and
traced records split by replay (graphscope/capture/alternate.py), and the file's check on
read (graphscope/bundle_files.py ``read_compile``); no GPU: nodes and records are built
here as the capture and the tracer make them."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from graphscope._errors import BundleError
from graphscope.capture.alternate import replays_of
from graphscope.capture.compile_doc import OUTSIDE, graph_entry, select, version_stats
from graphscope.model.bundle_files import COMPILE_FILE, SCHEMA_VERSION, read_compile
from graphscope.model.graph import Node

EXEC = 7


def _node(lid, module=None, kernel="k", type_="kernel"):
    ann = {"module_name": module} if module else {}
    return Node(graph="forward", local_id=lid, exec_node_id=EXEC << 32 | lid, type=type_,
                kernel=kernel, demangled=kernel, annotation=ann)


def _cols(replays, exec_id=EXEC, other=None):
    """Tracer columns: per replay a list of (local id, start, end); one launch (correlation)
    per replay; ``other``: records of another exec graph interleaved."""
    g, c, s, e = [], [], [], []
    for i, recs in enumerate(replays):
        for lid, st, en in recs:
            g.append(exec_id << 32 | lid)
            c.append(100 + i)
            s.append(st)
            e.append(en)
    for lid, st, en in other or []:
        g.append(99 << 32 | lid)
        c.append(500)
        s.append(st)
        e.append(en)
    return [SimpleNamespace(graph_node_id=np.array(g, dtype=np.uint64),
                            correlation=np.array(c), start_ns=np.array(s),
                            end_ns=np.array(e))]


def test_records_split_by_replay_and_sorted_by_start():
    cols = _cols([[(2, 30, 40), (1, 10, 20)], [(1, 110, 125), (2, 130, 150)]],
                 other=[(1, 0, 1000)])
    r = replays_of(cols, EXEC)
    assert [ids.tolist() for ids in r.local_id] == [[1, 2], [1, 2]]
    assert r.spans() == [30, 40]
    assert r.durations() == {1: [10, 15], 2: [10, 20]}
    assert replays_of(cols, 12345).spans() == [] and replays_of([], EXEC).spans() == []


def test_module_time_is_the_median_over_replays_and_gaps_count_in_the_span():
    # GIVEN a module of two kernels with a gap between them, and a kernel outside it
    nodes = [_node(1, "L.mlp", "triton_poi_fused_add_0"), _node(2, "L.mlp", "gemm"),
             _node(3, None, "softmax"), _node(4, None, type_="empty")]
    replays = replays_of(_cols([
        [(1, 0, 10), (2, 30, 50), (3, 50, 60)],
        [(1, 100, 112), (2, 140, 160), (3, 160, 170)],
        [(1, 200, 210), (2, 230, 260), (3, 260, 270)],
    ]), EXEC)
    v = version_stats(nodes, replays, ["L.mlp"])
    mlp = v["modules"]["L.mlp"]
    # THEN busy is the median sum of its kernels (30, 32, 40), its span the median of its
    # first start to last end (50, 60, 60): the gap between its kernels counts
    assert mlp["busy_ns"] == 32 and mlp["span_ns"] == 60
    assert mlp["kernels"] == 2 and mlp["nodes"] == 2
    assert mlp["top_kernels"] == [{"kernel": "gemm", "count": 1, "ns": 20.0},
                                  {"kernel": "triton_poi_fused_add_0", "count": 1,
                                   "ns": 10.0}]
    assert v["modules"][OUTSIDE]["kernels"] == 1 and v["modules"][OUTSIDE]["busy_ns"] == 10
    assert v["kernels"] == 3 and v["nodes"] == 3 and v["span_ns"] == [60, 70, 70]
    assert v["median_span_ns"] == 70


def test_the_graph_entry_pairs_versions_per_module():
    nodes_e = [_node(1, "L.a", "mul"), _node(2, "L.a", "add"), _node(3, None, "mm")]
    nodes_c = [_node(1, "L.a", "triton_poi_fused_add_mul_0"), _node(2, None, "mm")]
    e = version_stats(nodes_e, replays_of(_cols([[(1, 0, 5), (2, 10, 15), (3, 15, 40)]]),
                                          EXEC), ["L.a"])
    c = version_stats(nodes_c, replays_of(_cols([[(1, 0, 6), (2, 6, 30)]]), EXEC), ["L.a"])
    entry = graph_entry("forward", e, c, ["L.a"], 1, {"outputs_equal": False})
    assert entry["gain_pct"] == pytest.approx(25.0)
    assert [m["module"] for m in entry["modules"]] == ["L.a", OUTSIDE]
    a = entry["modules"][0]
    assert (a["eager"]["kernels"], a["compiled"]["kernels"]) == (2, 1)
    assert (a["eager"]["span_ns"], a["compiled"]["span_ns"]) == (15, 6)


def test_select_compiles_outermost_matches_in_model_order():
    paths = ["L", "L.h", "L.h.0", "L.h.0.mlp", "L.h.1", "L.h.1.mlp", "L.ln"]
    assert select(paths, "L.h.*") == (["L.h.0", "L.h.1"], ["L.h.0.mlp", "L.h.1.mlp"])
    assert select(paths, "*mlp") == (["L.h.0.mlp", "L.h.1.mlp"], [])
    assert select(paths, "L.x") == ([], [])


def _doc():
    nodes = [_node(1, "L.a", "mul")]
    v = version_stats(nodes, replays_of(_cols([[(1, 0, 5)]]), EXEC), ["L.a"])
    part = {"tensors": 1, "bitwise_equal": True, "max_abs_diff": 0.0, "nonfinite": 0,
            "within_tolerance": True, "max_tolerance_ratio": 0.0, "mismatched": []}
    compared = {"outputs_equal": True, "within_tolerance": True, "max_abs_diff": 0.0,
                "max_tolerance_ratio": 0.0,
                "tolerance": {"kind": "compiled", "rule": "|a - b| <= atol + rtol * |b|",
                              "atol_rtol": {"float32": [1e-4, 1e-3]}},
                "compared": {"outputs": part}}
    g = {**graph_entry("forward", v, json.loads(json.dumps(v)), ["L.a"], 1, compared),
         "warmup_s": {"eager": 0.1, "compiled": 9.5}}
    return {"compile_version": 1, "glob": "L.a", "backend": "inductor",
            "options": {"triton.cudagraphs": False}, "dynamic": False,
            "modules": [{"module": "L.a", "class": "Linear"}], "nested": [],
            "torch": "2.11.0", "graphs": [g, {"graph": "bucket1", "error": "RuntimeError: x"}]}


def _write(tmp_path, doc):
    (tmp_path / COMPILE_FILE).write_text(json.dumps({"schema_version": SCHEMA_VERSION, **doc}))
    return str(tmp_path)


def test_read_compile_round_trips_a_document(tmp_path):
    doc = _doc()
    assert read_compile(_write(tmp_path, doc)) == doc
    assert read_compile(str(tmp_path / "nowhere")) is None


@pytest.mark.parametrize("change,field", [
    (lambda d: d.pop("glob"), "glob"),
    (lambda d: d["graphs"][0]["eager"].update(kernels=-1), "graphs[0].eager.kernels"),
    (lambda d: d["graphs"][0].update(outputs_equal="yes"), "graphs[0].outputs_equal"),
    (lambda d: d["graphs"][0]["modules"][0]["compiled"].pop("busy_ns"),
     "graphs[0].modules[0].compiled.busy_ns"),
    (lambda d: d["graphs"][0]["compared"]["outputs"].update(tensors=1.5),
     "graphs[0].compared.outputs.tensors"),
    (lambda d: d["graphs"][1].update(error=3), "graphs[1].error"),
])
def test_a_malformed_compile_json_names_the_field(tmp_path, change, field):
    doc = _doc()
    change(doc)
    with pytest.raises(BundleError) as e:
        read_compile(_write(tmp_path, doc))
    assert str(e.value) == (f"{os.path.join(str(tmp_path), COMPILE_FILE)}: {field} is missing "
                            "or malformed (re-record it with graphscope capture --try-compile)")


def test_another_compile_version_is_refused(tmp_path):
    doc = {**_doc(), "compile_version": 2}
    with pytest.raises(BundleError, match="compile_version 2, but this graphscope reads "
                                          "version 1"):
        read_compile(_write(tmp_path, doc))


def test_a_bundle_with_compile_json_is_reported(tmp_path):
    # GIVEN a recorded bundle (H200, mlp_step) with a compile.json beside its files
    import shutil
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    path = tmp_path / "b"
    shutil.copytree(os.path.join(DATA, "mlp_step"), path)
    _write(path, _doc())
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"] = sorted([*manifest["files"], COMPILE_FILE])
    (path / "manifest.json").write_text(json.dumps(manifest))
    # THEN it reads back, and the report runs on it
    assert read_compile(str(path))["glob"] == "L.a"
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", str(path)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_failed_capture_is_told_by_its_first_error():
    # GIVEN a capture whose op failed, then whose end failed "due to a previous error"
    from graphscope.capture.alternate import one_line

    def capture():
        try:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore")
        finally:
            raise RuntimeError("CUDA error: operation failed due to a previous error during "
                               "capture")

    with pytest.raises(RuntimeError) as e:
        capture()
    # THEN the one line names the first error, then the last
    assert one_line(e.value) == (
        "RuntimeError: CUDA error: operation not permitted when stream is capturing (then "
        "RuntimeError: CUDA error: operation failed due to a previous error during capture)")
    assert one_line(ValueError("bad\nx")) == "ValueError: bad"


def test_the_tried_graph_is_kept_node_by_node_beside_the_captured_one():
    # GIVEN two replays of each graph, alternated, the tried one (exec 99) running node 2
    # beside node 1 and its kernels those of the captured graph
    from graphscope.capture.streams import tried_nodes

    cols = _cols([[(1, 0, 10), (2, 10, 30)], [(1, 100, 112), (2, 112, 130)]],
                 other=[(1, 200, 215), (2, 202, 225)])
    for c in cols:
        c.kind = np.zeros(len(c.start_ns), np.int32)
        c.name_idx = np.array([0 if int(g) & 0xFFFFFFFF == 1 else 1 for g in c.graph_node_id])
        c.names = ["gemm", "relu"]
    # WHEN the measurement keeps its nodes
    t = tried_nodes(cols, EXEC, 99)
    # THEN each graph's nodes have their median start in the replay and median duration
    assert t["aligned"] is True
    assert t["one_stream"] == {"local_id": [1, 2], "start_ns": [0, 11],
                               "duration_ns": [11, 19]}
    assert t["tried"] == {"local_id": [1, 2], "start_ns": [0, 2], "duration_ns": [15, 23]}
    # AND a tried graph whose kernels differ is said not to be aligned
    cols[0].names = ["gemm", "relu"]
    cols[0].name_idx = np.array([0, 0, 0, 0, 1, 0])
    assert tried_nodes(cols, EXEC, 99)["aligned"] is False
