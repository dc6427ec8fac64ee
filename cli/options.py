"""Options shared by several subcommands, each defined once with its one validation.

Importing this module imports click and nothing of graphscope: `graphscope --help` and the
commands that read bundles must not load the capture registry, torch or the extension. What
needs them (the ``--mode`` help) is computed when it is shown.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Optional

import click

F = Callable[..., Any]


class _State:
    """What ``-v`` set, before or after the subcommand (``main`` reads it on an error)."""

    verbose = False


STATE = _State()



def console(stderr: bool = False) -> Any:
    """A rich console for a command's output. On a terminal, as wide as it is. Into a pipe or
    a file (`| less`, `> report.txt`, CI logs) no terminal sets a width: there ``COLUMNS``, else
    ``PIPE_WIDTH`` (rich's own 80 columns would be a terminal's choice, not a file's), and no
    line ends in spaces (rich pads titles and cells to the table's width)."""
    import os
    import sys

    from rich.console import Console

    from graphscope.render.fmt import PIPE_WIDTH

    con = Console(stderr=stderr)
    if not con.is_terminal:
        cols = os.environ.get("COLUMNS", "")
        width = int(cols) if cols.isdigit() and int(cols) > 0 else PIPE_WIDTH
        con = Console(file=_TrimmedLines(sys.stderr if stderr else sys.stdout), width=width)
    return con


class _TrimmedLines(io.StringIO):
    """A text stream that writes each line without its trailing spaces (what is left of a
    line is held until its newline or a flush). An io.StringIO for its type, which rich asks
    for; nothing is kept in it."""

    def __init__(self, out: Any) -> None:
        super().__init__()
        self._out, self._held = out, ""

    def write(self, text: str) -> int:
        lines = (self._held + text).split("\n")
        self._held = lines.pop()
        if lines:
            self._out.write("".join(ln.rstrip(" ") + "\n" for ln in lines))
        return len(text)

    def flush(self) -> None:
        if self._held:
            self._out.write(self._held)
            self._held = ""
        self._out.flush()

    def isatty(self) -> bool:
        return False


def _set_verbose(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        STATE.verbose = True


def verbose_param() -> click.Option:
    return click.Option(["-v", "--verbose"], is_flag=True, expose_value=False,
                        is_eager=True, callback=_set_verbose,
                        help="Show tracebacks on errors.")


class Command(click.Command):
    """A subcommand: takes ``-v`` after its name too (`graphscope capture ... -v`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(verbose_param())


def command(name: Optional[str] = None, **kwargs: Any) -> Callable[[F], click.Command]:
    """``click.command`` for graphscope's subcommands (``-v`` included)."""
    return click.command(name, cls=Command, **kwargs)


def output_option(help_text: str) -> Callable[[F], F]:
    """``-o/--output``: checked by :func:`graphscope.model.outputs.check_output` (a file) or
    :func:`graphscope.model.outputs.check_bundle_output` (a bundle) before any work."""
    return click.option("-o", "--output", type=click.Path(), default=None, help=help_text)


def force_option(help_text: str = "Replace an existing output.") -> Callable[[F], F]:
    return click.option("-f", "--force", is_flag=True, default=False, help=help_text)


def json_option(help_text: str = "Print a machine-readable summary instead of tables."
                ) -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def not_empty(ctx: click.Context, param: click.Parameter, value: Optional[str]
              ) -> Optional[str]:
    """A name option given as '' (or blanks) is refused, not read as "no option"."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: give a graph's name, its ordinal ('#1'), a unique "
                                 "prefix or a regex")
    return value


def depth_option(help_text: str) -> Callable[[F], F]:
    return click.option("--depth", type=click.IntRange(min=0), default=None, help=help_text)


def config_option(f: F) -> F:
    return click.option("--config", "config_path", type=click.Path(dir_okay=False),
                        default=None, help="YAML file of options; the command line wins.")(f)


def bundle_argument(f: F) -> F:
    return click.argument("bundle", type=click.Path(exists=False))(f)


def model_argument(f: F) -> F:
    return click.argument("model", required=False, type=click.Path())(f)


def entry_option(default: Optional[str] = None) -> Callable[[F], F]:
    return click.option("--entry", default=default, show_default=default is not None,
                        help="Function in MODEL returning (model, args)."
                        + ("" if default else "  [default: graphscope_model]"))


def _mode_help() -> str:
    from graphscope.capture.config import mode_names
    from graphscope.capture.source import SOURCES

    names = mode_names()
    return "; ".join(f"{n}: {SOURCES[n].help}" for n in names) + ".  [default: step]"


class _LazyHelpOption(click.Option):
    """An option whose help text is computed when shown (it needs the capture registry)."""

    def __init__(self, *args: Any, help_fn: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help_fn = help_fn

    def get_help_record(self, ctx: click.Context) -> Optional[tuple[str, str]]:
        self.help = self.help_fn()
        return super().get_help_record(ctx)


def capture_options(f: F) -> F:
    """Options of commands that load and capture a model file. Values are validated once,
    by graphscope.capture.config, whether they come from here, the environment or ``--config``."""
    opts: list[Any] = [
        model_argument,
        entry_option(),
        click.option("--mode", cls=_LazyHelpOption, help_fn=_mode_help, default=None,
                     metavar="MODE"),
        click.option("--warmup", type=int, default=None,
                     help="Warm-up iterations on a side stream (DDP needs 11).  [default: 3]"),
        depth_option("Annotate modules at most this deep below the root."),
        config_option,
        output_option("Bundle directory to write.  [default: graphscope-out/<model>.<cmd>]"),
        force_option(),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


# ---------------------------------------------------------------- the gate (diff, check)

GATE_METRICS = ("span", "critical_path", "work", "module")  # graphscope.analysis.gate.METRICS


def _percent(ctx: click.Context, param: click.Parameter, value: Optional[float]
             ) -> Optional[float]:
    import math

    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"must be a finite number >= 0 (a percentage), not {value:g}")
    return value


def gate_options(on_default: Optional[str] = "span", where: str = "") -> Callable[[F], F]:
    """``--fail-above PCT``, ``--on METRIC`` and ``--noise-pct PCT`` (``where``: what they
    take precedence over)."""

    def deco(f: F) -> F:
        f = click.option("--noise-pct", type=float, default=None, metavar="PCT",
                         callback=_percent,
                         help="The least noise, in percent of A's median: how far medians of "
                              "separate processes of one program move (default 2; "
                              f"docs/gates.md){where}.")(f)
        f = click.option("--on", type=click.Choice(GATE_METRICS), default=on_default,
                         show_default=on_default is not None,
                         help="What --fail-above gates on: each graph's replay span, critical "
                              f"path or GPU work, or the GPU work of every module{where}.")(f)
        return click.option("--fail-above", type=float, default=None, metavar="PCT",
                            callback=_percent,
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
    """--json and --markdown are both one document on stdout: one of them."""
    if as_json and markdown:
        raise click.UsageError("--json and --markdown each print one document on stdout: "
                               "pass one")
