"""One report object, many views: the JSON `report --json` prints, the report the HTML page
embeds and the Markdown view are the same :class:`~graphscope.analysis.report.Report`."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt

from graphscope.analysis import Absent
from graphscope.analysis.document import report_json
from graphscope.analysis.report import Report, ReportOptions, build_report
from graphscope.cli.main import cli
from graphscope.model.bundle_files import read_extras, read_manifest_mode, read_summary
from graphscope.model.bundle_io import read_bundle
from graphscope.render.fmt import fmt_ns
from graphscope.render.markdown import report_markdown
from tests.conftest import fixture_bundles
from tests.unit.test_html import payload

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
BUNDLES = sorted(os.path.relpath(p, DATA) for p in fixture_bundles()
                 if os.path.isfile(os.path.join(p, "manifest.json")) and "/rank" not in p)


def _report(name: str) -> tuple[Report, object]:
    path = os.path.join(DATA, name)
    extras = read_extras(path, read_manifest_mode(path))
    b = read_bundle(path)
    return build_report(b, extras, ReportOptions()), (b, extras)


@pytest.mark.parametrize("name", BUNDLES)
def test_json_html_and_markdown_render_one_report(name):
    # GIVEN a recorded bundle WHEN its report is printed as JSON by the command
    r = CliRunner().invoke(cli, ["report", os.path.join(DATA, name), "--json"])
    assert r.exit_code == 0, r.output
    printed = json.loads(r.output)
    # THEN the page embeds that same document
    rep, (b, extras) = _report(name)
    embedded = json.loads(json.dumps(payload(b, extras=extras)["report"]))
    assert embedded == printed
    # AND the Markdown view (rendered by a Markdown library, not by us) shows its numbers
    html = MarkdownIt("commonmark").enable("table").render(report_markdown(rep, name))
    assert f"{printed['work_nodes']}</strong> work nodes" in html
    if printed["replays"]:
        assert fmt_ns(printed["replay_kernel_median_ns"]) in html
    for o in (printed.get("diagnosis") or {}).get("graphs", [])[:10]:
        if o.get("timed") and "error" not in o:
            assert f"<td>{o['graph']}</td>" in html.replace("&quot;", '"')
            assert fmt_ns(o["span_ns"]) in html
    assert html.count("<table>") >= 2


def test_summary_json_and_recomputed_tables_build_the_same_report():
    # GIVEN a bundle whose summary.json is current
    path = os.path.join(DATA, "mlp_step")
    extras = read_extras(path, read_manifest_mode(path))
    b = read_bundle(path)
    summary = read_summary(path)
    assert summary is not None
    # WHEN built from it and from the nodes THEN the documents agree
    assert report_json(build_report(b, extras, summary=summary)) == report_json(
        build_report(b, extras))


def test_a_section_that_does_not_apply_says_why():
    # GIVEN a forward bundle with no eager baseline, counters or memory facts
    rep, _ = _report("branches_forward")
    doc = report_json(rep)
    # THEN each absent section is named with its reason, and has no key of its own
    assert isinstance(rep.eager, Absent)
    assert doc["absent"]["eager"]["reason"] == "no_eager_baseline"
    assert "eager" not in doc and "counters" not in doc
    # AND the page has no eager tab
    assert "eager" not in payload(read_bundle(os.path.join(DATA, "branches_forward")))["report"]


def test_markdown_cells_cannot_break_the_table():
    from graphscope.render.markdown import table

    rows = table(("name", "t"), [("a|b\nc", 1)])
    html = MarkdownIt("commonmark").enable("table").render("\n".join(rows))
    assert html.count("<td>") == 2 and "a|b c" in html
