"""Budget logic and bundle diffs on recorded fixtures."""

import os
import textwrap
import xml.etree.ElementTree as ET

import pytest

from graphscope._errors import ConfigError
from graphscope.analysis.budgets import evaluate, load_budgets
from graphscope.analysis.diff import diff_summary
from graphscope.cli.main import main
from graphscope.model.bundle_io import read_bundle
from graphscope.render.junit import junit_xml
from tests.conftest import DATA


def _b(name):
    return read_bundle(os.path.join(DATA, name))


def _yaml(tmp_path, text):
    p = tmp_path / "budgets.yaml"
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_budgets_pass_and_fail_with_measured_values(tmp_path):
    b = _b("gpt_step")
    total_us = b.replay_kernel_ns[0] / 1000
    p = _yaml(tmp_path, f"""
        min_coverage: {{forward: 100, backward: 99.5}}
        total: {{max_time_us: {total_us * 10:.0f}, max_kernels: 10}}
        modules:
          "L.blocks.?.attn": {{max_kernels: 100}}
          "L.nope*": {{max_kernels: 1}}
    """)
    res = {r.name: r for r in evaluate(b, load_budgets(p))}
    assert res["coverage.forward"].passed and res["coverage.backward"].passed
    assert res["total.time"].passed
    assert not res["total.kernels"].passed and res["total.kernels"].measured == 114
    assert res["modules[L.blocks.0.attn].kernels"].passed
    assert res["modules[L.blocks.1.attn].kernels"].passed
    assert not res["modules[L.nope*]"].passed


def test_a_coverage_budget_for_a_phase_the_bundle_lacks_fails_and_says_why(tmp_path):
    # GIVEN a forward-only bundle and a budget on backward coverage (a lost backward, or a
    # training budget pointed at an inference bundle)
    p = _yaml(tmp_path, "min_coverage: {forward: 99, backward: 99.5}\n")
    res = {r.name: r for r in evaluate(_b("tiny_forward"), load_budgets(p))}
    # THEN forward is checked and backward fails instead of passing on nothing
    assert res["coverage.forward"].passed
    r = res["coverage.backward"]
    assert not r.passed and r.measured is None and "no backward nodes" in r.message


def test_regression_against_baseline(tmp_path):
    p = _yaml(tmp_path, "regression: {max_pct: 1000}\n")
    res = evaluate(_b("mlp_step"), load_budgets(p), baseline=_b("mlp_step"))
    assert [r.name for r in res] == ["regression[step].span"]
    assert res[0].passed and res[0].measured == 0.0
    assert res[0].message.endswith("no change beyond noise")
    # without a baseline the budget is not dropped: it fails and says what to pass
    (r,) = evaluate(_b("mlp_step"), load_budgets(p), baseline=None)
    assert r.name == "regression" and not r.passed and "--baseline" in r.message


def test_module_regression_gates_have_a_noise_floor_and_a_depth(tmp_path):
    # GIVEN two recordings of one model (mlp_step and mlp_step_eager: leaves move by a few
    # hundred ns, +6% on a 6 µs module) and a 5% gate on modules
    d = diff_summary(_b("mlp_step"), _b("mlp_step_eager"))
    small = [r for r in d["modules"] if r["only_in"] is None and r["delta_pct"] is not None
             and r["delta_pct"] > 5 and r["delta_ns"] < 1000]
    assert small  # the case: above 5%, under 1 µs
    # THEN check counts them as noise (the 1 µs floor)
    res = {r.name: r for r in evaluate(_b("mlp_step_eager"), load_budgets(
        _yaml(tmp_path, "regression: {max_pct: 5, on: module}\n")), baseline=_b("mlp_step"))}
    r = res[f"regression[step][{small[0]['module']}]"]
    assert r.passed and r.message.endswith("no change beyond noise"), r.message
    # AND depth limits the modules held to the gate (the branches at depth 1: L, L.left, ...)
    res1 = evaluate(_b("branches_2s_forward"), load_budgets(
        _yaml(tmp_path, "regression: {max_pct: 10, on: module, depth: 1}\n")),
        baseline=_b("branches_forward"))
    assert [r.name for r in res1] == ["regression[forward][L]", "regression[forward][L.left]",
                                      "regression[forward][L.right]"]
    # AND on span, the speed-up passes where GPU work per module grew by 11%
    assert not any(r.passed for r in res1)
    res2 = evaluate(_b("branches_2s_forward"), load_budgets(
        _yaml(tmp_path, "regression: {max_pct: 10}\n")), baseline=_b("branches_forward"))
    assert [(r.name, r.passed) for r in res2] == [("regression[forward].span", True)]
    assert res2[0].message.endswith("speed-up")


