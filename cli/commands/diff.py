"""graphscope diff: bundle B against bundle A, graph by graph (span, critical path, GPU work),
with the noise of the replays, what changed, and an optional gate (docs/gates.md)."""

from __future__ import annotations

import dataclasses
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
    """Compare bundle B against bundle A graph by graph: replay span, critical path and GPU
    work with their noise, and what changed.

    Per graph: medians over the traced replays, a 95% bootstrap interval of the difference and
    a noise floor from the replays' spread; then what changed (critical-path modules, kernels,
    stream-order edges, memory) and GPU work per module.

    With --fail-above PCT, exit 1 when the --on metric (span by default) of a graph got worse
    by more than PCT percent and more than the noise (or when no graph could be compared); a
    speed-up never fails."""
    from graphscope._errors import GraphscopeError
    from graphscope.analysis.diagnosis import diagnose_json
    from graphscope.analysis.diff import diagnosis_deltas, diff_summary
    from graphscope.analysis.gate import compare
    from graphscope.model.bundle_io import read_bundle
    from graphscope.render.gate import (
        comparison_json,
        comparison_markdown,
        render_comparison,
        verdict_text,
    )

    from ..options import console
    from ._compare import unrelated_warnings

    one_document(as_json, markdown)
    ba, bb = read_bundle(a), read_bundle(b)
    for path, x in ((a, ba), (b, bb)):
        if not x.replays:
            raise GraphscopeError(f"{path}: has no timed replays (written by `graphscope "
                                  "annotate`?): diff compares timings; capture it with "
                                  "`graphscope capture`")
    d = diff_summary(ba, bb, depth)
    for w in unrelated_warnings(ba, bb, d):
        click.echo(f"warning: {w}", err=True)
    diags = (diagnose_json(ba), diagnose_json(bb))
    extra = {} if noise_pct is None else {"noise_pct": noise_pct}
    cmp = compare(ba, bb, on=on, limit_pct=fail_above, depth=depth, diagnoses=diags, **extra)
    cmp = dataclasses.replace(cmp, a=a, b=b)  # the paths as given, not resolved
    code = 1 if cmp.failed else 0
    if markdown:
        click.echo(comparison_markdown(cmp, link=link), nl=False)
        return code
    diag = diagnosis_deltas(ba, bb, diags)
    counters = _counter_deltas(a, ba, b, bb)
    eager = _eager_pair(a, ba, b, bb, depth)
    if as_json:
        doc: dict[str, Any] = {**comparison_json(cmp), "modules_work": d,
                               "diagnosis": diag}
        if counters:
            doc["counters"] = counters
        if eager:
            doc["eager"] = eager
        click.echo(json.dumps(doc, sort_keys=True, indent=1))
        return code
    con = console()
    con.print(render_comparison(cmp))
    _details(con, a, b, d, depth, diag, counters, eager)
    con.print(verdict_text(cmp), soft_wrap=True)  # one line, for a CI log to grep
    return code


def _details(con: Any, a: str, b: str, d: dict[str, Any], depth: Optional[int],
             diag: dict[str, Any], counters: list[Any], eager: Optional[dict[str, Any]]
             ) -> None:
    """GPU work per module, the diagnosis, counters and eager baselines A → B."""
    from graphscope.render.diff import diagnosis_diff_table, diff_table

    if depth is None:  # a huge tree: the levels that fit, as report shows them, and said so
        from graphscope.render.fmt import depth_that_fits

        shown = depth_that_fits(d["modules"])
        if shown is not None:
            con.print(f"note: {len(d['modules'])} module rows; showing {shown + 1} "
                      "level(s) (pass --depth N for more; --on module gates every module)")
            d = {**d, "modules": [r for r in d["modules"] if r["level"] <= shown]}
    con.print(diff_table(d))
    con.print(diagnosis_diff_table(diag))
    if counters:
        from graphscope.render.counters import counters_diff_table

        con.print(counters_diff_table(counters))
    if eager and "only" in eager:
        side, other = (a, b) if eager["only"] == "a" else (b, a)
        con.print(f"eager baseline: only {side} has one ({other} was captured without "
                  "--eager-baseline)", markup=False, highlight=False)
    elif eager:
        from graphscope.render.eager import eager_diff_table, eager_module_diff_table

        con.print(eager_diff_table(eager["a"], eager["b"]))
        con.print(eager_module_diff_table(eager["a"], eager["b"]))


def _counter_deltas(a: str, ba: object, b: str, bb: object) -> list[Any]:
    """Per-module counter deltas where both bundles have counters.json (else [])."""
    from graphscope.analysis.counters import analyze, diff
    from graphscope.model.bundle_files import read_counters

    ca, cb = read_counters(a), read_counters(b)
    if ca is None or cb is None:
        return []
    return diff(analyze(ba, ca), analyze(bb, cb))


def _eager_pair(a: str, ba: object, b: str, bb: object, depth: Optional[int] = None
                ) -> Optional[dict[str, Any]]:
    """Both bundles' eager-vs-graph comparisons (capture --eager-baseline), when both have one."""
    from graphscope.analysis.eager import compare
    from graphscope.model.bundle_files import read_eager

    da, db = read_eager(a), read_eager(b)
    if da is None and db is None:
        return None
    if da is None or db is None:  # said, not silently left out
        return {"only": "a" if db is None else "b"}
    return {"a": compare(ba, da, depth), "b": compare(bb, db, depth)}  # type: ignore[arg-type]
