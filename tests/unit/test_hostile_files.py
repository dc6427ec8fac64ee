"""Hostile input files: each is one line naming the file and the key, exit 2, in under a
second, never a hang, a traceback, the catch-all (exit 3) or a wrong figure."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from graphscope.cli.main import main
from tests.conftest import DATA, ROOT, SAMPLES

SECOND = 1.0


def _one_line_error(rc, err, *needles):
    assert rc == 2, err
    lines = [x for x in err.strip().splitlines() if x]
    assert len(lines) == 1 and lines[0].startswith("graphscope: error: "), err
    for n in needles:
        assert n in lines[0], err
    return lines[0]


def _timed(capsys, *args):
    capsys.readouterr()
    t = time.perf_counter()
    rc = main(list(args))
    took = time.perf_counter() - t
    out, err = capsys.readouterr()
    return rc, out, err, took


# ------------------------------------------------------------------------------ YAML aliases
def _alias_bomb(path, levels=9, width=9):
    """The "billion laughs": each level a list of ``width`` aliases of the one before (342
    bytes for 9 x 9: 9^9 leaves once expanded)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for c in "bcdefghijklmnop"[:levels - 1]:
        lines.append(f"{c}: &{c} [" + ",".join([f"*{prev}"] * width) + "]")
        prev = c
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("args", [
    ("check", "{bundle}", "--budget", "{yaml}"),
    ("check", "{model}", "--budget", "{yaml}"),
    ("run", "--config", "{yaml}", "{program}"),
    ("capture", "--config", "{yaml}", "{model}"),
], ids=["check-bundle", "check-model", "run-config", "capture-config"])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, args):
    # GIVEN a 342-byte YAML file whose aliases stand for 387 million values
    bomb = _alias_bomb(tmp_path / "bomb.yaml")
    argv = [a.format(bundle=os.path.join(DATA, "mlp_step"), yaml=bomb,
                     model=os.path.join(SAMPLES, "mlp.py"),
                     program=os.path.join(SAMPLES, "programs", "compiled.py")) for a in args]
    # WHEN a command reads it (in a child: without the bound it never ends)
    p = subprocess.run([sys.executable, "-m", "graphscope", *argv], capture_output=True,
                       text=True, cwd=ROOT, timeout=30, check=False)
    # THEN one line names the file, the line and the key, and nothing ran
    line = _one_line_error(p.returncode, p.stderr, f"{bomb}:", "aliases expand",
                           "at 'f'")
    assert p.stdout == "", (p.stdout, line)


def test_reading_an_alias_bomb_takes_under_a_second(tmp_path):
    import threading

    from graphscope._errors import ConfigError
    from graphscope.model.yamlfile import read_yaml

    bomb = _alias_bomb(tmp_path / "bomb.yaml", levels=12)  # 9^12 values
    got = []

    def read():
        try:
            read_yaml(bomb, "budgets")
        except ConfigError as exc:
            got.append(str(exc))

    # a daemon thread: were the read unbounded, the test fails here instead of hanging
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(SECOND)
    assert not reader.is_alive(), "still reading after a second"
    assert got and "aliases expand" in got[0], got


def test_aliases_within_the_bound_are_read_and_checked_once(tmp_path):
    from graphscope._errors import ConfigError
    from graphscope.model.yamlfile import read_yaml

    # GIVEN a file whose anchors are shared (each node walked once), under the bound
    ok = _alias_bomb(tmp_path / "ok.yaml", levels=4, width=9)  # 9^4 values
    _, data = read_yaml(ok, "budgets")
    assert len(data["d"]) == 9 and data["d"][0][0][0][0] == "lol"
    # AND a duplicate key inside a shared anchor is still found, with its path
    dup = tmp_path / "dup.yaml"
    dup.write_text("base: &b {x: 1, y: 2, x: 3}\nuse: [*b, *b, *b]\n")
    with pytest.raises(ConfigError, match=r"dup.yaml:1: duplicate key 'base.x'"):
        read_yaml(str(dup), "budgets")


