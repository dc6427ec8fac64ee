"""Forged bundles: files whose keys were recomputed by hand so that they pass every digest, with
fields of the wrong type, figures no bundle could hold, names that carry control characters,
and shapes that would make a reader recurse or grow without bound. Every command either
recomputes what it cannot trust or refuses in one line naming the file and the field."""

import json
import os
import shutil

import pytest

from graphscope.cli.main import main
from graphscope.model.bundle_files import (
    DIAGNOSIS_FILE,
    diagnosis_text,
    read_diagnosis,
)
from tests.conftest import DATA
from tests.unit.test_hostile import _one_line_error


def _copy(tmp_path, name="mlp_step", as_name=None):
    dst = tmp_path / (as_name or name)
    shutil.copytree(os.path.join(DATA, name), dst)
    return dst


def _run(capsys, *args):
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _forge_diagnosis(b, change):
    """diagnosis.json changed by ``change`` and keyed again, as anyone can key it."""
    diag = json.loads((b / DIAGNOSIS_FILE).read_text())["diagnosis"]
    change(diag)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest.pop("files")
    (b / DIAGNOSIS_FILE).write_text(diagnosis_text(str(b), manifest, diag))


def _edit_graph(b, change):
    p = b / "graph.json"
    g = json.loads(p.read_text())
    change(g["graphs"])
    p.write_text(json.dumps(g))


# ------------------------------------------------------------ diagnosis.json of the wrong shape
def _set(path, value):
    def change(d):
        *keys, last = path
        for k in keys:
            d = d[k]
        d[last] = value
    return change


def _a_finding(**figures):
    def change(d):
        base = json.loads(json.dumps(d["findings"]["findings"][0]))
        base.update(figures)
        d["findings"]["findings"] = [base]
    return change


_WRONG_SHAPES = {
    "graphs of strings": _set(["graphs"], ["step", "x"]),
    "graphs of ints": _set(["graphs"], [1, 2]),
    "verdicts of strings": _set(["verdicts"], ["host_bound"]),
    "findings of ints": _set(["findings", "findings"], [3]),
    "findings a string": _set(["findings"], "none"),
    "a critical path of a string": lambda d: d["graphs"][0].__setitem__("critical_path", "x"),
    "a replay's span a string": lambda d: d["graphs"][0]["replays"][0].__setitem__(
        "span_ns", "long"),
}


@pytest.mark.parametrize("change", _WRONG_SHAPES.values(), ids=list(_WRONG_SHAPES))
@pytest.mark.parametrize("view", [(), ("--json",), ("--markdown",)], ids=["terminal", "json",
                                                                          "markdown"])
def test_a_keyed_diagnosis_of_the_wrong_shape_is_diagnosed_again(tmp_path, capsys, change,
                                                                   view):
    # GIVEN a bundle whose diagnosis.json holds the wrong types, keyed so that it passes the
    # key check
    b = _copy(tmp_path)
    _forge_diagnosis(b, change)
    # WHEN it is read THEN it is not trusted: the report diagnoses the bundle again
    assert read_diagnosis(str(b)) is None
    rc, out, err = _run(capsys, "report", b, *view)
    assert rc == 0 and err == "", err
    if view == ("--json",):
        graphs = json.loads(out)["diagnosis"]["graphs"]
        assert [g["graph"] for g in graphs] == ["step"]


_ABSURD = {
    "a saving of 1e300 ns": _a_finding(saving_ns=1e300, high_ns=1e300),
    "a saving past the graph's span": _a_finding(saving_ns=10_000_000.0),
    "1e300 kernels": _a_finding(kernels=1e300),
    "more kernels than the graph has": _a_finding(kernels=10_000),
    "evidence of more nodes than the graph has": lambda d: _a_finding()(d) or d["findings"][
        "findings"][0]["evidence"].__setitem__("node_count", 10_000),
    "a finding on a graph the bundle lacks": _a_finding(graph="elsewhere"),
    "20,000 findings": lambda d: d["findings"].__setitem__(
        "findings", d["findings"]["findings"] * 20_000),
    "a span of 1e300 ns": lambda d: d["graphs"][0].__setitem__("span_ns", 1e300),
    "more nodes than the bundle has": lambda d: d["graphs"][0].__setitem__("nodes", 10**15),
    "an idle share over 100%": lambda d: d["graphs"][0].__setitem__("idle_pct", 1e6),
}


@pytest.mark.parametrize("change", _ABSURD.values(), ids=list(_ABSURD))
def test_keyed_figures_no_bundle_could_hold_are_diagnosed_again(tmp_path, capsys, change):
    # GIVEN a bundle with one finding (gpt_step: fusion) whose diagnosis.json was keyed again
    # after a figure was made larger than the bundle's own data allows
    b = _copy(tmp_path, "gpt_step")
    _forge_diagnosis(b, change)
    # WHEN it is read THEN it is not trusted, and the report prints the recomputed figures
    assert read_diagnosis(str(b)) is None
    rc, out, err = _run(capsys, "report", b, "--json")
    assert rc == 0 and err == "", err
    diag = json.loads(out)["diagnosis"]
    assert len(diag["findings"]["findings"]) == 1
    (f,) = diag["findings"]["findings"]
    (g,) = diag["graphs"]
    assert f["graph"] == "step" and f["saving_ns"] <= g["span_ns"] < 1e9
    assert f["kernels"] <= g["work_nodes"] and g["nodes"] == 114


