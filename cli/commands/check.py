"""graphscope check: capture and replay a model, then hold it to a budgets YAML (for CI).

Exit codes: 0 every budget passed, 1 a budget failed, 2 could not run.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Optional

import click

from ..options import (
    command,
    force_option,
    gate_options,
    json_option,
    link_option,
    markdown_option,
    model_argument,
    one_document,
    output_option,
)


def _write(path: str, text: str, force: bool) -> None:
    from graphscope.model.outputs import write_output

    write_output(path, text, force=force, what="JUnit XML")


@command()
@model_argument
@click.option("--budget", "budget_path", required=True, type=click.Path(),
              help="budgets.yaml (format: docs/gates.md; graphscope/analysis/budgets.py).")
@click.option("--baseline", type=click.Path(), default=None,
              help="A bundle to measure regressions against.")
@click.option("--junit", type=click.Path(), default=None,
              help="Write JUnit XML here ('-': stdout, and the table goes to stderr).")
@gate_options(None, where=" (against --baseline; before the budgets file's regression)")
@output_option("Keep the captured bundle here (default: a temporary directory).")
@json_option("Print the results as JSON.")
@markdown_option
@link_option
@force_option("Replace an existing --junit file and --output bundle.")
def check(model: Optional[str], budget_path: str, baseline: Optional[str],
          junit: Optional[str], fail_above: Optional[float], on: Optional[str],
          noise_pct: Optional[float], output: Optional[str], as_json: bool, markdown: bool,
          link: Optional[str], force: bool) -> int:
    """Check a model file or a recorded bundle against budgets.

    A model file is captured and replayed first (this runs the code in MODEL). A bundle
    directory (recorded on a GPU earlier) is checked as it is, without capturing, so that a
    CI machine without a GPU can hold it to the budgets.

    Exit codes: 0 every budget passed, 1 a budget failed, 2 could not run."""

    from graphscope._errors import ConfigError, GraphscopeError
    from graphscope.analysis.budgets import CheckResult
    from graphscope.capture.config import merge
    from graphscope.model.bundle_io import read_bundle
    from graphscope.model.outputs import check_bundle_output, check_output, one_stdout_document
    from graphscope.render.junit import junit_xml

    from ._run import run

    one_document(as_json, markdown)
    inputs = [x for x in (baseline, budget_path, model) if x]
    if junit:  # refused before the capture runs, not after
        one_stdout_document({"--junit": junit}, json_on_stdout=as_json or markdown)
        check_output(junit, force=force, inputs=inputs, what="JUnit XML")
    if output:
        check_bundle_output(output, force=force, inputs=inputs)
    budgets = _budgets(budget_path, fail_above, on, noise_pct)
    base = read_bundle(baseline) if baseline else None
    if model and not os.path.exists(model):  # not a GPU question: a typo
        raise ConfigError(f"{model}: no such bundle directory or model file")
    if model and os.path.isfile(model) and not model.endswith(".py"):  # not a GPU question
        raise ConfigError(f"{model}: neither a bundle directory nor a model file (.py)")
    if model and os.path.isdir(model):  # a recorded bundle: its budgets, no capture
        if output:
            raise click.UsageError("--output keeps a captured bundle: MODEL is a bundle "
                                   "already")
        first = CheckResult("bundle", True, None, None, f"read {model}")
        results, cmp = _evaluate(first, read_bundle(model), model, budgets, base, baseline,
                                 model)
        return _finish(results, junit, as_json, force, markdown, cmp, link)
    # the temporary bundle is check's own; --output is replaced only with --force
    opts: dict[str, Any] = {**budgets.capture, "model": model, "force": force or not output}
    with tempfile.TemporaryDirectory(prefix="graphscope-check-") as tmp:
        opts["output"] = output or os.path.join(tmp, "bundle")
        cfg = merge(opts)
        try:
            res = run(cfg, "check", timing=True, quiet=True)
        except GraphscopeError as exc:
            if junit:
                _write(junit, junit_xml([CheckResult("capture", False, None, None, str(exc))]),
                       force)
            raise
        first = CheckResult("capture", True, None, None, f"captured {res.bundle_path}")
        results, cmp = _evaluate(first, res.bundle, res.bundle_path, budgets, base, baseline,
                                 output or model or "")
    return _finish(results, junit, as_json, force, markdown, cmp, link)


def _budgets(path: str, fail_above: Optional[float], on: Optional[str],
             noise_pct: Optional[float]) -> Any:
    """The budgets file, its regression budget overridden by the command line, its capture
    options checked (errors name the file and line)."""
    from dataclasses import replace

    from graphscope.analysis.budgets import load_budgets
    from graphscope.capture.config import merge

    budgets = load_budgets(path)
    given = {k: v for k, v in (("max_pct", fail_above), ("on", on), ("noise_pct", noise_pct))
             if v is not None}
    if given:  # the command line before the file
        budgets = replace(budgets, regression={**budgets.regression, **given})
    for key, value in budgets.capture.items():
        line = budgets.capture_lines.get(key)
        merge({key: value}, where=f"{path}{f':{line}' if line else ''}: capture")
    return budgets


def _evaluate(first: Any, bundle: Any, path: str, budgets: Any, base: Any,
              baseline: Optional[str], shown: str) -> tuple[list[Any], Any]:
    """``first`` and every budget's result for ``bundle`` (read from ``path``), and the
    comparison with the baseline (None without one; ``shown``: the bundle's name in it)."""
    from graphscope.analysis.budgets import evaluate
    from graphscope.model.bundle_files import read_eager, read_outside

    cmp = _compared(base, bundle, budgets, baseline, path, shown)
    results = [first, *evaluate(bundle, budgets, base, eager=read_eager(path),
                                outside=read_outside(path), compared=cmp)]
    if cmp is not None:  # diff's warnings about a baseline of another model or graph set
        from ._compare import unrelated

        for w in unrelated(base, bundle, cmp):
            click.echo(f"warning: --baseline {baseline}: {w}", err=True)
    return results, cmp


def _compared(base: Any, bundle: Any, budgets: Any, baseline: Optional[str], path: str,
              shown: str) -> Any:
    """The regression budget's comparison with the baseline (None without one): the
    document ``diff --fail-above`` builds, so that the two agree; ``path``: where the bundle
    was read or written; ``shown``: its name in the views."""
    if base is None or baseline is None:
        return None
    from dataclasses import replace

    from graphscope.analysis.gate import build_comparison
    from graphscope.analysis.gate.checks import regression_options

    from ._compare import read_side

    checked = replace(read_side(path, bundle), path=shown)
    return build_comparison(read_side(baseline, base), checked,
                            regression_options(budgets.regression))


def _finish(results: list[Any], junit: Optional[str], as_json: bool, force: bool,
            markdown: bool = False, cmp: Any = None, link: Optional[str] = None) -> int:
    """JUnit, JSON, Markdown or the table of ``results`` (failures first, a one-line summary
    last); the exit code."""
    from graphscope.render.gate import check_markdown, comparison_json, ordered, render_check
    from graphscope.render.junit import junit_xml

    from ..options import console

    failed = [r for r in results if not r.passed]
    if junit:
        _write(junit, junit_xml(results), force)
    if as_json:
        doc: dict[str, Any] = {"schema": "graphscope.check/1", "passed": not failed,
                               "results": [r.__dict__ for r in ordered(results)]}
        if cmp is not None:
            doc["baseline"] = comparison_json(cmp)
        click.echo(json.dumps(doc, indent=1, sort_keys=True))
        return 1 if failed else 0
    if markdown:
        click.echo(check_markdown(results, cmp, link), nl=False)
        return 1 if failed else 0
    con = console(stderr=junit == "-")  # stdout holds one document: the XML
    con.print(render_check(results))
    if junit and junit != "-":
        con.print(f"Wrote {junit}")
    return 1 if failed else 0