def test_a_recursive_alias_is_one_line(tmp_path, capsys):
    rec = tmp_path / "rec.yaml"
    rec.write_text("total: {max_kernels: 3}\nloop: &x [1, [2, *x]]\n")
    rc, _, err, took = _timed(capsys, "check", os.path.join(DATA, "mlp_step"), "--budget",
                              str(rec))
    _one_line_error(rc, err, f"{rec}:2:", "recursive")
    assert took < SECOND


def test_yaml_nested_past_the_parsers_depth_is_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.yaml"
    deep.write_text("total: " + "[" * 5000 + "]" * 5000 + "\n")
    rc, _, err, _ = _timed(capsys, "check", os.path.join(DATA, "mlp_step"), "--budget",
                           str(deep))
    _one_line_error(rc, err, f"{deep}:", "nested too deeply")


# ------------------------------------------------------------------------------ bundle files
def _copy(tmp_path, name):
    dst = tmp_path / name
    shutil.copytree(os.path.join(DATA, name), dst)
    return dst


def _edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _counters_bundle(tmp_path):
    from tests.unit.test_counters import _bundle_with_counters

    path, _ = _bundle_with_counters(tmp_path)
    return tmp_path / "mlp_step"


def _set_col(col, value, replace_all=False):
    def change(d):
        vals = d["nodes"][col] if "." not in col else d["nodes"]["quantity"][col.split(".")[1]]
        for i in range(len(vals) if replace_all else 1):
            vals[i] = value
    return change


READERS = [("report", "{b}"), ("report", "{b}", "--html", "{out}"), ("diff", "{b}", "{b}")]


@pytest.mark.parametrize("change,key", [
    (_set_col("time_ns", 1e308, replace_all=True), "nodes.time_ns[0]"),
    (_set_col("time_ns", 1e308), "nodes.time_ns[0]"),
    (_set_col("time_ns", -13000.0), "nodes.time_ns[0]"),
    (_set_col("shared_ns", True), "nodes.shared_ns[0]"),
    (_set_col("quantity.dram_pct", "high"), "nodes.quantity.dram_pct[0]"),
    (lambda d: d.update(replays=-4), "'replays'"),
    (lambda d: d.update(replays="4"), "'replays'"),
    (lambda d: d.update(replays=0), "'replays'"),
    (lambda d: d.update(interval_ns=-1000), "'interval_ns'"),
    (lambda d: d.update(peak_dram_GBps=1e300), "'peak_dram_GBps'"),
], ids=["time-1e308-all", "time-1e308", "time-negative", "shared-bool", "quantity-text",
        "replays-negative", "replays-text", "replays-zero", "interval-negative", "peak-1e300"])
@pytest.mark.parametrize("reader", READERS, ids=["report", "report-html", "diff"])
def test_counters_out_of_range_are_one_line(tmp_path, capsys, change, key, reader):
    # GIVEN a counters.json with a figure no sampling can give
    b = _counters_bundle(tmp_path)
    _edit_json(b / "counters.json", change)
    # WHEN the report, the page or the diff reads it
    rc, out, err, took = _timed(capsys, *[a.format(b=b, out=tmp_path / "r.html")
                                          for a in reader])
    # THEN one line names the file and the key (not an OverflowError, not a wrong figure)
    _one_line_error(rc, err, "counters.json", key)
    assert out == "" and took < SECOND and not (tmp_path / "r.html").exists()


def test_event_ending_past_int64_is_refused(tmp_path, capsys):
    # GIVEN kept replay events whose start plus duration passes int64's largest value
    b = _copy(tmp_path, "mlp_step")

    def past_the_end(t):
        for e in t["events"]:
            e["start_ns"] = (1 << 63) - 1 - 10
    _edit_json(b / "timeline.json", past_the_end)
    # WHEN the diagnosis would read them, THEN one line, no "-9223372036854775808 ns" span
    for args in (("report", str(b)), ("report", str(b), "--json"),
                 ("dump", str(b), "--trace", "-o", str(tmp_path / "t.json"))):
        rc, out, err, took = _timed(capsys, *args)
        _one_line_error(rc, err, "timeline.json", "events[0]", "start_ns", "dur_ns")
        assert "-9223372036854775808" not in out and took < SECOND


