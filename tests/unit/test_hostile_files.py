"""Hostile input files: each is one line naming the file and the key, exit 2, in under a
second, never a hang, a traceback, the catch-all (exit 3) or a wrong figure."""

import os
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
