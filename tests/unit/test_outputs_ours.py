"""A report page graphscope wrote is a view: ``report --html`` writes it again without
``--force``; a file graphscope did not write is still refused."""

import os

import pytest

from graphscope.cli.main import main
from graphscope.model.outputs import (
    GENERATOR_META,
    OutputError,
    check_output,
    write_output,
    written_by_graphscope,
)
from tests.conftest import DATA


def _report_html(capsys, bundle, out, *extra):
    capsys.readouterr()
    rc = main(["report", os.path.join(DATA, bundle), "--html", str(out), *extra])
    return rc, capsys.readouterr().err


def test_report_html_regenerates_its_own_page(tmp_path, capsys):
    # GIVEN a page graphscope wrote
    out = tmp_path / "r.html"
    assert _report_html(capsys, "mlp_step", out) == (0, "")
    first = out.read_text()
    assert GENERATOR_META in first[:200]
    # WHEN the report is written there again, of another bundle, without --force
    rc, err = _report_html(capsys, "cnn_step", out)
    # THEN it is replaced (a view, not the user's data)
    assert rc == 0, err
    second = out.read_text()
    assert second != first and second.count(GENERATOR_META) == 1


@pytest.mark.parametrize("text", [
    "my notes",
    "<!doctype html>\n<html><head><title>graphscope report</title></head></html>\n",
    "<!doctype html>\n<html><head></head><body>" + "x" * 5000 + GENERATOR_META + "</body>",
], ids=["text", "html-without-mark", "mark-deep-in-the-body"])
def test_a_file_graphscope_did_not_write_is_refused(tmp_path, capsys, text):
    # GIVEN a file of the user's at the output path
    out = tmp_path / "r.html"
    out.write_text(text)
    # WHEN report --html would write there without --force
    rc, err = _report_html(capsys, "mlp_step", out)
    # THEN one line refuses it and the file is untouched
    assert rc == 2 and "already exists" in err and "--force" in err, err
    assert out.read_text() == text
    assert _report_html(capsys, "mlp_step", out, "--force")[0] == 0
    assert written_by_graphscope(str(out))


def test_the_mark_goes_once_into_pages_only(tmp_path):
    page = "<!DOCTYPE html>\n<html>\n<head>\n<title>t</title></head></html>\n"
    write_output(str(tmp_path / "a.html"), page, force=False)
    marked = (tmp_path / "a.html").read_text()
    assert marked.count(GENERATOR_META) == 1 and marked.index(GENERATOR_META) < 64
    write_output(str(tmp_path / "b.html"), marked, force=False)
    assert (tmp_path / "b.html").read_text() == marked  # already marked: unchanged
    write_output(str(tmp_path / "c.json"), '{"a": 1}\n', force=False)
    assert (tmp_path / "c.json").read_text() == '{"a": 1}\n'
    assert check_output(str(tmp_path / "a.html"), force=False) == "atomic"
    with pytest.raises(OutputError, match="already exists"):
        check_output(str(tmp_path / "c.json"), force=False)


def test_dump_run_again_writes_over_its_own_dot_file(tmp_path, monkeypatch, capsys):
    # GIVEN a DOT file dump wrote (no -o: into the current directory), and one of the user's
    from graphscope.cli.main import main

    monkeypatch.chdir(tmp_path)
    bundle = os.path.join(os.path.dirname(__file__), "..", "data", "mlp_step")
    assert main(["dump", bundle]) == 0
    # THEN dump again replaces its own file without --force, and says so
    assert main(["dump", bundle]) == 0
    assert capsys.readouterr().out.count("Wrote ./mlp_step.step.dot") == 2
    # AND a DOT file graphscope did not write is refused, unchanged
    mine = tmp_path / "mlp_step.step.dot"
    mine.write_text("digraph mine {}\n")
    assert main(["dump", bundle]) == 2
    assert mine.read_text() == "digraph mine {}\n"
    assert "is not one graphscope wrote" in capsys.readouterr().err