def test_every_committed_diagnosis_passes_the_checks():
    # GIVEN every recorded fixture's kept diagnosis WHEN read THEN every one is trusted (the
    # bounds hold for real data)
    kept = [os.path.join(root) for root, _, files in os.walk(DATA) if DIAGNOSIS_FILE in files]
    assert kept
    assert [p for p in kept if read_diagnosis(p) is None] == []


def test_the_typed_diagnosis_refuses_the_wrong_types_naming_the_field():
    # GIVEN diagnosis JSON of the wrong shape WHEN made typed THEN a one-line BundleError
    # naming the field, never an AttributeError
    from graphscope._errors import BundleError
    from graphscope.analysis.diagnosis.types import Diagnosis, from_json

    with open(os.path.join(DATA, "mlp_step", DIAGNOSIS_FILE)) as f:
        diag = json.load(f)["diagnosis"]
    diag["graphs"] = ["step"]
    with pytest.raises(BundleError, match=r"graphs\[0\] must be an object"):
        from_json(Diagnosis, diag)
    diag["graphs"] = 3
    with pytest.raises(BundleError, match=r"graphs must be a list"):
        from_json(Diagnosis, diag)


# ------------------------------------------------------------------- graph.json what_if_streams
def _what_if(**change):
    def edit(graphs):
        graphs[0]["info"]["what_if_streams"].update(change)
    return edit


_WHAT_IF = {
    "an overflowing median": (_what_if(median_one_stream_ns=1e308), "median_one_stream_ns"),
    "a negative median": (_what_if(median_ns=-100000.0), "median_ns"),
    "a negative span": (_what_if(span_ns=[-1, 5]), "span_ns"),
    "a span that is a string": (_what_if(one_stream_span_ns="fast"), "one_stream_span_ns"),
    "a median that is a string": (_what_if(median_ns="fast"), "median_ns"),
    "a median outside its spans": (_what_if(median_ns=1.0), "median_ns"),
    "streams that are a float": (_what_if(max_streams=2.5), "max_streams"),
    "outputs_equal a string": (_what_if(outputs_equal="yes"), "outputs_equal"),
    "an error that is a number": (_what_if(error=3), "error"),
}


@pytest.mark.parametrize("change,field", _WHAT_IF.values(), ids=list(_WHAT_IF))
@pytest.mark.parametrize("cmd", [("report", "{b}"), ("report", "{b}", "--json"),
                                 ("report", "{b}", "--markdown"), ("diff", "{b}", "{b}")],
                         ids=["report", "json", "markdown", "diff"])
def test_a_malformed_streams_measurement_is_one_line(tmp_path, capsys, change, field, cmd):
    # GIVEN a --try-streams bundle whose measurement was edited
    b = _copy(tmp_path, "try_streams_step")
    _edit_graph(b, change)
    # WHEN any command reads it THEN one line naming the file and the field, exit 2
    rc, out, err = _run(capsys, *[a.format(b=b) for a in cmd])
    _one_line_error(rc, err, "graph.json", f"what_if_streams.{field}")
    assert "Infinity" not in out and "inf%" not in out


# ---------------------------------------------------------------- names that carry control bytes
def test_markdown_cells_carry_no_carriage_return_or_escape(tmp_path, capsys):
    # GIVEN module and graph names with a carriage return, ESC and an OSC 8 hyperlink
    b = _copy(tmp_path)

    def names(graphs):
        graphs[0]["name"] = "step\r| forged \x1b[2J"
        for n in graphs[0]["nodes"]:
            if n.get("type") == "kernel":
                n.setdefault("annotation", {})["module_name"] = "L.\r\x1b]8;;http://x\x07evil"
    _edit_graph(b, names)
    # WHEN written as Markdown
    rc, out, err = _run(capsys, "report", b, "--markdown", "--recompute")
    # THEN no control byte reaches the document and every table row is one line
    assert rc == 0, err
    assert not any(c in out for c in "\r\x1b\x07"), out
    assert "\\x1b" in out
    rows = [line for line in out.splitlines() if line.startswith("|")]
    assert rows and all(line.endswith("|") for line in rows)


def test_the_different_graphs_warning_carries_no_escape(tmp_path, capsys):
    # GIVEN two bundles whose graphs differ, one named with an escape sequence
    a = _copy(tmp_path, as_name="a")
    b = _copy(tmp_path, as_name="b")
    _edit_graph(b, lambda graphs: graphs[0].__setitem__("name", "step\x1b[31mred"))
    for x in (a, b):
        os.remove(x / "summary.json")
        os.remove(x / DIAGNOSIS_FILE)
    # WHEN diffed THEN the warning on stderr names it with the escape shown, not sent
    rc, _, err = _run(capsys, "diff", a, b)
    assert "different graphs" in err
    assert "\x1b" not in err and "\\x1b" in err


