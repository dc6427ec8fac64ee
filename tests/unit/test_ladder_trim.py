"""Trimming a bucket ladder: the buckets a serving program captured but never replayed, and
those that run no faster than a larger bucket (which could serve their batches padded), are
named with what dropping them saves, measured from the recording (analysis/ladder.py)."""

from __future__ import annotations

import json
import os

from graphscope.analysis.ladder import NOISE_PCT, trim
from graphscope.cli.main import main

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def _bucket(name, batch, ns, replays=3, capture_s=0.001, segment=0):
    return {"name": name, "batch": batch, "median_ns": ns, "replays": replays,
            "capture_s": capture_s, "instantiate_s": 0.0002, "segment_bytes": segment}


def test_a_ladder_whose_buckets_each_run_faster_than_the_next_has_nothing_to_trim():
    buckets = [_bucket(f"#{i}", b, 50_000 + 10_000 * i) for i, b in enumerate((1, 2, 4, 8))]
    t = trim(buckets, {})
    assert t == {"no_faster": [], "buckets": 0, "segment_bytes": None, "capture_s": None}


def test_a_bucket_no_faster_than_the_next_runs_as_the_next_one_kept():
    # GIVEN [4] no faster than [8], [8] no faster than [16], and [32] never replayed
    buckets = [_bucket("[2]", 2, 40_000), _bucket("[4]", 4, 70_000),
               _bucket("[8]", 8, 69_500), _bucket("[16]", 16, 69_000),
               _bucket("[32]", 32, None, replays=0, segment=4096)]
    t = trim(buckets, {})
    # THEN both are dropped and run as [16], the never-replayed one counted with them, and
    # what they cost is added up
    assert [(x["bucket"], x["into"]) for x in t["no_faster"]] == [("[4]", "[16]"),
                                                                   ("[8]", "[16]")]
    assert t["buckets"] == 3 and t["segment_bytes"] == 4096
    assert t["capture_s"] == round(3 * 0.001 + 3 * 0.0002, 6)


def test_a_difference_inside_the_noise_is_no_faster():
    # GIVEN two buckets 1% apart (under NOISE_PCT), then the same 1% apart with a spread
    # of their replays larger than it
    close = [_bucket("a", 1, 99_000), _bucket("b", 2, 100_000)]
    assert NOISE_PCT > 1.0 and trim(close, {})["no_faster"]
    apart = [_bucket("a", 1, 90_000), _bucket("b", 2, 100_000)]
    assert not trim(apart, {})["no_faster"]
    assert trim(apart, {"b": 20_000.0})["no_faster"]


def test_the_recorded_ladder_names_its_buckets_to_drop_in_the_answer_and_the_json(capsys):
    # GIVEN the recorded 10-bucket ladder (H200): [64] and [96] never replayed, [8] slower
    # than [16], [24] and [32] slower than [48]
    bundle = os.path.join(DATA, "run_ladder")
    assert main(["report", bundle, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (site,) = doc["ladder"]
    times = {b["name"]: b["median_ns"] for b in site["buckets"]}
    # THEN every bucket named runs no faster than the one that would serve it
    for x in site["trim"]["no_faster"]:
        assert times[x["bucket"]] >= times[x["into"]] * (1 - NOISE_PCT / 100)
    assert site["trim"]["buckets"] == 2 + len(site["trim"]["no_faster"])
    (t,) = doc["answer"]["trims"]
    assert sorted(t["never_replayed"]) == ["#0 [96]", "#1 [64]"]
    # AND the answer says it, with what dropping them saves
    assert main(["report", bundle]) == 0
    text = " ".join(capsys.readouterr().out.split("\n\n", 1)[0].split())
    assert "Trim the bucket ladder ladder.py:45: 2 bucket(s) never replayed" in text
    assert "#6 [8] as #5 [16]" in text and "dropping them saves" in text
