"""The verdicts and the findings tell one story: a verdict that claims a gain (serialized, the
streams measured, host bound) is a listed finding with the same saving where that saving is
above the findings' floor, and says its figure and "not listed" where it is not; a candidate
under the floor is never claimed by a verdict as a gain. Over every recorded fixture, and on a
recorded graph whose replays spread more than the what-if gains."""

from __future__ import annotations

import dataclasses
import os

import pytest

from graphscope.analysis.diagnosis import Diagnosis, diagnose
from graphscope.model.bundle_io import read_bundle
from graphscope.render.diagnosis import findings_lines, verdict_lines
from graphscope.render.fmt import fmt_ns
from tests.conftest import DATA, fixture_bundles

GAINS = {"serialized": "streams", "streams_measured": "streams", "host_bound": "host"}


def _claims_a_gain(v) -> bool:
    return v.code in GAINS and (v.code != "streams_measured" or (v.gain_pct or 0) > 0)


def _agree(d: Diagnosis) -> None:
    """The verdicts and the findings of ``d`` agree (module docstring)."""
    fs = d.findings
    listed = {(f.kind, f.graph): f for f in fs.findings}
    under = {(f.kind, f.graph): f for f in fs.under_floor}
    assert fs.below_floor == len(fs.under_floor)
    words = verdict_lines(d)
    for v, said in zip(d.all_verdicts, words):
        if not _claims_a_gain(v):
            continue
        key = (GAINS[v.code], v.graph)
        assert v.saving_ns is not None, f"{v.code} on {v.graph!r} carries no finding's figure"
        if v.listed:
            f = listed[key]
            assert f.saving_ns == v.saving_ns and key not in under
            if v.code == "serialized":  # the what-if's gain, before time is claimed once
                assert f.predicted_ns == pytest.approx(v.from_ns - v.to_ns, rel=1e-9)
            if v.code == "host_bound":
                assert f.gaps == v.gaps >= fs.min_gaps
            assert "not listed" not in said
        else:
            assert key not in listed and under[key].saving_ns == v.saving_ns
            assert "not listed" in said and fmt_ns(v.saving_ns) in said
    for key in under:
        assert not any(v.listed for v in d.all_verdicts
                       if _claims_a_gain(v) and (GAINS[v.code], v.graph) == key)
    note = " ".join(findings_lines(fs))
    for f in fs.under_floor[:4]:  # each said with its figure
        assert fmt_ns(f.saving_ns) in note


@pytest.mark.parametrize("path", fixture_bundles(), ids=lambda p: os.path.relpath(p, DATA))
def test_every_fixtures_verdicts_and_findings_agree(path):
    # GIVEN a recorded bundle
    # WHEN it is diagnosed
    d = diagnose(read_bundle(path))
    # THEN its verdicts and its findings say the same savings
    _agree(d)


def _stretched(b, by: float):
    """``b`` with its last replay with events (not a cold first one) made ``by`` times its span
    longer: its last node starts that much later (the node's duration is unchanged); and
    every other replay's recorded span as much longer, so that the spans the figures count
    (every traced replay's) spread by as much."""
    spans: dict[int, tuple[int, int]] = {}
    for e in b.events:
        lo, hi = spans.get(e["replay"], (e["start_ns"], e["start_ns"] + e["dur_ns"]))
        spans[e["replay"]] = (min(lo, e["start_ns"]), max(hi, e["start_ns"] + e["dur_ns"]))
    r = max(spans)
    last = max((e for e in b.events if e["replay"] == r),
               key=lambda e: e["start_ns"] + e["dur_ns"])
    shift = int(by * (spans[r][1] - spans[r][0]))
    events = tuple({**e, "start_ns": e["start_ns"] + shift} if e is last else e
                   for e in b.events)
    spans_ns = tuple(x + shift if k % 2 or k == r else x
                     for k, x in enumerate(b.replay_span_ns))
    return dataclasses.replace(b, events=events, replay_span_ns=spans_ns)


def test_a_serialized_graph_whose_replays_spread_more_than_its_gain_says_so():
    # GIVEN a recorded graph with stream-order-only edges (mlp_step, H200), one of its replays
    # stretched so that the replays' spread is larger than what the what-if gains
    d = diagnose(_stretched(read_bundle(os.path.join(DATA, "demo", "mlp_step")), 0.4))
    (o,) = d.graphs
    assert o.what_if is not None and o.what_if.gain_pct >= 2.0
    # WHEN its verdicts and findings are read
    (v,) = [v for v in o.verdicts if v.code == "serialized"]
    # THEN the streams finding is under the floor, and the verdict says its figure, not listed
    assert "streams" not in [f.kind for f in d.findings.findings]
    assert v.listed is False and v.unlisted == "floor"
    assert v.saving_ns < v.threshold_ns
    _agree(d)
