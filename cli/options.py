"""Options shared by several subcommands, defined once."""

from __future__ import annotations

from typing import Any, Callable

import click

from graphscope.capture.source import SOURCES
from graphscope.config import mode_names

F = Callable[..., Any]


def output_option(help_text: str) -> Callable[[F], F]:
    return click.option("-o", "--output", type=click.Path(dir_okay=True), default=None,
                        help=help_text)


def force_option(f: F) -> F:
    return click.option("-f", "--force", is_flag=True, default=None,
                        help="Replace an existing output.")(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print a machine-readable summary instead of tables.")(f)


def bundle_argument(f: F) -> F:
    return click.argument("bundle", type=click.Path(exists=False))(f)


def capture_options(f: F) -> F:
    """Options of commands that load and capture a model file."""
    opts: list[Any] = [
        click.argument("model", required=False, type=click.Path()),
        click.option("--entry", default=None, help="Function in MODEL returning (model, args)."
                     "  [default: graphscope_model]"),
        click.option("--mode", type=click.Choice(mode_names()), default=None,
                     help="; ".join(f"{n}: {SOURCES[n].help}" for n in mode_names())
                     + ".  [default: step]"),
        click.option("--warmup", type=int, default=None,
                     help="Warm-up iterations on a side stream (DDP needs 11).  [default: 3]"),
        click.option("--depth", type=int, default=None,
                     help="Annotate modules at most this deep below the root."),
        click.option("--config", "config_path", type=click.Path(), default=None,
                     help="YAML file of options; the command line wins."),
        output_option("Bundle directory to write.  [default: graphscope-out/<model>.<cmd>]"),
        force_option,
    ]
    for o in reversed(opts):
        f = o(f)
    return f
