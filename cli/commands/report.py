"""graphscope report: module tree, top kernels, fwd/bwd split and per-op rows of a bundle."""

from __future__ import annotations

import json
from typing import Optional

import click

from ..options import bundle_argument, json_option

MAX_ROWS = 80


@click.command()
@bundle_argument
@click.option("--depth", type=int, default=None, help="Module levels to show.")
@click.option("--top", type=int, default=10, show_default=True, help="Top kernels/ops rows.")
@click.option("--html", "html_path", type=click.Path(), default=None,
              help="Also write a self-contained HTML report (tables, timeline, graph) here.")
@json_option
def report(bundle: str, depth: Optional[int], top: int, html_path: Optional[str],
           as_json: bool) -> int:
    """Print the tables of BUNDLE (works on any machine, no GPU)."""
    from rich.console import Console

    from graphscope.bundle import read_bundle
    from graphscope.reports.summary import summarize
    from graphscope.reports.table import print_summary

    b = read_bundle(bundle)
    if html_path:
        from graphscope.reports.html import write_html

        write_html(b, html_path)
        click.echo(f"Wrote {html_path}", err=as_json)
    s = summarize(b, top=top)
    if as_json:
        click.echo(json.dumps(s, sort_keys=True, indent=1))
        return 0
    con = Console()
    if depth is None:  # a huge tree: show the levels that fit in MAX_ROWS, and say so
        levels = sorted({r["level"] for r in s["modules"]})
        shown = [lv for lv in levels
                 if sum(1 for r in s["modules"] if r["level"] <= lv) <= MAX_ROWS]
        if shown and shown[-1] < levels[-1]:
            depth = shown[-1]
            con.print(f"note: {len(s['modules'])} module rows; showing {depth + 1} level(s) "
                      "(pass --depth N for more)")
    print_summary(s, con, depth)
    return 0
