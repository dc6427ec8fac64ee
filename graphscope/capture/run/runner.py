"""Run a program in this process as ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` would
(``sys.argv``, ``__main__``, ``sys.path[0]`` are the program's), and return its exit code."""

from __future__ import annotations

import contextlib
import gc
import os
import runpy
import sys
import traceback
from collections.abc import Iterator

from ..._errors import ConfigError


def check_target(target: str, module: bool) -> None:
    """Fail before anything runs when the program cannot be found."""
    if module:
        import importlib.util

        try:
            found = importlib.util.find_spec(target) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ConfigError(f"-m {target}: no module of that name on sys.path")
    elif not os.path.isfile(target):
        raise ConfigError(f"{target}: no such program file")


def exit_code(exc: SystemExit) -> int:
    """What the interpreter would exit with for ``sys.exit(code)``."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_file(path: str) -> None:
    """``runpy.run_path(path, run_name="__main__")`` without its ``sys.argv[0] = path``."""
    import builtins
    import types

    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None,
                         __spec__=None, __builtins__=builtins)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


@contextlib.contextmanager
def settled_heap() -> Iterator[None]:
    """For a program's whole run: one full collection before it starts, then every object
    that exists then (the interpreter's, torch's, graphscope's own; none of the program's)
    frozen out of later collections (``gc.freeze``), unfrozen when it ends.

    graphscope's first capture window interns the program's module scopes (some 3,000 objects
    for a 16-layer decoder); that tipped the collector into a full collection of the whole
    heap inside the program's first capture, 50-70 ms on the CPU dev host with torch loaded
    (``bench/probes/first_capture_gc.py``), a fifth of a 67-bucket ladder's capture loop. With
    the heap settled, a full collection scans only what the program made. The program's own
    objects are never frozen. A heap someone froze before is left to them."""
    ours = gc.get_freeze_count() == 0
    if ours:
        gc.collect()
        gc.freeze()
    try:
        yield
    finally:
        if ours:
            gc.unfreeze()


def print_program_exception(exc: BaseException) -> None:
    """The traceback ``python SCRIPT`` prints: from the program's first frame, without the
    frames of this runner and of runpy that started it."""
    tb = exc.__traceback__
    while tb is not None and _is_runner(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _is_runner(filename: str) -> bool:
    return filename in (__file__, runpy.__file__) or filename.startswith("<frozen runpy")


def run_program(target: str, args: list[str], module: bool = False) -> int:
    """Run the program; its exceptions print as Python prints them (exit 1), Ctrl-C exits 130."""
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    try:
        if module:
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            path = os.path.abspath(target)
            sys.argv = [target, *args]  # as typed, as python keeps it (run_path would not)
            sys.path.insert(0, os.path.dirname(path))
            _run_file(path)
        return 0
    except SystemExit as exc:
        return exit_code(exc)
    except KeyboardInterrupt as exc:
        print_program_exception(exc)
        return 130
    except BaseException as exc:  # the program's own failure: shown as Python shows it
        print_program_exception(exc)
        return 1
    finally:
        sys.argv = saved_argv
        if not module and saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            sys.path.pop(0)
