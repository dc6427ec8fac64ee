"""graphscope diff: per-module time and kernel-count deltas between two bundles."""

from __future__ import annotations

import json
from typing import Optional

import click

from ..options import command, depth_option, json_option


@command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@depth_option("Module levels to compare.")
@click.option("--fail-above", type=float, default=None,
              help="Exit 1 if the total or any module got slower by more than PCT percent.")
@json_option("Print the deltas as JSON.")
def diff(a: str, b: str, depth: Optional[int], fail_above: Optional[float], as_json: bool) -> int:
    """Compare bundle B against bundle A (median GPU time per replay, kernel counts)."""
    import math

    from rich.markup import escape

    from graphscope._errors import GraphscopeError
    from graphscope.analysis.diff import diff_summary, worst_regression
    from graphscope.model.bundle_io import read_bundle
    from graphscope.render.table import diff_table

    from ..options import console
    from ._compare import unrelated_warnings

    if fail_above is not None and not (math.isfinite(fail_above) and fail_above >= 0):
        raise click.BadParameter(f"must be a finite number >= 0 (the increase allowed, in "
                                 f"percent), not {fail_above:g}", param_hint="--fail-above")
    ba, bb = read_bundle(a), read_bundle(b)
    for path, x in ((a, ba), (b, bb)):
        if not x.replays:
            raise GraphscopeError(f"{path}: has no timed replays (written by `graphscope "
                                  "annotate`?): diff compares timings; capture it with "
                                  "`graphscope capture`")
    d = diff_summary(ba, bb, depth)
    for w in unrelated_warnings(ba, bb, d):
        click.echo(f"warning: {w}", err=True)
    worst, where = worst_regression(d)
    failed = fail_above is not None and worst > fail_above
    from graphscope.analysis.diff import diagnosis_deltas

    diag = diagnosis_deltas(ba, bb)
    counters = _counter_deltas(a, ba, b, bb)
    eager = _eager_pair(a, ba, b, bb, depth)
    if as_json:
        extra = {"counters": counters} if counters else {}
        click.echo(json.dumps({**d, "worst_regression_pct": worst, "worst_regression_in": where,
                               "failed": failed,
                               "diagnosis": diag, **extra,
                               **({"eager": eager} if eager else {})}, sort_keys=True, indent=1))
        return 1 if failed else 0
    con = console()
    if depth is None:  # a huge tree: the levels that fit, as report shows them, and said so
        from graphscope.render.terminal import depth_that_fits

        shown = depth_that_fits(d["modules"])
        if shown is not None:
            con.print(f"note: {len(d['modules'])} module rows; showing {shown + 1} "
                      "level(s) (pass --depth N for more; --fail-above holds every module)")
            d = {**d, "modules": [r for r in d["modules"] if r["level"] <= shown]}
    con.print(diff_table(d, a, b))
    from graphscope.render.diagnosis import diagnosis_diff_table

    con.print(diagnosis_diff_table(diag))
    if counters:
        from graphscope.render.table import counters_diff_table

        con.print(counters_diff_table(counters))
    if eager and "only" in eager:
        side, other = (a, b) if eager["only"] == "a" else (b, a)
        con.print(f"eager baseline: only {side} has one ({other} was captured without "
                  "--eager-baseline)", markup=False, highlight=False)
    elif eager:
        from graphscope.render.eager import eager_diff_table, eager_module_diff_table

        con.print(eager_diff_table(eager["a"], eager["b"]))
        con.print(eager_module_diff_table(eager["a"], eager["b"]))
    if fail_above is not None:
        verdict = "[red]FAIL[/red]" if failed else "[green]ok[/green]"
        from graphscope.analysis.diff import NOISE_FLOOR_NS, under_floor

        if worst > 0:
            con.print(f"worst regression {worst:+.1f}% GPU work in {escape(where)} (limit "
                      f"{fail_above:+.1f}%): {verdict}")
        else:  # nothing grew (past the noise floor): the total's change, not a "regression"
            con.print(f"no regression (no increase past the {NOISE_FLOOR_NS / 1e3:g} µs noise "
                      f"floor): GPU work in total {d['total']['delta_pct']:+.1f}% (limit "
                      f"{fail_above:+.1f}%): {verdict}", highlight=False)

        under = under_floor(d, worst)
        if under:  # a larger % in the table, left out as noise: say why
            con.print(f"  not counted: {escape(under['module'])} {under['delta_pct']:+.1f}% is "
                      f"{under['delta_ns'] / 1e3:+.2f} µs, under the "
                      f"{NOISE_FLOOR_NS / 1e3:g} µs noise floor", highlight=False)
    return 1 if failed else 0


def _counter_deltas(a: str, ba: object, b: str, bb: object) -> list:
    """Per-module counter deltas where both bundles have counters.json (else [])."""
    from graphscope.analysis.counters import analyze, diff
    from graphscope.model.bundle_files import read_counters

    ca, cb = read_counters(a), read_counters(b)
    if ca is None or cb is None:
        return []
    return diff(analyze(ba, ca), analyze(bb, cb))


def _eager_pair(a: str, ba: object, b: str, bb: object, depth: Optional[int] = None
                ) -> Optional[dict]:
    """Both bundles' eager-vs-graph comparisons (capture --eager-baseline), when both have one."""
    from graphscope.analysis.eager import compare
    from graphscope.model.bundle_files import read_eager

    da, db = read_eager(a), read_eager(b)
    if da is None and db is None:
        return None
    if da is None or db is None:  # said, not silently left out
        return {"only": "a" if db is None else "b"}
    return {"a": compare(ba, da, depth), "b": compare(bb, db, depth)}  # type: ignore[arg-type]
