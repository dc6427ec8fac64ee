"""Every fixture's `report`, `report --json`, `dump --dot` and `dump --trace` output (and a few
`diff`s) is the one recorded in tests/data/golden/outputs.json (sha256 of stdout and stderr, the
exit code, and the error line where the command fails).

A refactor must keep these green. An intended change of output is accepted by regenerating:

    .venv/bin/python tests/unit/test_outputs_unchanged.py --regenerate

and the diff of outputs.json shows which (fixture, command) pairs changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import pytest
from click.testing import CliRunner

from graphscope._errors import GraphscopeError
from graphscope.cli.main import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join("tests", "data")
GOLDEN = os.path.join(ROOT, DATA, "golden", "outputs.json")
WIDTH = 120  # rich reads COLUMNS: the tables are pinned to this width

COMMANDS = {
    "report": ["report"],
    "report --recompute": ["report", "--recompute"],
    "report --json": ["report", "--json"],
    "report --json --recompute": ["report", "--json", "--recompute"],
    "dump --dot": ["dump", "--dot", "-o", "-"],
    "dump --trace": ["dump", "--trace", "-o", "-"],
}


# (bundle A, bundle B, options) of `graphscope diff`
DIFFS = [
    ("mlp_step", "marked_step", ()),
    ("gpt_step", "gpt_step", ("--fail-above", "1")),
    ("mlp_step", "cnn_step", ("--depth", "1")),
    ("ddp_mlp_step/rank0", "ddp_mlp_step/rank1", ("--json",)),
]


def bundles() -> list[str]:
    """Every bundle under tests/data (relative to the repository root): single-rank bundles,
    each rank of a multi-rank bundle, the multi-rank bundle itself, and the bundles of a
    folder of bundles."""
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, DATA))):
        p = os.path.join(DATA, name)
        if os.path.isfile(os.path.join(ROOT, p, "manifest.json")):
            out.append(p)
        elif os.path.isdir(os.path.join(ROOT, p)):
            ranks = sorted(r for r in os.listdir(os.path.join(ROOT, p)) if r.startswith("rank"))
            if ranks:
                out.append(p)
                out += [os.path.join(p, r) for r in ranks]
            else:  # a folder of bundles (tests/data/demo)
                out += [os.path.join(p, b) for b in sorted(os.listdir(os.path.join(ROOT, p)))
                        if os.path.isfile(os.path.join(ROOT, p, b, "manifest.json"))]
    return out


def _digest(data: bytes) -> str:
    """sha256 of an output, with the fixtures' location made neutral (bundle paths are
    resolved, so they would differ between checkouts). Only the fixture folder is replaced:
    paths recorded inside the bundles (the recording machine's) stay as they are, whatever
    folder this checkout sits in."""
    return hashlib.sha256(data.replace(os.path.join(ROOT, DATA).encode(), b"<DATA>")).hexdigest()


def run_one(bundle: str, command: str) -> dict[str, object]:
    """One command on one bundle through click's CliRunner, from the repository root."""
    return _invoke([*COMMANDS[command][:1], bundle, *COMMANDS[command][1:]])


def _diff_key(a: str, b: str, opts: tuple[str, ...]) -> str:
    return " ".join(["diff", os.path.join(DATA, a), os.path.join(DATA, b), *opts])


def run_diff(a: str, b: str, opts: tuple[str, ...]) -> dict[str, object]:
    return _invoke(_diff_key(a, b, opts).split(" "))


def _invoke(argv: list[str]) -> dict[str, object]:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        r = CliRunner(env={"COLUMNS": str(WIDTH), "LINES": "50", "NO_COLOR": "1",
                           "TERM": "dumb"}).invoke(cli, argv, terminal_width=WIDTH)
    finally:
        os.chdir(cwd)
    out: dict[str, object] = {"exit": r.exit_code, "stdout": _digest(r.stdout_bytes),
                              "stderr": _digest(r.stderr_bytes or b"")}
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        if not isinstance(r.exception, GraphscopeError):
            raise r.exception
        # what `graphscope` prints as its one error line
        out["error"] = f"{type(r.exception).__name__}: {r.exception}".replace(ROOT, "<ROOT>")
    return out


def record() -> dict[str, dict[str, object]]:
    out = {f"{b} :: {c}": run_one(b, c) for b in bundles() for c in COMMANDS}
    out.update({_diff_key(a, b, o): run_diff(a, b, o) for a, b, o in DIFFS})
    return out


def _golden() -> dict[str, dict[str, object]]:
    with open(GOLDEN, encoding="utf-8") as f:
        data: dict[str, dict[str, object]] = json.load(f)
    return data


CASES = [(b, c) for b in bundles() for c in COMMANDS]


def test_golden_covers_every_fixture_and_command():
    # GIVEN the recorded golden set WHEN listing the bundles THEN each pair has an entry
    assert set(_golden()) == ({f"{b} :: {c}" for b, c in CASES}
                              | {_diff_key(a, b, o) for a, b, o in DIFFS})


@pytest.mark.parametrize(("bundle", "command"), CASES, ids=[f"{b}::{c}" for b, c in CASES])
def test_output_unchanged(bundle, command):
    # GIVEN a fixture bundle WHEN the command runs THEN its bytes are the recorded ones
    want = _golden()[f"{bundle} :: {command}"]
    assert run_one(bundle, command) == want


@pytest.mark.parametrize(("a", "b", "opts"), DIFFS)
def test_diff_unchanged(a, b, opts):
    # GIVEN two fixture bundles WHEN diffed THEN the output is the recorded one
    assert run_diff(a, b, opts) == _golden()[_diff_key(a, b, opts)]


def test_check_table_lines(tmp_path):
    # GIVEN budgets that pass and fail on a fixture WHEN `graphscope check`'s table is drawn
    # (its capture needs a GPU; the table does not) THEN the rows are these, at a pinned width
    from rich.console import Console

    from graphscope.analysis.budgets import CheckResult, evaluate, load_budgets
    from graphscope.model.bundle_io import read_bundle
    from graphscope.render.gate import check_results_table

    p = tmp_path / "budgets.yaml"
    p.write_text("total: {max_kernels: 10}\nmodules:\n  \"L.nope*\": {max_kernels: 1}\n")
    results = [CheckResult("capture", True, None, None, "captured b")]
    results += evaluate(read_bundle(os.path.join(ROOT, DATA, "gpt_step")), load_budgets(str(p)))
    con = Console(width=WIDTH, record=True, color_system=None)
    con.print(check_results_table(results))
    lines = [line.rstrip() for line in con.export_text().splitlines()]
    assert lines[0] == "graphscope check (failures first)"
    assert lines[1:] == [
        "┏━━━━━━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓",
        "┃ check            ┃ result ┃ detail                      ┃",
        "┡━━━━━━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩",
        "│ total.kernels    │ FAIL   │ total: 114 kernels (max 10) │",
        "│ modules[L.nope*] │ FAIL   │ no module matches 'L.nope*' │",
        "│ capture          │ pass   │ captured b                  │",
        "└──────────────────┴────────┴─────────────────────────────┘",
    ]


def test_a_changed_output_is_caught(monkeypatch):
    # GIVEN the golden digest of a report WHEN the output gains one character THEN it differs
    bundle = os.path.join(DATA, "mlp_step")
    import graphscope.cli.commands.report as report_cmd

    real = report_cmd.json.dumps
    monkeypatch.setattr(report_cmd.json, "dumps", lambda *a, **k: real(*a, **k) + " ")
    assert run_one(bundle, "report --json") != _golden()[f"{bundle} :: report --json"]


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit("usage: tests/unit/test_outputs_unchanged.py --regenerate")
    os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
    with open(GOLDEN, "w", encoding="utf-8") as f:
        json.dump(record(), f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"Wrote {GOLDEN}")