# ----------------------------------------------------------------- shapes that grow or recurse
def test_a_module_path_past_the_depth_a_report_shows_is_refused(tmp_path, capsys):
    # GIVEN a node whose module path has 10,000 levels (its prefixes alone: 10,000 rows of up
    # to 20,000 characters)
    b = _copy(tmp_path)
    _edit_graph(b, lambda graphs: graphs[0]["nodes"][0].setdefault("annotation", {}).__setitem__(
        "module_name", ".".join(["m"] * 10_000)))
    # WHEN reported THEN one line naming the file, the node and the field
    rc, _, err = _run(capsys, "report", b)
    _one_line_error(rc, err, "graph.json", "module_name", "10000 levels")


def test_a_module_path_a_model_can_have_is_read(tmp_path, capsys):
    # GIVEN a module path 64 levels deep WHEN reported THEN it is read and its rows shown
    b = _copy(tmp_path)
    _edit_graph(b, lambda graphs: graphs[0]["nodes"][0].setdefault("annotation", {}).__setitem__(
        "module_name", ".".join(["m"] * 64)))
    rc, out, err = _run(capsys, "report", b, "--json", "--depth", "100")
    assert rc == 0, err
    assert max(r["level"] for r in json.loads(out)["modules"]) == 63


def test_a_manifest_nested_past_the_parsers_depth_is_one_line(tmp_path, capsys):
    # GIVEN a manifest of 100,000 nested lists
    b = _copy(tmp_path)
    (b / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    # WHEN reported THEN one line naming the file
    rc, _, err = _run(capsys, "report", b)
    _one_line_error(rc, err, "manifest.json")


@pytest.mark.parametrize("cmd", [("report", "{b}"), ("report", "{b}", "--json"),
                                 ("diff", "{b}", "{ok}"), ("diff", "{ok}", "{b}"),
                                 ("check", "{b}", "--budget", "{budget}")])
def test_a_cyclic_graph_is_refused_on_read(tmp_path, capsys, cmd):
    # GIVEN a bundle whose edges close a cycle (a CUDA graph is acyclic)
    b = _copy(tmp_path)
    _edit_graph(b, lambda graphs: graphs[0]["edges"].append([23, 0]))
    budget = tmp_path / "budget.yaml"
    budget.write_text("total:\n  max_time_us: 1000000\n")
    args = [a.format(b=b, ok=os.path.join(DATA, "mlp_step"), budget=budget) for a in cmd]
    # WHEN any command reads it THEN one line naming the file, the graph and the cycle
    rc, _, err = _run(capsys, *args)
    _one_line_error(rc, err, "graph.json", "step", "cycle")


def test_a_symlink_loop_is_named_as_such(tmp_path, capsys):
    # GIVEN a bundle path that is a symlink to itself
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    # WHEN reported THEN the error says it is a symlink loop, not that nothing is there
    rc, _, err = _run(capsys, "report", loop)
    _one_line_error(rc, err, "symlink loop")
    rc, _, err = _run(capsys, "diff", loop, os.path.join(DATA, "mlp_step"))
    _one_line_error(rc, err, "symlink loop")


def _spec_of(tp):
    """The shape of ``tp``'s JSON form, in bundle_check's spec language."""
    import collections.abc
    import dataclasses
    import typing

    from graphscope.model.bundle_check import _BOOL, _NUM, _SINT, _STR

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        return _spec_of(next(a for a in args if a is not type(None)))
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return {("?" if typing.get_origin(hints[f.name]) is typing.Union else "") + f.name:
                _spec_of(hints[f.name]) for f in dataclasses.fields(tp)}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return [_spec_of(args[0])]
        return tuple(_spec_of(a) for a in args)
    if origin in (collections.abc.Mapping, dict):
        return {"*": _spec_of(args[1])}
    return {int: _SINT, float: _NUM, str: _STR, bool: _BOOL}[tp]


def test_the_kept_diagnosis_spec_is_the_diagnosis_types():
    # GIVEN the typed diagnosis and the spec a kept diagnosis.json is checked against
    from graphscope.analysis.diagnosis.types import Diagnosis
    from graphscope.model.bundle_diagnosis import DIAGNOSIS_SPEC

    # WHEN the types' JSON shape is derived THEN it is the spec, field for field (a field added
    # to the types is added to model/bundle_diagnosis.py too)
    assert DIAGNOSIS_SPEC == _spec_of(Diagnosis)


def test_an_attribute_error_a_check_missed_is_one_line_not_a_traceback(monkeypatch, capsys):
    # GIVEN a reader that fails with an AttributeError (a shape no check caught)
    import graphscope.model.bundle_files as files

    def broken(path):
        raise AttributeError("'str' object has no attribute 'get'")
    monkeypatch.setattr(files, "read_manifest_mode", broken)
    # WHEN a command meets it THEN one line and exit 3 (a bug to report), no traceback
    rc, _, err = _run(capsys, "report", os.path.join(DATA, "mlp_step"))
    lines = err.strip().splitlines()
    assert rc == 3 and len(lines) == 1 and "AttributeError" in lines[0], err
