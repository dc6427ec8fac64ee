"""The HTML report of a multi-rank bundle: its ranks section as `report --json` prints it, the
header over every rank, and the per-rank timeline (one lane per rank on one clock, collectives
drawn, the straggler marked), on the recorded two-rank DDP bundle tests/data/ddp_mlp_step."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from graphscope.analysis.page import replay_events
from graphscope.analysis.ranks import ranks_report
from graphscope.cli.main import cli
from graphscope.model.ranks import read_ranks
from tests.unit.test_html import CHROMIUM, DATA, payload
from tests.unit.test_html_views import _open

DDP = os.path.join(DATA, "ddp_mlp_step")


def _payload(path=DDP):
    ranks = read_ranks(path)
    return ranks, payload(ranks[0][1], ranks=ranks)


def test_page_embeds_the_ranks_section_as_report_json_prints_it():
    # GIVEN the two-rank bundle WHEN `report --json` prints its ranks section
    r = CliRunner().invoke(cli, ["report", DDP, "--json"])
    assert r.exit_code == 0, r.output
    # THEN the page embeds that same document
    _, p = _payload()
    assert json.loads(json.dumps(p["ranks"]["section"])) == json.loads(r.output)
    assert p["report"] is None


def test_lanes_locate_each_collective_in_each_ranks_drawn_events():
    ranks, p = _payload()
    section = ranks_report(ranks)
    R = p["ranks"]
    # one lane per rank, each its rank's whole view, all drawing one replay
    assert [(lane["rank"], p["views"][lane["view"]]["label"]) for lane in R["lanes"]] == [
        (0, "rank 0"), (1, "rank 1")]
    assert {lane["replay"] for lane in R["lanes"]} == {0}
    for (_, b), lane in zip(ranks, R["lanes"]):
        _, evs = replay_events(b, 0)
        assert lane["t0_ns"] == evs[0]["start_ns"]
    # each matched collective: its node's event in every lane
    assert len(R["collectives"]) == len(section.collectives.collectives) == 2
    for c, drawn in zip(section.collectives.collectives, R["collectives"]):
        for (_, b), x, k in zip(ranks, c.ranks, drawn["events"]):
            _, evs = replay_events(b, 0)
            assert evs[k]["exec_node_id"] == x.exec_node_id
        assert drawn["label"] in drawn["tip"][0]
    # the straggler: rank 0 late to bucket 0's all-reduce, rank 1 waits
    (s,) = R["stragglers"]
    assert (s["collective"], s["rank"], s["waiting_rank"]) == (0, 0, 1)
    assert s["tip"][0].startswith("rank 0 is late to bucket 0's all-reduce")


def test_lanes_draw_a_replay_every_rank_kept(tmp_path):
    # GIVEN rank 0 kept events of replays 0-2, rank 1 of replays 1-2 only
    path = tmp_path / "ddp"
    shutil.copytree(DDP, path)
    tl = path / "rank1" / "timeline.json"
    t = json.loads(tl.read_text())
    t["events"] = [e for e in t["events"] if e["replay"] != 0]
    tl.write_text(json.dumps(t))
    # THEN every lane draws replay 1, the first both kept
    _, p = _payload(str(path))
    assert [lane["replay"] for lane in p["ranks"]["lanes"]] == [1, 1]
    assert "Drawn: replay 1 of each rank" in p["ranks"]["drawn"]


# the two-rank DDP bundle, and the GPT-2 straggler bundles where recorded
# (bench/record_ranks_fixtures.py on a machine with 2 GPUs)
RECORDED = ["ddp_mlp_step"] + [n for n in ("ddp_gpt2_straggler", "fsdp2_gpt2_straggler")
                               if os.path.isdir(os.path.join(DATA, n))]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
@pytest.mark.parametrize("name", RECORDED)
def test_ranks_timeline_in_chromium(tmp_path, name):
    ranks = read_ranks(os.path.join(DATA, name))
    a = ranks_report(ranks).collectives
    res, data, dom = _open(tmp_path, name)
    assert "Ranks" in res["tabs"]
    got, R = res["ranks"], data["ranks"]
    # one lane per rank, every event of the replay drawn, each collective on each rank
    assert got["lanes"] == len(ranks)
    assert got["boxes"] == sum(len(data["views"][lane["view"]]["events"]["t"])
                               for lane in R["lanes"])
    assert got["collectives"] == sum(k >= 0 for c in R["collectives"] for k in c["events"]) > 0
    assert got["stragglers"] == len(R["stragglers"])
    if name == "ddp_mlp_step":  # rank 0 late to bucket 0's all-reduce: 2 buckets on 2 ranks
        assert (got["collectives"], got["stragglers"]) == (4, 1)
    # the lanes are moved by the section's clock offsets (ddp_mlp_step: rank 1's events lie
    # 419 us early)
    raw = [lane["t0_ns"] + off for lane, off in zip(R["lanes"], a.offsets_ns)]
    assert got["shifts"] == [x - min(raw) for x in raw]
    # so each collective ends on every rank together, within the offsets' spread
    for ends in got["ends"]:
        drawn = [e for e in ends if e is not None]
        assert max(drawn) - min(drawn) <= a.offset_spread_ns + 1
    # hovering a collective shows the section's numbers, worded in Python
    assert R["collectives"][0]["tip"][1] in got["hover"]
    assert got["zoomed"] and got["panned"] and got["reset"]
    assert got["sentences"] == len(R["sentences"]) + 1
    for s in R["stragglers"]:
        assert s["tip"][0].replace("'", "&#39;") in dom.replace("'", "&#39;")
