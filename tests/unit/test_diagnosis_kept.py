"""The diagnosis a capture keeps (diagnosis.json) is the diagnosis of the bundle it wrote: made
by capture's own last step (``finish``) from a recorded fixture's graphs and timings, launch
records included, it equals a fresh ``diagnose`` of the bundle read back."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os

import pytest

from graphscope.analysis.report import report_diagnosis
from graphscope.capture.source import RawCapture
from graphscope.model.bundle_files import read_diagnosis
from graphscope.model.bundle_io import read_bundle
from graphscope.model.join import JoinResult
from tests.conftest import DATA
from tests.unit.test_report_cache import _same

# recorded bundles whose timeline holds the host's launch records
WITH_LAUNCHES = ["demo/run_decode", "demo/branches_forward", "gpt_step_eager"]


def _join_of(bundle) -> JoinResult:
    """What the tracer's join would have handed ``finish`` for this recorded bundle."""
    return JoinResult(
        replays=bundle.replays,
        durations_ns={n.exec_node_id: list(n.durations_ns) for n in bundle.work},
        replay_kernel_ns=list(bundle.replay_kernel_ns),
        replay_span_ns=list(bundle.replay_span_ns),
        _events=[dict(e) for e in bundle.events], joined_records=0,
        unjoined_records=bundle.unjoined_records, outside_graph_records=0,
        launches=[dict(x) for x in bundle.launches])


@pytest.mark.parametrize("name", WITH_LAUNCHES)
def test_a_capture_keeps_the_diagnosis_of_the_bundle_it_wrote(name, tmp_path, monkeypatch):
    # GIVEN capture's last step, handed a recorded bundle's graphs and its join (launch
    # records included)
    fin = importlib.import_module("graphscope.capture.finish")
    src = read_bundle(os.path.join(DATA, name))
    assert src.launches, f"{name}: a fixture without launch records"
    graphs = [dataclasses.replace(g, nodes=tuple(
        dataclasses.replace(n, durations_ns=()) for n in g.nodes)) for g in src.graphs]
    monkeypatch.setattr(fin, "build_graphs", lambda raw: graphs)
    monkeypatch.setattr(fin, "versions", lambda: src.manifest.get("versions", {}))
    manifest = {k: v for k, v in src.manifest.items()
                if k not in ("files", "schema_version", "replays", "versions", "graphs",
                             "created", "clock")}
    # WHEN it writes the bundle with its diagnosis
    out = str(tmp_path / "b")
    fin.finish(RawCapture(graphs=[], join=_join_of(src)), output=out, manifest=manifest,
               force=False)
    # THEN the kept diagnosis is current and is what a fresh diagnosis of the written bundle
    # gives: launch latencies included
    kept = read_diagnosis(out)
    assert kept is not None
    fresh = json.loads(json.dumps(report_diagnosis(read_bundle(out))))
    assert any(g["launch_recorded"] for g in fresh["graphs"])
    assert _same(kept, fresh)