def test_event_longer_than_any_node_runs_is_refused(tmp_path, capsys):
    b = _copy(tmp_path, "mlp_step")
    _edit_json(b / "timeline.json", lambda t: t["events"][3].update(dur_ns=1 << 50))
    rc, _, err, _ = _timed(capsys, "report", str(b))
    _one_line_error(rc, err, "timeline.json", "events[3].dur_ns")


def _first_info(change):
    def edit(g):
        change(g["graphs"][0]["info"])
    return edit


def _first_module(field, value):
    def change(info):
        info[field][next(iter(info[field]))] = value
    return change


@pytest.mark.parametrize("change,key", [
    (_first_module("memory_by_module", [-4096, 0]), "info.memory_by_module['L.blocks.0'][0]"),
    (_first_module("memory_by_module", ["1 MB", 0]), "info.memory_by_module['L.blocks.0'][0]"),
    (_first_module("memory_by_module", [1]), "info.memory_by_module['L.blocks.0']"),
    (lambda i: i.update(capture_peak_bytes=int(1.5e51) << 30), "info.capture_peak_bytes"),
    (lambda i: i.update(capture_alloc_bytes="lots"), "info.capture_alloc_bytes"),
    (lambda i: i.update(static_input_bytes=-8), "info.static_input_bytes"),
    (lambda i: i.update(capture_reserved_bytes=1.5), "info.capture_reserved_bytes"),
    (lambda i: i.update(capture_s="slow"), "info.capture_s"),
    (lambda i: i.update(instantiate_s=1e12), "info.instantiate_s"),
    (_first_module("capture_by_module_s", -1.0), "info.capture_by_module_s["),
], ids=["module-negative", "module-text", "module-short", "peak-1.5e51-GiB", "alloc-text",
        "static-negative", "reserved-float", "capture-s-text", "instantiate-1e12",
        "module-seconds-negative"])
def test_memory_facts_out_of_range_are_one_line(tmp_path, capsys, change, key):
    # GIVEN a run bundle whose recorded memory facts no capture can give
    b = _copy(tmp_path, "run_ladder")
    _edit_json(b / "graph.json", _first_info(change))
    # WHEN it is reported, THEN one line names the file, the graph and the key (exit 2,
    # not the catch-all's 3, and no "1.5e51 GiB")
    for args in (("report", str(b)), ("report", str(b), "--json")):
        rc, out, err, took = _timed(capsys, *args)
        _one_line_error(rc, err, "graph.json", "ladder.py:45 #0 [96]", key)
        assert out == "" and took < SECOND


def test_a_manifests_capture_time_is_checked(tmp_path, capsys):
    b = _copy(tmp_path, "mlp_callables")
    _edit_json(b / "manifest.json", lambda m: m.update(capture_s=-0.5))
    rc, _, err, _ = _timed(capsys, "report", str(b))
    _one_line_error(rc, err, "manifest.json", "capture_s")


@pytest.mark.parametrize("change,key", [
    (lambda d: d.update(graph_wall_ns=[], eager_wall_ns=[], eager_gpu_ns=[]), "graph_wall_ns"),
    (lambda d: d.update(eager_gpu_ns=d["eager_gpu_ns"][:2]), "eager_gpu_ns"),
    (lambda d: d.update(runs=0), "'runs'"),
    (lambda d: d["kernels"][0].update(ns=-5), "'kernels[0].ns'"),
    (lambda d: d.pop("mode"), "'mode' is missing"),
], ids=["no-runs-timed", "fewer-gpu-times", "zero-runs", "negative-kernel", "no-mode"])
def test_a_malformed_eager_baseline_is_one_line_naming_the_key(tmp_path, capsys, change, key):
    # GIVEN an eager.json whose runs were not all timed (runs: 4, empty lists)
    b = _copy(tmp_path, "mlp_step_eager")
    _edit_json(b / "eager.json", change)
    # WHEN it is reported or checked, THEN refused naming the key, not "eager 0 ns vs 0 ns"
    for args in (("report", str(b)), ("report", str(b), "--json"), ("report", str(b), "--html",
                                                                   str(tmp_path / "r.html"))):
        rc, out, err, took = _timed(capsys, *args)
        _one_line_error(rc, err, "eager.json", key)
        assert "saved 0 ns" not in out and took < SECOND
