"""`graphscope report BUNDLE` in the terminal (graphscope/render/terminal.py and the renderers
it puts together), read through the CLI at a pinned width: what a reader is told about graphs
that were never traced."""

from __future__ import annotations

import os

from click.testing import CliRunner

from graphscope.cli.main import cli
from tests.conftest import DATA


def _report(*args: str, columns: int = 160) -> str:
    r = CliRunner().invoke(cli, ["report", *args], env={"COLUMNS": str(columns)})
    assert r.exit_code == 0, r.output
    return r.output


def test_a_programs_graphs_never_replayed_are_told_apart_from_traced_ones():
    # GIVEN a ladder of 10 buckets whose program never replayed the two largest
    out = _report(os.path.join(DATA, "run_ladder"))
    lines = [" ".join(x.split()) for x in out.splitlines()]
    # THEN the header counts the traced graphs and says the other two were never replayed
    assert lines[1] == ("traced replays: 3, graph work 1.02 ms for one replay of each of the 8 "
                        "traced graphs (2 captured but never replayed)")
    # AND under the diagnosis's details of three graphs, the five more traced ones are
    # counted, and the two never replayed are named as such (not counted among them)
    assert ("(details of 5 more traced graphs: --json; 2 graphs captured but never replayed)"
            in lines)
