"""The ranks section of a multi-rank bundle (analysis/ranks.py) and its terminal and
Markdown views (render/ranks.py), on the recorded two-rank DDP bundle."""

import dataclasses
import io
import json
import os
import statistics

import pytest
from rich.console import Console

from graphscope.analysis import Absent
from graphscope.analysis.diagnosis import diagnose
from graphscope.analysis.ranks import ranks_report
from graphscope.analysis.summary import kernel_rows
from graphscope.model.ranks import read_ranks
from graphscope.render.ranks import markdown, terminal
from tests.conftest import DATA

DDP = os.path.join(DATA, "ddp_mlp_step")


def _section():
    ranks = read_ranks(DDP)
    return ranks, ranks_report(ranks)


def test_totals_per_rank_and_over_all_ranks():
    # GIVEN the two ranks
    ranks, s = _section()
    # THEN each rank's header is its own, and the merged one covers every rank
    for t, (r, b) in zip(s.totals, ranks):
        assert t.rank == r and t.kernel_ns == statistics.median(b.replay_kernel_ns)
        assert t.span_ns == statistics.median(b.replay_span_ns)
    m = s.merged
    assert m.kernel_ns == sum(t.kernel_ns for t in s.totals)
    assert m.step_ns == max(t.span_ns for t in s.totals)
    assert m.max_kernel_rank == 1 and m.kernel_ns > m.max_kernel_ns
    assert m.wait_ns == sum(t.wait_ns for t in s.totals) == sum(s.collectives.wait_per_replay_ns)
    assert s.totals[1].wait_ns > s.totals[0].wait_ns


def test_each_rank_diagnosed_and_its_waits_left_off_its_own_path():
    # GIVEN the two ranks
    ranks, s = _section()
    for d, (r, b) in zip(s.diagnosis, ranks):
        assert d.rank == r
        # THEN each rank carries its own diagnosis
        ref = diagnose(b).graphs[0]
        g = d.graphs[0]
        assert (g.graph, g.span_ns, g.critical_path_ns) == (
            ref.graph, ref.span_ns, ref.critical_path.length_ns)
        assert d.verdicts == diagnose(b).all_verdicts
    # AND rank 1's critical path runs through bucket 0's all-reduce: its own path is shorter by
    # that collective's duration (the median over the replays the diagnosis counts, its cold
    # first one set aside) less its own time (the aligned replays')
    b0 = s.collectives.collectives[0].ranks[1]
    g1 = s.diagnosis[1].graphs[0]
    node = next(n for n in ranks[1][1].graphs[0].nodes if n.exec_node_id == b0.exec_node_id)
    counted_ns = statistics.median(node.durations_ns[1:])
    assert g1.critical_path_ns - g1.own_path_ns == pytest.approx(counted_ns - b0.own_ns,
                                                                 abs=1.0)
    # AND the step rank is the one with the longest own path
    own = {d.rank: d.graphs[0].own_path_ns for d in s.diagnosis}
    assert s.step_rank.rank == max(own, key=own.get) and s.step_rank.waits_removed
    assert s.step_rank.margin_ns == abs(own[0] - own[1])


def test_top_kernels_per_rank_and_buckets_per_rank():
    ranks, s = _section()
    for k, (r, b) in zip(s.top_kernels, ranks):
        assert k.rank == r
        assert [x.kernel for x in k.kernels] == [x["kernel"] for x in kernel_rows(b, 10)]
    assert [(e.rank, [x.bucket for x in e.buckets]) for e in s.ddp] == [(0, [0, 1]), (1, [0, 1])]
    assert s.fsdp == ()


def test_the_section_is_plain_data():
    _, s = _section()
    d = dataclasses.asdict(s)
    assert json.loads(json.dumps(d, allow_nan=False))["world_size"] == 2


def _text(s, width=100):
    c = Console(width=width, file=io.StringIO(), color_system=None)
    c.print(terminal(s))
    return [x.rstrip() for x in c.file.getvalue().splitlines()]