@pytest.mark.parametrize(("text", "msg"), [
    ("totl: {max_kernels: 1}\n", r"budgets\.yaml:1: unknown key 'totl'"),
    ("total:\n  max_kernel: 1\n", r"budgets\.yaml:2: unknown key 'total\.max_kernel'"),
    ("total: {max_kernels: many}\n", r"budgets\.yaml:1: 'total\.max_kernels' must be int"),
    ("modules:\n  L.x:\n    max_ms: 3\n", r"budgets\.yaml:3: unknown key 'modules\.L\.x\.max_ms'"),
    ("- 1\n", r"budgets\.yaml:1: the top level must be a mapping"),
])
def test_budget_errors_name_file_line_key(tmp_path, text, msg):
    with pytest.raises(ConfigError, match=msg):
        load_budgets(_yaml(tmp_path, text))


def test_junit_is_valid_xml(tmp_path):
    p = _yaml(tmp_path, "total: {max_kernels: 1}\nmin_coverage: {forward: 50}\n")
    xml = junit_xml(evaluate(_b("mlp_step"), load_budgets(p)))
    root = ET.fromstring(xml)
    assert root.tag == "testsuite" and root.get("tests") == "2" and root.get("failures") == "1"
    assert root.find("testcase/failure").get("message").startswith("total: 24 kernels")


def test_diff_same_bundle_is_no_change_and_cli_fail_above(capsys):
    # GIVEN a bundle against itself WHEN diffed with a 0% gate THEN nothing fails
    a = os.path.join(DATA, "mlp_step")
    assert main(["diff", a, a, "--fail-above", "0"]) == 0
    assert "no change beyond noise" in capsys.readouterr().out
    # GIVEN a slower recording of another model in the same graph name WHEN gated on span
    b = os.path.join(DATA, "gpt_step")
    assert main(["diff", a, b, "--fail-above", "5"]) == 1
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("FAIL: span of step ")
    assert main(["diff", b, a, "--fail-above", "5"]) == 0  # the other way: a speed-up


def test_broken_yaml_names_its_line_and_problem(tmp_path):
    from graphscope._errors import ConfigError
    from graphscope.model.yamlfile import read_yaml

    p = tmp_path / "budgets.yaml"
    p.write_text("graphs:\n  step: {critical_path: 1ms\nx: 1\n")
    with pytest.raises(ConfigError) as e:
        read_yaml(str(p), "budget file")
    msg = str(e.value)
    assert msg.startswith(f"{p}: invalid YAML: line ") and "\n" not in msg
    assert "expected ',' or '}'" in msg


def test_report_of_a_file_says_it_is_not_a_bundle(tmp_path):
    from graphscope._errors import BundleError
    from graphscope.model.bundle_io import read_bundle

    f = tmp_path / "README.md"
    f.write_text("x")
    with pytest.raises(BundleError, match="a file, not a bundle directory"):
        read_bundle(str(f))


def test_check_of_a_recorded_bundle_needs_no_gpu(tmp_path):
    """`check BUNDLE --budget` holds a bundle recorded on a GPU to the budgets, no capture: a
    CI machine without a GPU can gate on it."""
    from graphscope.cli.main import main

    src = os.path.join(os.path.dirname(__file__), "..", "data", "mlp_step_eager")
    budgets = tmp_path / "b.yaml"
    budgets.write_text('total:\n  max_time_us: 800\ngraphs:\n  "*":\n'
                       '    max_critical_path_us: 50\neager:\n  min_speedup: 2\n')
    junit = tmp_path / "j.xml"
    assert main(["check", src, "--budget", str(budgets), "--junit", str(junit)]) == 1
    xml = junit.read_text()
    # the budget's critical path is the one report gives (its diagnosis's)
    assert 'name="bundle"' in xml and "critical path 74.5 µs (max 50 µs)" in xml
    budgets.write_text("total:\n  max_time_us: 800\neager:\n  min_speedup: 2\n")
    assert main(["check", src, "--budget", str(budgets)]) == 0
    # --output keeps a captured bundle: refused for a bundle, before anything is written
    assert main(["check", src, "--budget", str(budgets), "-o", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
