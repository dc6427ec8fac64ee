"""Entry point: a click group with lazily imported subcommands; errors -> one line + exit code."""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any, Optional

import click

from graphscope._errors import GraphscopeError
from graphscope._version import __version__

from .commands import COMMANDS
from .options import STATE, verbose_param


class LazyGroup(click.Group):
    """Import a subcommand's module only when it runs (click's LazyGroup recipe); the command
    list of ``--help`` comes from the registry, so it imports none of them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr, _ = target
        cmd = getattr(importlib.import_module(module), attr)
        assert isinstance(cmd, click.Command)
        return cmd

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[Optional[str], Optional[click.Command], list[str]]:
        name = args[0] if args else ""
        if args and name not in COMMANDS and not name.startswith("-"):
            import difflib

            close = difflib.get_close_matches(name, list(COMMANDS), n=1, cutoff=0.6)
            if close:  # as click does for options
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # each summary whole: on a narrow terminal it wraps rather than ending in "..."
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             params=[verbose_param()])
@click.version_option(__version__, prog_name="graphscope")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """graphscope: profile and inspect PyTorch CUDA graphs.

    Every captured kernel, memcpy and memset node is tagged with the module, the
    mark_kernels region, the forward/backward phase, the aten op, shapes and source line it
    came from; replays are traced and joined back onto those tags.
    """
    ctx.ensure_object(dict)


# click >= 8.2 raises this for a bare group; older clicks print the help themselves
_NO_ARGS: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


def main(argv: Optional[list[str]] = None) -> int:
    """Run the CLI; return the exit code (GraphscopeError -> one stderr line)."""
    args = list(sys.argv[1:] if argv is None else argv)
    STATE.verbose = False
    was_null = _is_devnull()
    with _whole_writes():
        return _main(args, was_null)


def _main(args: list[str], was_null: bool) -> int:
    try:
        # EOFError/KeyboardInterrupt inside a command must not read as click's "Aborted"
        rv: Any = cli.main(args=args, prog_name="graphscope", standalone_mode=False)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return int(rv) if isinstance(rv, int) else 0
    except GraphscopeError as exc:
        if STATE.verbose:
            import traceback

            traceback.print_exc()
        click.echo(f"graphscope: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except SystemExit:
        # click's and rich's answer to a reader that closed the pipe (`| head`): exit(1),
        # which reads as a failed gate for diff and check; 141 is the shell's code for SIGPIPE
        if isinstance(sys.stdout, _PACIFIED) or (_is_devnull() and not was_null):
            return EXIT_BROKEN_PIPE
        raise
    except _NO_ARGS as exc:  # a bare command: its help, as click shows it
        exc.show()
        return exc.exit_code
    except click.UsageError as exc:  # one line, as every error: the command's help says more
        cmd = exc.ctx.command_path if exc.ctx is not None else "graphscope"
        click.echo(f"graphscope: error: {exc.format_message()} (see '{cmd} --help')", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("graphscope: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("graphscope: interrupted", err=True)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`| head -c 10`)
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.errno not in _DISK_ERRORS:
            return _unexpected(exc)
        # a full disk or quota while writing: the user's to fix, not a bug
        where = f"{exc.filename}: cannot write" if exc.filename else "cannot write the output"
        click.echo(f"graphscope: error: {where} ({os.strerror(exc.errno)}): free space or "
                   "choose another -o", err=True)
        return 2
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, EOFError,
            RecursionError, UnicodeError, MemoryError) as exc:
        return _unexpected(exc)


_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}
_PACIFIED: Any = getattr(click.utils, "PacifyFlushWrapper", ())
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


class _WriteAll(io.RawIOBase):
    """Standard output's file, but a write either writes every byte or raises."""

    def __init__(self, raw: io.FileIO) -> None:
        super().__init__()
        self._raw = raw

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._raw.fileno()

    def isatty(self) -> bool:
        return self._raw.isatty()

    def write(self, data: Any) -> int:
        import select

        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            n = self._raw.write(view[done:])
            if n is None:  # a non-blocking stdout that is full: wait until it takes more
                select.select([], [self._raw], [])
                continue
            done += n
        return done

    def close(self) -> None:  # the descriptor is the interpreter's: left open
        super().close()


@contextlib.contextmanager
def _whole_writes() -> Iterator[None]:
    """Under ``PYTHONUNBUFFERED=1`` (``python -u``, and many container images set it) the text
    stdout writes straight into the file, and ignores the count a short write returns: when
    the reader of a pipe goes away in the middle of a write (`| head`), the rest of that write
    was dropped without an error and the command ended 0 with its output cut short. For the
    command's run, stdout's text layer sits on a file that writes everything or raises (the
    closed pipe then ends the command with 141, as a buffered stdout does)."""
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    if not isinstance(out, io.TextIOWrapper) or not isinstance(raw, io.FileIO):
        yield  # a buffered stdout (its writer loops until done), or not a file (tests)
        return
    sys.stdout = io.TextIOWrapper(_WriteAll(raw), encoding=out.encoding, errors=out.errors,
                                  line_buffering=out.line_buffering, write_through=True)
    try:
        yield
    finally:
        if isinstance(sys.stdout, io.TextIOWrapper) and isinstance(sys.stdout.buffer, _WriteAll):
            sys.stdout = out  # else click's wrapper for a closed pipe: it stays to the end


def _is_devnull() -> bool:
    """Whether standard output is /dev/null (rich points it there on a broken pipe)."""
    try:
        a, b = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _unexpected(exc: BaseException) -> int:
    # An input graphscope should have refused with a clear message: still one line, and
    # the traceback with -v, so that the bug can be reported.
    if STATE.verbose:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__)
    click.echo(f"graphscope: error: {type(exc).__name__}: {exc} (unexpected: run with -v "
               "for the traceback and report it)", err=True)
    return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
