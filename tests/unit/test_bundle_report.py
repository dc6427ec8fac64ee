"""Bundles recorded on the H200 (tests/data), read, rewritten and reported on CPU."""

import json
import os
import pickle
import shutil

import pytest

from graphscope._errors import BundleError
from graphscope.analysis.summary import coverage, kernel_rows, module_rows, summarize
from graphscope.model.bundle_files import SCHEMA_VERSION
from graphscope.model.bundle_io import read_bundle, write_bundle
from tests.conftest import DATA

TIMED = ["mlp_step", "mlp_callables", "cnn_step"]


def _fixture(name):
    p = os.path.join(DATA, name)
    if not os.path.isdir(p):
        pytest.skip(f"fixture {name} not recorded (make fixtures)")
    return p


@pytest.mark.parametrize("name", TIMED)
def test_fixture_versions_and_joins(name):
    b = read_bundle(_fixture(name))
    v = b.manifest["versions"]
    assert v["torch"].startswith("2.11") and v["gpu"] == "NVIDIA H200"
    assert b.manifest["schema_version"] == SCHEMA_VERSION
    assert b.replays > 0 and b.unjoined_records == 0
    work = list(b.work_nodes())
    assert work and all(len(n.durations_ns) == b.replays for n in work)


@pytest.mark.parametrize("name", TIMED)
def test_module_times_add_up_to_replay_time(name):
    b = read_bundle(_fixture(name))
    top = [r for r in module_rows(b) if r["level"] == 0]
    for i in range(b.replays):
        assert sum(r["per_replay_ns"][i] for r in top) == b.replay_kernel_ns[i]


def test_coverage_and_phases_of_step_capture():
    b = read_bundle(_fixture("mlp_step"))
    cov = coverage(b)
    assert cov["forward"]["pct"] == 100.0 and cov["backward"]["pct"] == 100.0
    mods = {r["module"]: r for r in module_rows(b)}
    assert {"L", "L.fc1", "L.fc2", "L.head", "L.act", "(loss)"} <= set(mods)
    assert mods["L.fc1"]["fwd_kernels"] >= 1 and mods["L.fc1"]["bwd_kernels"] >= 1
    assert mods["L"]["kernels"] == sum(mods[m]["kernels"] for m in mods if m.startswith("L."))


def test_ops_and_sources_recorded():
    b = read_bundle(_fixture("mlp_step"))
    fwd = [n for n in b.work_nodes() if n.phase == "forward" and n.module.startswith("L.")]
    assert all(n.op and n.op.startswith("aten::") for n in fwd)
    assert any(n.source and "mlp.py:" in n.source for n in fwd)
    ops = {r["op"] for r in kernel_rows(b, 0, key="op")}
    assert "aten::addmm" in ops


def test_pickle_is_pytorch_shape_and_matches_json():
    p = _fixture("mlp_step")
    with open(os.path.join(p, "annotations.pkl"), "rb") as f:
        amap = pickle.load(f)
    with open(os.path.join(p, "annotations.json")) as f:
        js = json.load(f)["annotations"]
    assert amap and {str(k): v for k, v in amap.items()} == js
    b = read_bundle(p)
    assert set(amap) <= {n.exec_node_id for n in b.nodes()}
    assert all(k >> 32 == b.graphs[0].exec_id for k in amap)


def _copy_of(tmp_path, name):
    dst = tmp_path / name
    shutil.copytree(_fixture(name), dst)
    return str(dst)


def test_round_trip_is_byte_identical(tmp_path):
    b = read_bundle(_fixture("mlp_step"))
    timeline = json.load(open(os.path.join(b.path, "timeline.json")))
    timeline.pop("schema_version")
    if timeline.pop("durations_file", None):  # as a capture hands it to write_bundle
        timeline["durations_ns"] = {str(n.exec_node_id): list(n.durations_ns) for n in b.work}
    manifest = {k: v for k, v in b.manifest.items() if k not in ("schema_version", "files")}
    with open(os.path.join(b.path, "raw/step.dot")) as f:
        raw = {"step": f.read()}
    kw = dict(manifest=manifest, graphs=list(b.graphs), timeline=timeline,
              summary=summarize(b), raw_dot=raw)
    a1 = write_bundle(str(tmp_path / "a"), **kw)
    a2 = write_bundle(str(tmp_path / "b"), **kw)
    for f in ("graph.json", "annotations.json", "annotations.pkl", "timeline.json",
              "durations.npy", "summary.json", "manifest.json", "raw/step.dot"):
        assert open(os.path.join(a1, f), "rb").read() == open(os.path.join(a2, f), "rb").read(), f
    again = read_bundle(a1)
    assert [n.to_json() for n in again.nodes()] == [n.to_json() for n in b.nodes()]
    assert summarize(again) == summarize(b)


