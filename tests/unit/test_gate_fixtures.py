"""The gate on real recordings (tests/data/gates, recorded on the H200 by
bench/record_gate_fixtures.py, each bundle by its own process): A/A pairs never fail, an
injected 5% regression fails and names its module, a 3% one reads as a regression or as no
change beyond noise with its interval, the two-stream speed-up passes as a speed-up, and
`check --baseline` agrees with `diff` on every pair."""

from __future__ import annotations

import functools
import json
import os
import re
import textwrap

import pytest

from graphscope.analysis.gate import REGRESSION, SPEED_UP, WITHIN_NOISE, compare
from graphscope.cli.main import main
from graphscope.model.bundle_io import read_bundle
from tests.conftest import DATA

GATES = os.path.join(DATA, "gates")
pytestmark = pytest.mark.skipif(
    not os.path.isfile(os.path.join(GATES, "gates.json")),
    reason="tests/data/gates is not recorded yet: on a GPU machine run "
           "`python bench/record_gate_fixtures.py tests/data/gates`")


@functools.lru_cache(maxsize=1)
def _meta() -> dict:
    with open(os.path.join(GATES, "gates.json"), encoding="utf-8") as f:
        return json.load(f)


@functools.cache
def _b(name):
    return read_bundle(os.path.join(GATES, name))


def _limit() -> float:
    return float(_meta()["limit_pct"])


def _aa() -> list[str]:
    return list(_meta()["aa"]) if os.path.isfile(os.path.join(GATES, "gates.json")) else []


def _pairs() -> list[tuple[str, str]]:
    aa = _aa()
    return list(zip(aa, aa[1:]))


def _cli(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr().out
    return rc, out


def test_at_least_20_aa_pairs_of_separate_processes():
    # GIVEN the recorded fixtures THEN there are 20+ A/A pairs, each bundle its own process
    meta = _meta()
    assert len(_pairs()) >= 20
    commands = [meta["captures"][n]["command"] for n in _aa()]
    assert all(c.startswith("graphscope capture ") for c in commands)
    assert len({_b(n).manifest["created"] for n in _aa()}) == len(_aa())
    assert {_b(n).manifest["model"]["sha256"] for n in _aa()} == {
        _b("extra_5pct").manifest["model"]["sha256"]}


@pytest.mark.parametrize(("a", "b"), _pairs())
def test_aa_pairs_never_fail_the_default_gate(a, b):
    # GIVEN two recordings of one program in two processes WHEN gated on span at the limit
    c = compare(_b(a), _b(b), limit_pct=_limit())
    # THEN the gate passes, and the span reads as no change beyond noise
    assert not c.failed, [(x.graph, x.delta_pct, x.noise_ns) for x in c.failures]
    assert c.graphs[0].span is not None and c.graphs[0].span.verdict != REGRESSION


@pytest.mark.parametrize("a", _aa())
def test_an_injected_5pct_regression_fails_and_names_its_module(a, capsys):
    # GIVEN an extra kernel of about 5% of the span in one module
    module = _meta()["module"]
    c = compare(_b(a), _b("extra_5pct"), limit_pct=_limit())
    # THEN the span gate fails
    assert c.failed and c.failures[0].metric == "span" and c.failures[0].verdict == REGRESSION
    ex = c.graphs[0].explanation
    assert [k.module for k in ex.kernels_added] == [module]
    assert ex.critical_path_modules and ex.critical_path_modules[0].module == module
    # AND diff says so, naming the module, and exits 1
    rc, out = _cli(capsys, "diff", os.path.join(GATES, a), os.path.join(GATES, "extra_5pct"),
                   "--fail-above", str(_limit()))
    assert rc == 1 and out.strip().splitlines()[-1].startswith("FAIL: span of forward ")
    assert f"kernel added in {module}:" in out


@pytest.mark.parametrize("a", _aa())
def test_an_injected_3pct_regression_reads_as_a_regression_or_within_noise(a, capsys):
    c = compare(_b(a), _b("extra_3pct"), limit_pct=_limit())
    s = c.graphs[0].span
    assert s is not None and s.verdict in (REGRESSION, WITHIN_NOISE)
    rc, out = _cli(capsys, "diff", os.path.join(GATES, a), os.path.join(GATES, "extra_3pct"),
                   "--fail-above", str(_limit()))
    last = out.strip().splitlines()[-1]
    # THEN the verdict line prints the interval, whichever it is
    assert re.search(r"95% interval [+-]\d+\.\d% … [+-]\d+\.\d%", last), last
    assert ("regression" in last) or ("no change beyond noise" in last), last
    assert rc == (1 if c.failed else 0)


@pytest.mark.parametrize("a", _aa())
def test_the_two_stream_speed_up_passes_as_a_speed_up(a, capsys):
    c = compare(_b(a), _b("two_streams"), limit_pct=_limit())
    assert not c.failed and c.verdict == SPEED_UP
    assert c.graphs[0].span is not None and c.graphs[0].span.verdict == SPEED_UP
    rc, out = _cli(capsys, "diff", os.path.join(GATES, a), os.path.join(GATES, "two_streams"),
                   "--fail-above", str(_limit()))
    assert rc == 0 and out.strip().splitlines()[-1].endswith(
        f"speed-up (limit +{_limit():.1f}% on span)")


def _every_pair() -> list[tuple[str, str]]:
    return _pairs() + [(a, b) for a in _aa()[:5]
                       for b in ("extra_5pct", "extra_3pct", "two_streams")]


@pytest.mark.parametrize(("a", "b"), _every_pair())
@pytest.mark.parametrize("on", ["span", "critical_path"])
def test_check_baseline_agrees_with_diff(a, b, on, tmp_path, capsys):
    # GIVEN a regression budget at the gate's limit
    budget = tmp_path / "b.yaml"
    budget.write_text(textwrap.dedent(f"""
        regression: {{max_pct: {_limit()}, on: {on}}}
    """))
    pa, pb = os.path.join(GATES, a), os.path.join(GATES, b)
    # WHEN both commands judge the pair THEN they agree
    rc_diff = main(["diff", pa, pb, "--fail-above", str(_limit()), "--on", on])
    rc_check = main(["check", pb, "--budget", str(budget), "--baseline", pa])
    capsys.readouterr()
    assert rc_diff == rc_check, (a, b, on)


def test_budgets_on_span_critical_path_pool_and_capture_time_hold_a_capture_bundle(tmp_path):
    from graphscope.analysis.budgets import evaluate, load_budgets

    b = _b(_aa()[0])
    info = b.graphs[0].info
    assert info.get("pool_bytes") and info.get("capture_s")
    p = tmp_path / "b.yaml"
    p.write_text(textwrap.dedent(f"""
        graphs:
          "*": {{max_span_us: 1, max_critical_path_us: 1, max_pool_bytes: 1,
                 max_capture_ms: 0.001}}
          forward: {{max_span_us: 1e6, max_critical_path_us: 1e6,
                     max_pool_bytes: {int(info['pool_bytes'])}, max_capture_ms: 1e6}}
    """))
    res = evaluate(b, load_budgets(str(p)))
    failed = {r.name for r in res if not r.passed}
    assert failed == {f"graphs[*][forward].{k}" for k in ("span", "critical_path",
                                                          "pool_bytes", "capture_ms")}
    assert all(r.passed for r in res if r.name.startswith("graphs[forward]"))