def test_terminal_straggler_table_and_verdict():
    # GIVEN the section WHEN printed at 100 columns
    _, s = _section()
    lines = _text(s)
    # THEN the collectives table shows who waited and who was last, and the verdict says
    # who waits for whom and why
    i = lines.index("Collectives across ranks (median per replay)")
    assert lines[i + 2] == ("┃ collective       ┃ kind       ┃     own ┃ r0 wait ┃ r1 wait ┃ last "
                            "┃ late by ┃")
    assert lines[i + 4] == ("│ step #0 bucket 0 │ all-reduce │ 13.2 µs │    0 ns │ 39.1 µs │   r0 "
                            "│ 39.1 µs │")
    assert lines[i + 5] == ("│ step #1 bucket 1 │ all-reduce │  8.4 µs │  1.1 µs │    0 ns │   r1 "
                            "│  1.1 µs │")
    text = " ".join(x.strip() for x in lines)
    assert ("rank 0 is late to bucket 0's all-reduce by 39.1 µs (median of 3 replays): rank 1 "
            "waits 39.1 µs in it (its own time 13.2 µs).") in text
    assert "it began the replay 39.5 µs later" in text
    assert "Work just before it: L.fc2 (backward)." in text
    assert "Step set by rank 1" in text and "aligned on its end" in text
    assert "│ all 2 │    245.7 µs │ 130.3 µs (max) │" in text


def test_markdown_has_the_verdict_first_and_pipe_tables():
    _, s = _section()
    md = markdown(s).splitlines()
    assert md[0] == "## Ranks" and md[2].startswith("- rank 0 is late to bucket 0's all-reduce")
    i = md.index("### Collectives across ranks (median per replay)")
    assert md[i + 2:i + 6] == [
        "| collective | kind | own | r0 wait | r1 wait | last | late by |",
        "| :--- | :--- | ---: | ---: | ---: | ---: | ---: |",
        "| step #0 bucket 0 | all-reduce | 13.2 µs | 0 ns | 39.1 µs | r0 | 39.1 µs |",
        "| step #1 bucket 1 | all-reduce | 8.4 µs | 1.1 µs | 0 ns | r1 | 1.1 µs |"]
    assert "| L.fc2 | 24.4 µs | 24.6 µs | 1.00 |" in md


def test_ranks_without_collectives_say_so(tmp_path):
    # GIVEN two ranks of a model without DDP (the recorded MLP twice, rank 1's fc2 slower)
    from tests.unit.test_ranks import _two_ranks

    ranks = read_ranks(_two_ranks(tmp_path))
    # WHEN the section is made
    s = ranks_report(ranks)
    # THEN collectives are absent with their reason, no straggler is named, the step rank
    # is the one with the slower fc2 (its paths keep their collectives' waits: none here)
    assert isinstance(s.collectives, Absent) and s.collectives.reason == "no_collectives"
    assert s.stragglers == () and all(t.wait_ns is None for t in s.totals)
    assert s.merged.wait_ns is None
    assert s.step_rank.rank == 1 and not s.step_rank.waits_removed
    text = " ".join(_text(s))
    assert "Collectives not aligned across ranks: no rank's graphs hold a collective kernel." \
        in text
    assert "Collectives across ranks" not in text


def test_one_rank_is_no_alignment():
    ranks = read_ranks(DDP)[:1]
    s = ranks_report(ranks)
    assert s.collectives == Absent("one_rank", s.collectives.detail)
    assert "Collectives not aligned" not in " ".join(_text(s))


def test_the_ranks_tables_fit_80_columns_and_keep_their_text_whole():
    # GIVEN the ranks section of a DDP bundle on an 80-column terminal
    import os
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    r = subprocess.run([sys.executable, "-m", "graphscope", "report",
                        os.path.join(DATA, "ddp_mlp_step")], capture_output=True, text=True,
                       cwd=ROOT, timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    # THEN every line fits, and the per-rank diagnosis keeps its modules whole, under the table
    assert max(len(x) for x in r.stdout.splitlines()) <= 80
    assert "rank 0, step: path's largest modules: (ddp) " in r.stdout
    assert "rank 0, bucket 0: modules: L.fc2, L.head" in r.stdout
    assert "…" not in r.stdout and "│ ste │" not in r.stdout  # nothing cut
