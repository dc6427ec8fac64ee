"""The HTML report: payload on CPU; the page in a real headless Chromium where installed."""

import json
import os
import re
import shutil
import subprocess

import pytest

from graphscope.bundle import read_bundle
from graphscope.cli.main import main
from graphscope.reports.html import payload, render
from tests.conftest import DATA

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _bundle(name="gpt_step"):
    return read_bundle(os.path.join(DATA, name))


def test_payload_has_tables_and_one_replay_of_events():
    b = _bundle()
    p = payload(b)
    assert p["summary"]["modules"][0]["module"] == "L"
    replay0 = [e for e in b.events if e["replay"] == 0]
    assert len(p["events"]) == len(replay0) > 0
    assert p["events"][0]["t"] == 0 and all(e["d"] >= 0 for e in p["events"])
    assert {e["phase"] for e in p["events"]} == {"forward", "backward"}
    assert any(e["module"] == "L.blocks.0.attn.qkv" and e["op"] for e in p["events"])


def test_page_is_self_contained_and_deterministic():
    html = render(_bundle())
    assert render(_bundle()) == html
    assert not re.search(r"(src|href)=[\"']https?://", html)  # no CDN, no network
    blob = re.search(r'<script id="payload" type="application/json">(.*?)</script>', html, re.S)
    data = json.loads(blob.group(1).replace("<\\/", "</"))
    assert data["title"] == "gpt_step" and data["events"]


def test_cli_writes_html(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", os.path.join(DATA, "mlp_step"), "--html", str(out)]) == 0
    assert out.read_text().startswith("<!doctype html>")
    assert f"Wrote {out}" in capsys.readouterr().out


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_page_draws_in_headless_chromium(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render(_bundle()))
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--window-size=1280,900"]
    dom = subprocess.run(flags + ["--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    m = re.search(r'<div id="status" data-state="(\w+)"(?: data-boxes="(\d+)")?', dom.stdout)
    assert m, dom.stderr[-2000:]
    assert m.group(1) == "ok", dom.stdout[:2000]  # no uncaught error on the page
    n_events = len(payload(_bundle())["events"])
    assert int(m.group(2)) == n_events > 0  # the timeline drew every kernel box
    shot = tmp_path / "report.png"
    subprocess.run(flags + [f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
    keep = os.environ.get("GRAPHSCOPE_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, os.path.join(keep, "report.png"))
