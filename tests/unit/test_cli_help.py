"""The help a user reads first: `graphscope --help` lists every command with its whole summary
at any width, each command's help fits 80 columns, and the summaries say what each command
takes and how the commands differ."""

import importlib
import re

import pytest
from click.testing import CliRunner

from graphscope.cli.commands import COMMANDS
from graphscope.cli.main import cli


def _help(args, width):
    """The help text of ``graphscope ARGS`` at a terminal ``width`` columns wide."""
    r = CliRunner().invoke(cli, [*args, "--help"], env={"COLUMNS": str(width)},
                           terminal_width=width)
    assert r.exit_code == 0, r.output
    return r.output


def _command_rows(text):
    """``{name: summary}`` of the Commands section (a summary wrapped over several lines is
    joined)."""
    rows, name = {}, None
    for line in text.split("Commands:\n", 1)[1].splitlines():
        m = re.match(r"^  (\S+)\s{2,}(.*)$", line)
        if m:
            name = m.group(1)
            rows[name] = m.group(2).strip()
        elif name and line.strip():
            rows[name] += " " + line.strip()
    return rows


@pytest.mark.parametrize("width", [50, 80, 120])
def test_every_command_is_listed_with_its_whole_summary(width):
    # GIVEN a terminal of this width
    # WHEN the command list is shown
    rows = _command_rows(_help([], width))
    # THEN every command is there, and no summary is cut short with "..."
    assert sorted(rows) == sorted(COMMANDS)
    cut = {n: s for n, s in rows.items() if s.endswith("...")}
    assert not cut, cut
    # AND each is the summary the registry holds
    assert rows == {n: COMMANDS[n][2] for n in COMMANDS}


def test_every_summary_fits_one_line_at_80_columns():
    # GIVEN the command list at 80 columns
    text = _help([], 80)
    # WHEN its rows are read line by line
    listed = text.split("Commands:\n", 1)[1].splitlines()
    # THEN each command takes one line, that line inside 80 columns
    assert len([ln for ln in listed if ln.strip()]) == len(COMMANDS), listed
    assert all(len(ln) <= 80 for ln in listed), listed


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_help_fits_80_columns(name):
    # GIVEN a terminal 80 columns wide
    # WHEN the command's help is shown
    text = _help([name], 80)
    # THEN no line is wider than the terminal
    wide = [ln for ln in text.splitlines() if len(ln) > 80]
    assert not wide, wide


def _summary(name):
    return COMMANDS[name][2]


def _doc(name):
    module, attr, _ = COMMANDS[name]
    return " ".join(getattr(importlib.import_module(module), attr).help.split())


def test_check_says_it_takes_a_model_file_or_a_recorded_bundle():
    # GIVEN check's summary, WHEN read, THEN it names both inputs README gives it, and budgets
    s = _summary("check")
    assert "model file" in s and "bundle" in s and "budgets" in s, s


def test_annotate_says_how_it_differs_from_capture():
    # GIVEN annotate's help, WHEN read, THEN it says it times nothing and when capture serves
    doc = _doc("annotate")
    assert "no replays" in doc and "capture" in doc and "annotate-trace" in doc, doc


def test_report_help_names_its_findings():
    # GIVEN report's help, WHEN read, THEN it says the report ends in what to do next
    assert "What to do next" in _doc("report")
    assert "what to do next" in _summary("report").lower()
