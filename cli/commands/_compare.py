"""What `diff` and `check --baseline` share: the gate's options, and the warnings when two
bundles look unrelated."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import click

F = Callable[..., Any]
METRICS = ("span", "critical_path", "work", "module")  # graphscope.analysis.gate.METRICS


def _limit(ctx: click.Context, param: click.Parameter, value: Optional[float]
           ) -> Optional[float]:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"must be a finite number >= 0 (the increase allowed, in "
                                 f"percent), not {value:g}")
    return value


def gate_options(on_default: Optional[str] = "span", where: str = "") -> Callable[[F], F]:
    """``--fail-above PCT`` and ``--on METRIC`` (``where``: what they take precedence over)."""

    def deco(f: F) -> F:
        f = click.option("--noise-pct", type=float, default=None, metavar="PCT",
                         callback=_limit,
                         help="The least noise, in percent of A's median: how far medians of "
                              "separate processes of one program move (default 2; "
                              f"docs/gates.md){where}.")(f)
        f = click.option("--on", type=click.Choice(METRICS), default=on_default,
                         show_default=on_default is not None,
                         help="What --fail-above gates on: each graph's replay span, critical "
                              f"path or GPU work, or the GPU work of every module{where}.")(f)
        return click.option("--fail-above", type=float, default=None, metavar="PCT",
                            callback=_limit,
                            help="Exit 1 if the --on metric got worse by more than PCT percent "
                                 f"and more than the noise (a speed-up never fails){where}.")(f)
    return deco


def markdown_option(f: F) -> F:
    return click.option("--markdown", is_flag=True, default=False,
                        help="Print GitHub-flavoured Markdown (a CI step summary or PR "
                             "comment) instead of tables.")(f)


def link_option(f: F) -> F:
    return click.option("--link", default=None, metavar="URL",
                        help="The HTML report's address, linked from --markdown.")(f)


def one_document(as_json: bool, markdown: bool) -> None:
    if as_json and markdown:
        raise click.UsageError("--json and --markdown each print one document on stdout: "
                               "pass one")


def unrelated_warnings(a: Any, b: Any, d: dict[str, Any]) -> list[str]:
    """Warnings for bundles ``a`` and ``b`` (``d``: their ``diff_summary``) that come from
    different model files or share no module: their deltas compare nothing."""
    out = []
    ma, mb = (x.manifest.get("model") or {} for x in (a, b))
    if not isinstance(ma, dict) or not isinstance(mb, dict):
        ma, mb = {}, {}
    if ma.get("sha256") and mb.get("sha256") and ma["sha256"] != mb["sha256"]:
        out.append(f"the bundles come from different model files ({ma.get('path')} vs "
                   f"{mb.get('path')})")
    if not any(r["only_in"] is None for r in d["modules"]):
        out.append("the bundles share no module: they look like different models")
    na, nb = ([g.name for g in x.graphs] for x in (a, b))
    only_a, only_b = [g for g in na if g not in nb], [g for g in nb if g not in na]
    if only_a or only_b:
        out.append("the bundles hold different graphs, so totals compare different sets ("
                   + "; ".join(f"{len(xs)} only in {side}: {_names(xs)}"
                               for side, xs in (("A", only_a), ("B", only_b)) if xs) + ")")
    return out


def _names(xs: list[str], n: int = 3) -> str:
    return ", ".join(xs[:n]) + (f", … ({len(xs) - n} more)" if len(xs) > n else "")
