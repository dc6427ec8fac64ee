"""What the CLI says, said once and in order: the no-GPU error, the --mode help, lint's
findings."""

import functools
import os
import re

import pytest

from graphscope.cli.main import main
from tests.conftest import ROOT, SAMPLES

MODELS = os.path.join(ROOT, "tests", "lint_models")


def test_the_no_gpu_error_says_it_once(monkeypatch, capsys, tmp_path):
    # GIVEN a machine where PyTorch sees no CUDA GPU
    import torch

    from graphscope import native

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # (loading is cached once it succeeds: a fresh cache, so that this test loads again)
    monkeypatch.setattr(native.loader, "_loaded",
                        functools.cache(native.loader._loaded.__wrapped__))
    # WHEN a command that captures is asked to
    rc = main(["capture", os.path.join(SAMPLES, "mlp.py"), "-o", str(tmp_path / "b")])
    err = capsys.readouterr().err.strip()
    # THEN one line says what is needed once, why, and what works here instead
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.count("NVIDIA GPU") == 1 and err.count("driver") == 1, err
    assert "no CUDA GPU is visible to PyTorch" in err and "annotate-trace" in err


def test_mode_help_is_one_description_per_mode(capsys):
    from graphscope.capture.source import SOURCES

    # GIVEN every capture source's help, WHEN --mode's help is shown
    assert main(["capture", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    # THEN each reads "name: what it captures", with no second label inside
    for name, src in SOURCES.items():
        assert not re.match(r"^[\w-]+:", src.help), (name, src.help)
    assert "forward: one inference graph per input set" in text, text


def _lint_lines(capsys, model):
    main(["lint", model])
    return capsys.readouterr().out.splitlines()


def test_lint_leaves_out_what_it_does_not_know(capsys):
    # GIVEN a finding about the whole model (no module, no line)
    lines = _lint_lines(capsys, os.path.join(SAMPLES, "tiny_kernels.py"))
    # THEN its line names the severity and rule only, with no "-" placeholders
    assert lines[0].rstrip() == "warning no-backward", lines


def test_lint_findings_are_in_line_order(capsys):
    # GIVEN a model with findings on many lines, WHEN linted
    lines = _lint_lines(capsys, os.path.join(MODELS, "bad.py"))
    heads = [x for x in lines if x[:1] not in (" ", "") and not x.startswith("graphscope")]
    placed = [(h.split()[0], int(h.rsplit(":", 1)[1].split()[0])) for h in heads
              if re.search(r"bad\.py:\d+", h)]
    # THEN within a severity, the findings follow the file's lines
    for sev in ("error", "warning"):
        nums = [n for s, n in placed if s == sev]
        assert nums == sorted(nums), (sev, nums)
    # AND the findings about the whole model come after those with a line
    assert heads.index(next(h for h in heads if "buffer-requires-grad" in h)) > max(
        heads.index(h) for h in heads if h.startswith("warning") and "bad.py:" in h)


@pytest.mark.parametrize("source,key", [("a.py:9 (f)", (0, "a.py", 9)),
                                        ("a.py:15", (0, "a.py", 15)), (None, (1, "", 0))])
def test_line_order_key(source, key):
    from graphscope.capture.lint import _line_order

    assert _line_order(source) == key
