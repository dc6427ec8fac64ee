"""graphscope diff: per-module time and kernel-count deltas between two bundles."""

from __future__ import annotations

import json
from typing import Optional

import click


@click.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option("--depth", type=click.IntRange(min=0), default=None,
              help="Module levels to compare.")
@click.option("--fail-above", type=float, default=None,
              help="Exit 1 if the total or any module got slower by more than PCT percent.")
@click.option("--json", "as_json", is_flag=True, help="Print the deltas as JSON.")
def diff(a: str, b: str, depth: Optional[int], fail_above: Optional[float], as_json: bool) -> int:
    """Compare bundle B against bundle A (median GPU time per replay, kernel counts)."""
    import math

    from rich.console import Console
    from rich.table import Table

    from graphscope._errors import GraphscopeError
    from graphscope.bundle import read_bundle
    from graphscope.reports.diff import diff_summary, worst_regression_pct
    from graphscope.reports.table import Text, fmt_ns

    if fail_above is not None and not math.isfinite(fail_above):
        raise click.BadParameter(f"must be a finite number, not {fail_above}",
                                 param_hint="--fail-above")
    ba, bb = read_bundle(a), read_bundle(b)
    for path, x in ((a, ba), (b, bb)):
        if not x.replays:
            raise GraphscopeError(f"{path}: has no timed replays (written by `graphscope "
                                  "annotate`?): diff compares timings; capture it with "
                                  "`graphscope capture`")
    d = diff_summary(ba, bb, depth)
    ma, mb = (x.manifest.get("model") or {} for x in (ba, bb))
    if ma.get("sha256") and mb.get("sha256") and ma["sha256"] != mb["sha256"]:
        click.echo(f"warning: the bundles come from different model files ({ma.get('path')} "
                   f"vs {mb.get('path')})", err=True)
    shared = [r for r in d["modules"] if r["only_in"] is None]
    if not shared:
        click.echo("warning: the bundles share no module: they look like different models",
                   err=True)
    worst = worst_regression_pct(d)
    failed = fail_above is not None and worst > fail_above
    from graphscope.reports.diff import diagnosis_deltas

    diag = diagnosis_deltas(ba, bb)
    if as_json:
        click.echo(json.dumps({**d, "worst_regression_pct": worst, "failed": failed,
                               "diagnosis": diag}, sort_keys=True, indent=1))
        return 1 if failed else 0

    def pct(v: float) -> str:
        colour = "red" if v > 0.5 else "green" if v < -0.5 else "white"
        return f"[{colour}]{v:+.1f}%[/{colour}]"

    t = Table(title=Text(f"{a} → {b}"), title_justify="left")
    for col, just in (("module", "left"), ("A", "right"), ("B", "right"), ("Δ", "right"),
                      ("Δ%", "right"), ("kernels A→B", "right")):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    tot = d["total"]
    t.add_row(Text("total", style="bold"), fmt_ns(tot["a_ns"]), fmt_ns(tot["b_ns"]),
              fmt_ns(tot["delta_ns"]) if tot["delta_ns"] >= 0 else "-" + fmt_ns(-tot["delta_ns"]),
              pct(tot["delta_pct"]), f"{tot['a_kernels']}→{tot['b_kernels']}")
    for r in d["modules"]:
        name = ("  " * r["level"]) + r["module"].rsplit(".", 1)[-1] if r["level"] else r["module"]
        if r["only_in"]:
            name += f" (only in {r['only_in'].upper()})"
        dn = r["delta_ns"]
        t.add_row(Text(name), fmt_ns(r["a_ns"]), fmt_ns(r["b_ns"]),
                  fmt_ns(dn) if dn >= 0 else "-" + fmt_ns(-dn), pct(r["delta_pct"]),
                  f"{r['a_kernels']}→{r['b_kernels']}")
    con = Console()
    con.print(t)
    from graphscope.reports.table import diagnosis_diff_table

    con.print(diagnosis_diff_table(diag))
    if fail_above is not None:
        verdict = "[red]FAIL[/red]" if failed else "[green]ok[/green]"
        con.print(f"worst regression {worst:+.1f}% (limit {fail_above:+.1f}%): {verdict}")
    return 1 if failed else 0
