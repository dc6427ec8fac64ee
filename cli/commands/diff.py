"""graphscope diff: bundle B against bundle A, graph by graph (span, critical path, GPU work),
with the noise of the replays, what changed, and an optional gate (docs/gates.md)."""

from __future__ import annotations

import json
from typing import Any, Optional

import click

from ..options import (
    command,
    depth_option,
    gate_options,
    json_option,
    link_option,
    markdown_option,
    one_document,
)


# Long on purpose: a click command, one parameter per option
@command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@depth_option("Module levels to compare.")
@gate_options()
@json_option("Print the comparison as JSON (schema: docs/gates.md).")
@markdown_option
@link_option
def diff(a: str, b: str, depth: Optional[int], fail_above: Optional[float], on: str,
         noise_pct: Optional[float], as_json: bool, markdown: bool, link: Optional[str]
         ) -> int:
    """Compare bundle B with bundle A, graph by graph. Shows replay span, critical path and GPU
    work with their noise, and what changed.

    Per graph: medians over the traced replays, a 95% bootstrap interval of the difference and
    a noise floor from the replays' spread; then what changed (critical-path modules, kernels,
    stream-order edges, memory) and GPU work per module.

    With --fail-above PCT, exit 1 when the --on metric (span by default) of a graph got worse
    by more than PCT percent and more than the noise (or when no graph could be compared); a
    speed-up never fails."""
    from graphscope._errors import GraphscopeError
    from graphscope.analysis.gate import CompareOptions, build_comparison
    from graphscope.render.gate import comparison_json, comparison_markdown

    from ._compare import read_side, unrelated

    one_document(as_json, markdown)
    sa, sb = read_side(a), read_side(b)
    for side in (sa, sb):
        if not side.bundle.replays:
            raise GraphscopeError(f"{side.path}: has no timed replays (written by `graphscope "
                                  "annotate`?): diff compares timings; capture it with "
                                  "`graphscope capture`")
    extra = {} if noise_pct is None else {"noise_pct": noise_pct}
    cmp = build_comparison(sa, sb, CompareOptions(on=on, limit_pct=fail_above, depth=depth,
                                                  **extra))
    for w in unrelated(sa.bundle, sb.bundle, cmp):
        click.echo(f"warning: {w}", err=True)
    if markdown:
        click.echo(comparison_markdown(cmp, link=link), nl=False)
    elif as_json:
        click.echo(json.dumps(comparison_json(cmp), sort_keys=True, indent=1))
    else:
        _terminal(cmp, depth is not None)
    return 1 if cmp.failed else 0


def _terminal(cmp: Any, depth_given: bool) -> None:
    """The headline and what changed, GPU work per module, the diagnosis, counters and eager
    baselines A → B, and the verdict as the last line: every figure from ``cmp``."""
    from graphscope.render.diff import diagnosis_diff_table, module_section
    from graphscope.render.gate import render_comparison, verdict_text

    from ..options import console

    con = console()
    con.print(render_comparison(cmp))
    if cmp.modules_work is not None:
        con.print(module_section(cmp.modules_work, depth_given))
    if cmp.diagnosis is not None:
        con.print(diagnosis_diff_table(cmp.diagnosis))
    if cmp.counters:
        from graphscope.render.counters import counters_diff_table

        con.print(counters_diff_table(list(cmp.counters)))
    eager = cmp.eager
    if eager is not None and eager.only:
        side, other = (cmp.a, cmp.b) if eager.only == "a" else (cmp.b, cmp.a)
        con.print(f"eager baseline: only {side} has one ({other} was captured without "
                  "--eager-baseline)", markup=False, highlight=False)
    elif eager is not None:
        from graphscope.render.eager import eager_diff_table, eager_module_diff_table

        con.print(eager_diff_table(eager.a, eager.b))
        con.print(eager_module_diff_table(eager.a, eager.b))
    con.print(verdict_text(cmp), soft_wrap=True)  # one line, for a CI log to grep