def test_write_refuses_existing_and_leaves_nothing_half_written(tmp_path):
    b = read_bundle(_fixture("mlp_step"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(BundleError, match="already exists.*--force"):
        write_bundle(str(out), manifest={}, graphs=list(b.graphs))
    assert os.listdir(out) == ["keep.txt"]

    class Boom(dict):
        def items(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_bundle(str(tmp_path / "new"), manifest={}, graphs=list(b.graphs),
                     raw_dot=Boom({"step": "digraph {}"}))
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temp dir, no partial bundle


def test_schema_mismatch_names_both_versions(tmp_path):
    p = _copy_of(tmp_path, "mlp_step")
    m = json.load(open(os.path.join(p, "manifest.json")))
    m["schema_version"] = 99
    json.dump(m, open(os.path.join(p, "manifest.json"), "w"))
    with pytest.raises(BundleError, match="schema version 99.*reads version 1"):
        read_bundle(p)


def test_missing_and_corrupt_bundles(tmp_path):
    with pytest.raises(BundleError, match="no such bundle"):
        read_bundle(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError, match="manifest.json is missing"):
        read_bundle(str(tmp_path / "empty"))
    p = _copy_of(tmp_path, "mlp_step")
    with open(os.path.join(p, "graph.json"), "w") as f:
        f.write('{"schema_version": 1, "graphs": [{"nodes": [')
    with pytest.raises(BundleError, match="graph.json: invalid JSON"):
        read_bundle(p)
    # a timed bundle that lost its timeline is refused, not read as one never replayed
    p = _copy_of(tmp_path, "branches_forward")
    os.remove(os.path.join(p, "timeline.json"))
    with pytest.raises(BundleError, match="timeline.json is missing .the manifest lists it"):
        read_bundle(p)


@pytest.mark.parametrize("name", ["graph.json", "durations.npy", "annotations.json"])
def test_a_file_missing_from_a_bundle_says_it_was_copied_incompletely(tmp_path, name):
    """Not 'not a graphscope bundle' (its manifest says it is one) nor a bare 'is missing': the
    same advice as a lost timeline's, from read_bundle and from the summary's fast path."""
    from graphscope.model.bundle_files import read_summary

    p = _copy_of(tmp_path, "mlp_step")
    os.remove(os.path.join(p, name))
    want = f"{name} is missing .the bundle was copied incompletely; copy or record it again"
    # the summary's fast path reads no durations; the bundle's reader, no annotations.json
    # (its annotations are graph.json's nodes'): each refuses what it needs
    readers = {"graph.json": (read_bundle, read_summary), "durations.npy": (read_bundle,),
               "annotations.json": (read_summary,)}[name]
    for read in readers:
        with pytest.raises(BundleError, match=want):
            read(p)


def _summarized() -> list[str]:
    """Every committed bundle with a stored summary.json (tests/refresh_summaries.py rewrites
    them when the summary's shape changes: a stale one shows here)."""
    from tests.conftest import DATA, fixture_bundles

    return sorted(os.path.relpath(p, DATA) for p in fixture_bundles()
                  if os.path.isfile(os.path.join(p, "summary.json")))


@pytest.mark.parametrize("name", _summarized())
def test_report_from_summary_json_equals_recomputed(name, capsys):
    from graphscope.cli.main import main

    p = _fixture(name)
    assert main(["report", p, "--json"]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert main(["report", p, "--json", "--recompute"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert fast == json.loads(json.dumps(slow))
