"""`graphscope report BUNDLE` in the terminal (graphscope/render/terminal.py and the renderers
it puts together), read through the CLI at a pinned width: what a reader is told about graphs
that were never traced, and the Eager vs graph section."""

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
    out = _report(os.path.join(DATA, "run_ladder"), "--full")
    # (the answer first, then the header and the tables)
    lines = [" ".join(x.split()) for x in out.split("\n\n", 1)[1].splitlines()]
    # THEN the header counts the traced graphs and says the other two were never replayed
    assert lines[1] == ("traced replays: 3, graph work 1.02 ms for one replay of each of the 8 "
                        "traced graphs (2 captured but never replayed)")
    # AND under the diagnosis's details of three graphs, the five more traced ones are
    # counted, and the two never replayed are named as such (not counted among them)
    assert ("(details of 5 more traced graphs: --json; 2 graphs captured but never replayed)"
            in lines)


# ---------------------------------------------------------------- Eager vs graph
def _table(text: str, title: str) -> tuple[list[str], list[list[str]], list[str]]:
    """(header cells, body rows' cells, the table's lines) of the rich table titled ``title``
    in ``text``; a header's words over several lines joined."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(title))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(("└", "╰")))
    block = lines[start + 1: end + 1]
    split = next(i for i, x in enumerate(block) if x.startswith("┡"))

    def cells(x: str) -> list[str]:
        return [c.strip() for c in x.replace("┃", "│").strip("│").split("│")]

    heads = [cells(x) for x in block[1:split]]
    header = [" ".join(h[k] for h in heads if h[k]) for k in range(len(heads[0]))]
    body = [cells(x) for x in block[split + 1:-1]]
    return header, body, block


def _ns(cell: str) -> float:
    value, unit = cell.lstrip("+-").split()
    return float(value) * {"ns": 1, "µs": 1e3, "ms": 1e6}[unit]


TITLE = "Eager vs graph by module"
ROLLUP = "Eager vs graph, every row summed per module"


def test_eager_rows_come_largest_delta_first_the_rest_counted_and_rolled_up():
    # GIVEN the GPT step with its eager baseline: 56 (module, phase) rows, every Δ under 1.1 µs
    out = _report(os.path.join(DATA, "gpt_step_eager"))
    header, rows, _ = _table(out, TITLE)
    # THEN the 15 rows of largest |Δ| come first, in that order
    assert header == ["module", "phase", "eager", "graph", "Δ", "kernels e/g"]
    deltas = [abs(_ns(r[4])) for r in rows]
    assert len(rows) == 15 and deltas == sorted(deltas, reverse=True)
    assert rows[0][:2] == ["L.blocks.1.mlp.fc", "bwd"] and rows[0][4] == "+1.0 µs"
    # AND a line says how many are left out, how small they are and how to see them
    assert ("41 more rows not shown (|Δ| at most 280 ns each): report --eager-rows 0 shows "
            "every row, --depth N rolls modules up") in out
    # AND every row is summed per module at the depth the module tree fits in 15 rows
    header, rolled, _ = _table(out, ROLLUP + " at --depth 2")
    assert header == ["module", "eager", "graph", "Δ", "kernels e/g"]
    assert [r[0] for r in rolled[:2]] == ["L.blocks.0", "L.blocks.1"]
    assert [r[3] for r in rolled[:2]] == ["+2.5 µs", "+2.4 µs"]
    assert {r[0] for r in rolled} == {"L.blocks.0", "L.blocks.1", "L.drop", "L.tok", "L",
                                      "(loss)", "L.head", "L.ln_f", "L.pos"}


def test_the_roll_up_adds_what_the_analysis_rolls_up_at_that_depth():
    from graphscope.analysis.eager import compare
    from graphscope.model.bundle_files import read_extras, read_manifest_mode
    from graphscope.model.bundle_io import read_bundle
    from graphscope.render.eager import rollup, rollup_depth

    # GIVEN the GPT step's comparison, row by row and as the analysis rolls it up to depth 2
    path = os.path.join(DATA, "gpt_step_eager")
    b, eager = read_bundle(path), read_extras(path, read_manifest_mode(path)).eager
    leaf, at2 = compare(b, eager), compare(b, eager, depth=2)
    # WHEN the terminal rolls the rows up THEN it picks depth 2 and its sums per module are
    # the analysis's rows at depth 2, both phases added
    assert rollup_depth(leaf) == 2
    want: dict[str, list[float]] = {}
    for r in at2["modules"]:
        w = want.setdefault(r["module"], [0.0, 0.0, 0.0])
        w[0] += r["eager_ns"]
        w[1] += r["graph_ns"]
        w[2] += r["graph_kernels"]
    got = {r["module"]: [r["eager_ns"], r["graph_ns"], r["graph_kernels"]]
           for r in rollup(leaf, 2)}
    assert got.keys() == want.keys()
    for m, (e, g, k) in want.items():
        assert abs(got[m][0] - e) < 1e-6 and abs(got[m][1] - g) < 1e-6 and got[m][2] == k


def test_eager_rows_option_shows_more_and_depth_rolls_the_rows_themselves():
    path = os.path.join(DATA, "gpt_step_eager")
    # --eager-rows 0: every row, nothing left out, no roll-up
    out = _report(path, "--eager-rows", "0")
    assert len(_table(out, TITLE)[1]) == 56
    assert "more rows not shown" not in out and ROLLUP not in out
    # --eager-rows 5: five rows, the other 51 counted
    out = _report(path, "--eager-rows", "5")
    assert len(_table(out, TITLE)[1]) == 5 and "51 more rows not shown" in out
    # --eager-rows 1: even the root level has two modules: one shown, the other counted
    out = _report(path, "--eager-rows", "1")
    assert [r[0] for r in _table(out, ROLLUP + " at --depth 0")[1]] == ["L"]
    assert "1 more module (|Δ| at most 327 ns each)" in out
    # --depth 2: the rows are the modules at depth 2 (per phase); no second roll-up, and the
    # line does not offer --depth again
    out = _report(path, "--depth", "2")
    rows = _table(out, TITLE)[1]
    assert len(rows) == 15 and rows[0][:2] == ["L.blocks.1", "bwd"]
    assert ROLLUP not in out
    assert "3 more rows not shown (|Δ| at most 32 ns each): report --eager-rows 0 shows " \
        "every row\n" in out
    # a bad count is refused by the option
    r = CliRunner().invoke(cli, ["report", path, "--eager-rows", "-1"])
    assert r.exit_code == 2 and "--eager-rows" in r.output


def _whole(block: list[str], header: list[str], rows: list[list[str]], width: int) -> None:
    """No line past ``width``, every column with its header and at least one cell."""
    assert all(len(x) <= width for x in block), block
    assert all(header), header
    assert all(any(r[k] for r in rows) for k in range(len(header))), (header, rows)


def test_eager_table_keeps_its_columns_at_80_columns():
    import subprocess
    import sys

    from tests.conftest import ROOT

    for name in ("mlp_step_eager", "gpt_step_eager"):
        # GIVEN COLUMNS=80, through click's runner and through a pipe
        out = _report(os.path.join(DATA, name), columns=80)
        piped = subprocess.run([sys.executable, "-m", "graphscope", "report",
                                os.path.join(DATA, name)], capture_output=True, text=True,
                               cwd=ROOT, env={**os.environ, "COLUMNS": "80"}, check=True).stdout
        for text in (out, piped):
            # THEN the table fits: the last column keeps its header, no column is left empty
            header, rows, block = _table(text, TITLE)
            assert header[-1] == "kernels e/g"
            _whole(block, header, rows, 80)
    header, rows, block = _table(out, ROLLUP)
    _whole(block, header, rows, 80)


def _changed() -> dict:
    """The GPT step's comparison with kernels added and replaced in two of its rows (the
    recorded baselines have none)."""
    import json

    out = _report(os.path.join(DATA, "gpt_step_eager"), "--json")
    cmp = json.loads(out)["eager"]
    by = {(r["module"], r["phase"]): r for r in cmp["modules"]}
    by[("L.blocks.1.mlp.fc", "backward")]["added"] = [
        {"kernel": "triton_poi_fused_add_mul_0", "count": 2, "ns": 900.0}]
    by[("L.drop", "forward")]["replaced"] = [
        {"eager": "vectorized_elementwise_kernel", "graph": "triton_poi_fused_1"}]
    return cmp


def test_kernel_changes_are_a_column_where_there_is_room_and_lines_where_not():
    from rich.console import Console

    from graphscope.render.eager import render_eager

    cmp = _changed()
    # GIVEN a wide terminal THEN the changes are the table's last column
    con = Console(width=160, record=True)
    con.print(render_eager(cmp, width=160))
    header, rows, block = _table(con.export_text(), TITLE)
    assert header[-1] == "added / missing / replaced in the graph"
    assert rows[0][-1] == "+ triton_poi_fused_add_mul_0×2"
    _whole(block, header, rows, 160)
    # GIVEN 80 columns THEN the table keeps its figures whole and the changes are lines below
    con = Console(width=80, record=True)
    con.print(render_eager(cmp, width=80))
    text = con.export_text()
    header, rows, block = _table(text, TITLE)
    assert header[-1] == "kernels e/g"
    _whole(block, header, rows, 80)
    assert ("added (+) / missing (-) / replaced (→) kernels in the graph:\n"
            "  L.blocks.1.mlp.fc bwd: + triton_poi_fused_add_mul_0×2\n"
            "  L.drop fwd: vectorized_elementwise_kernel → triton_poi_fused_1\n") in text


def test_the_report_options_default_is_the_renderers():
    from graphscope.cli.commands.report import DEFAULT_EAGER_ROWS
    from graphscope.render.eager import EAGER_ROWS

    assert DEFAULT_EAGER_ROWS == EAGER_ROWS


def test_one_graphs_span_is_given_once_for_the_replays_the_diagnosis_uses():
    # GIVEN a step graph traced 20 times, 3 of them kept event by event (the diagnosis's)
    path = os.path.join(DATA, "demo", "mlp_step")
    out = _report(path)
    # THEN the header gives graph work over the 20 and leaves the span to the diagnosis, which
    # gives it over the same 20 (idle and gaps over the 3 with events), and says so: one
    # value, 75.7 µs (the 3 with events alone would give 75.6 µs)
    header = out.split("\n\n", 1)[1].splitlines()[1]  # under the answer
    assert header.startswith("replays: 20, graph work") and "span" not in header
    assert ("span, GPU work and critical path from the 20 traced replays; idle, gaps and "
            "launch latency from the 3 whose events were kept") in " ".join(out.split())
    assert "75.7 µs" in out and "75.6 µs" not in out
    # AND without a diagnosis the header gives the span of the 20
    assert "span 75.7 µs" in _report(path, "--no-diagnosis").split("\n\n", 1)[1].splitlines()[1]
    # AND the Markdown view likewise
    md = _report(path, "--markdown")
    assert "span **" not in md.splitlines()[2]


def test_a_gap_that_is_the_next_launch_latency_is_said_to_be_one_interval():
    # GIVEN replays driven back to back by graphscope's loop: each was launched while the one
    # before ran, so its launch latency is measured from that replay's end
    out = " ".join(_report(os.path.join(DATA, "demo", "mlp_step")).split())
    # THEN the gap to the next replay (last node to its first) is said to be its launch latency
    assert ("gap to the next replay 5.6 µs (each replay was launched while the one before ran: "
            "the next replay's launch latency is this gap)") in out
    # AND a program whose replays were not queued has no such remark
    assert "launch latency is this gap" not in _report(os.path.join(DATA, "run_decode"))


def test_a_measured_saving_lies_in_its_own_interval():
    # GIVEN a step whose four-stream version --try-streams measured
    from graphscope.analysis.diagnosis import diagnose
    from graphscope.model.bundle_io import read_bundle

    d = diagnose(read_bundle(os.path.join(DATA, "try_streams_step")))
    f = next(f for f in d.findings.findings if f.kind == "streams")
    # THEN the finding claims the measured saving, its interval the measurement's spread
    assert f.measured_ns is not None and f.low_ns <= f.saving_ns <= f.high_ns
    # AND the prediction's verdict gives way to the measurement's
    codes = [v.code for o in d.graphs for v in o.verdicts]
    assert "streams_measured" in codes and "serialized" not in codes


def test_streams_a_measurement_refuted_are_said_so_not_listed():
    # GIVEN GPT-NeoX's parallel residual, four streams measured slower than one
    out = " ".join(_report(os.path.join(DATA, "whatif_gpt_neox")).split())
    # THEN no streams finding, one line saying why, and no "serialized" verdict beside the
    # measured one
    assert ("findings: streams on forward: the what-if predicted -7%, --try-streams measured "
            "+8%, slower; not listed") in out
    assert "verdict: serialized" not in out and "verdict: measured on 4 stream(s)" in out


def test_a_graph_without_replays_has_no_findings_to_speak_of():
    out = _report(os.path.join(DATA, "run_ladder"), "--graph", "#0")
    assert "findings: none (no timed replays: nothing was measured)" in out
    assert "nothing to gain above noise" not in out


def test_a_suggested_try_captures_the_model_the_bundle_did():
    # GIVEN a step recorded with --entry small
    from graphscope.analysis.diagnosis import diagnose
    from graphscope.model.bundle_io import read_bundle

    d = diagnose(read_bundle(os.path.join(DATA, "try_streams_step")))
    f = next(f for f in d.findings.findings if f.kind == "streams")
    # THEN the command it suggests captures that entry, not the file's default model
    assert f.action.argv == ("graphscope", "capture", "sample_models/branches.py", "--mode",
                             "step", "--entry", "small", "--try-streams", "2")


def test_lists_cut_short_say_how_many_are_left_out():
    from graphscope.analysis.diagnosis import diagnose
    from graphscope.model.bundle_io import read_bundle
    from graphscope.render.diagnosis import finding_text

    def texts(name):
        d = diagnose(read_bundle(os.path.join(DATA, *name.split("/"))))
        return [finding_text(f) for f in d.findings.findings]

    # 8 chains, 3 named
    step = texts("demo/mlp_step")[0]
    assert "keep 8 independent chain(s) on one stream: L.fc1 … (loss) (5 modules)" in step
    assert step.endswith("(2 modules), … 5 more")
    # fusion runs in several regions: each in its own, the first three named
    assert ("follow another each in its region (L.layers.0, L.layers.2, L.layers.3, … 3 more)"
            in texts("whatif_gpt_neox")[0])
