"""graphscope lint: capture-safety checks on a CPU, for CI runners without a GPU."""

from __future__ import annotations

import json
import math
import os
from typing import Optional

import click

from ..options import command, entry_option, json_option, model_argument


def _seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not math.isfinite(value) or value < 1:
        raise click.BadParameter(f"must be a number of seconds >= 1, not {value}")
    return value


@command()
@model_argument
@entry_option("graphscope_model")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), default="error",
              show_default=True, help="Exit 1 when a finding has this severity or higher.")
@json_option("Print the findings as JSON.")
@click.option("--timeout", type=float, callback=_seconds, default=120, show_default=True,
              help="Seconds the model may take (it runs in a child process).")
def lint(model: Optional[str], entry: str, fail_on: str, as_json: bool,
         timeout: float) -> int:
    """Find what would break MODEL's capture, on a CPU.

    Runs what capturing MODEL would run (forward and backward, its own step, or forward of
    each input bucket) once on the CPU and reports what breaks or silently corrupts CUDA-graph
    capture: host syncs, data-dependent shapes, tensor-valued control flow, CPU tensors made
    inside forward, and make_graphed_callables' restrictions. Each finding names the module
    and source line. This runs the code in MODEL.

    Exit codes: 0 clean, 1 a finding at or above --fail-on, 2 could not run (the model failed,
    or did not finish within --timeout: a timeout finding says so).
    """
    from rich.markup import escape

    from graphscope._errors import GraphscopeError
    from graphscope.capture.lint import lint_in_child
    from graphscope.capture.loader import check_model_file, model_path

    from ..options import console

    path = model_path(model)
    check_model_file(path)
    report = lint_in_child(os.path.abspath(path), entry, timeout)
    failing = report.at_or_above(fail_on)
    if as_json:
        click.echo(json.dumps({"findings": [f.to_json() for f in report.findings],
                               "ran_backward": report.ran_backward, "error": report.error},
                              indent=1))
    else:
        con = console()
        colour = {"error": "red", "warning": "yellow", "info": "cyan"}
        for f in report.findings:
            where = _where(f.source)
            times = f" (×{f.count})" if f.count > 1 else ""
            # what is not known (a finding about the whole model) is left out, not a "-"
            said = "  ".join(escape(x) for x in (f.module, where) if x)
            con.print(f"[{colour[f.severity]}]{f.severity:<7}[/] [bold]{escape(f.rule)}[/]"
                      f"{' ' + said if said else ''}{times}", highlight=False)
            con.print(f"        {escape(f.message)}", highlight=False)
        counts = {s: sum(1 for f in report.findings if f.severity == s)
                  for s in ("error", "warning", "info")}
        con.print(f"graphscope lint: {counts['error']} error(s), {counts['warning']} "
                  f"warning(s), {counts['info']} info", highlight=False)
    if report.error and not any(f.rule in ("exit", "timeout") for f in report.findings):
        raise GraphscopeError(f"{path}: the model failed while linting on the CPU: "
                              f"{report.error}")
    if any(f.rule in ("timeout", "exit") for f in report.findings):
        return 2  # not linted to the end: what it found is above, the rest is unknown
    return 1 if failing else 0


def _where(source: Optional[str]) -> str:
    """``file:line`` relative to here; a finding about the whole file (it exited, timed
    out) has no line; one about the whole model (its arguments, its buffers) has neither."""
    if not source:
        return ""
    file, _, rest = source.partition(":")
    line = rest.split()[0] if rest.split() else ""
    try:
        file = os.path.relpath(file)
    except ValueError:  # another drive
        pass
    return f"{file}:{line}" if line else file
