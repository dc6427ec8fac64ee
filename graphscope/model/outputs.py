"""Writing a user's output file without ever destroying data.

Rules (docs/cli.md, "Outputs"): an existing file is replaced only with ``--force``, unless
graphscope wrote it itself (an HTML report carries :data:`GENERATOR_META`: a view to regenerate,
not the user's data); an output never lands on one of the command's inputs (or inside an input
bundle); a character
device or FIFO (``/dev/null``, ``/dev/stdout``, a named pipe) is written in place, never
renamed over; ``-`` is stdout; everything else is written to a temp file beside the target
and renamed into place, and the temp file is removed on any failure (Ctrl-C included).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

from .._errors import GraphscopeError


class OutputError(GraphscopeError):
    """An output path that would destroy data or cannot be written."""


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def check_output(path: str, *, force: bool, inputs: Sequence[str] = (),
                 what: str = "output") -> str:
    """Refuse an output that would destroy data; return how it will be written:
    ``"stdout"``, ``"inplace"`` (device or FIFO) or ``"atomic"``. ``inputs`` are paths (a
    missing one is named first: a typo in the input path is the thing to fix, not the output
    that ``--force`` would replace)."""
    for src in inputs:
        if src and src != "-" and not os.path.lexists(src):
            raise GraphscopeError(f"{src}: no such file or directory")
    if path == "-":
        return "stdout"
    if path.endswith(("/", os.sep)) and not os.path.exists(path):
        raise OutputError(f"{path}: names a directory; give a file name for the {what}")
    real = os.path.realpath(path)
    for src in inputs:
        if not src or src == "-":
            continue
        rsrc = os.path.realpath(src)
        if real == rsrc or (os.path.isdir(rsrc) and _inside(real, rsrc)):
            raise OutputError(f"{path}: the {what} would overwrite the input {src}; "
                              "choose another path")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot use as {what} ({exc.strerror})") from None
    if st is not None:
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return "inplace"
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{path}: is a directory; give a file name for the {what}")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{path}: not a regular file; refusing to replace it")
        if not force and not written_by_graphscope(path):
            raise OutputError(f"{path} already exists and is not one graphscope wrote (its "
                              "pages and DOT files carry its mark): pass --force to replace it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OutputError(f"{path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: directory {parent} is not writable")
    return "atomic"


GENERATOR_META = '<meta name="generator" content="graphscope">'
GENERATOR_COMMENT = "// generator: graphscope"  # a DOT file's first line
_MARK_BYTES = 4096  # the mark stands right after <head>: within the page's first line or two


def written_by_graphscope(path: str) -> bool:
    """Whether the regular file ``path`` is one graphscope wrote (it starts with the mark that
    :func:`write_output` puts in what it writes); an unreadable file is not."""
    try:
        with open(path, "rb") as f:
            head = f.read(_MARK_BYTES)
    except OSError:
        return False
    return GENERATOR_META.encode() in head or head.startswith(GENERATOR_COMMENT.encode())


def _marked(data: Any, to_file: bool = True) -> Any:
    """``data`` with graphscope's mark, where its format has a place for one: an HTML page gets
    :data:`GENERATOR_META` first in its head (once), a DOT graph written to a file
    :data:`GENERATOR_COMMENT` as its first line (on stdout, a pipe's reader gets the graph as
    Graphviz would write it)."""
    if to_file and isinstance(data, str) and data.startswith(("digraph", "strict digraph",
                                                              "graph ")):
        return GENERATOR_COMMENT + "\n" + data
    if not isinstance(data, str) or not data[:64].lstrip().lower().startswith("<!doctype html"):
        return data
    head = data.find("<head>", 0, _MARK_BYTES)
    if head < 0 or GENERATOR_META in data[:_MARK_BYTES]:
        return data
    at = head + len("<head>")
    return data[:at] + "\n" + GENERATOR_META + data[at:]


def check_bundle_output(path: str, *, force: bool, inputs: Sequence[str] = ()) -> None:
    """Refuse a bundle directory that cannot or must not be written, before any work: an
    existing path without ``--force``, a file or a directory that is not a bundle (``--force``
    replaces bundles only), an input, or a parent that cannot be made or written. Missing
    parent directories are fine: the bundle writer makes them."""
    real = os.path.realpath(path)
    for src in inputs:
        if src and os.path.lexists(src) and real == os.path.realpath(src):
            raise OutputError(f"{path}: the bundle would overwrite the input {src}; "
                              "choose another path")
    if os.path.lexists(path):
        if not os.path.isdir(path) or os.path.islink(path):  # --force would not help
            raise OutputError(f"{path}: exists and is not a bundle directory; --force replaces "
                              "bundles only: choose another path")
        if not force:
            raise OutputError(f"{path} already exists: pass --force to replace it or choose "
                              "-o PATH")
        if os.listdir(path) and not _is_bundle_dir(path):
            raise OutputError(f"{path}: a directory that is not a graphscope bundle; --force "
                              "replaces bundles only: choose another path")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OutputError(f"{path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: directory {parent} is not writable")


def _is_bundle_dir(path: str) -> bool:
    if os.path.isfile(os.path.join(path, "manifest.json")):
        return True
    return any(n.startswith("rank") and os.path.isfile(os.path.join(path, n, "manifest.json"))
               for n in os.listdir(path))


def one_stdout_document(outputs: dict[str, str | None], *, json_on_stdout: bool = False) -> None:
    """``-`` gives stdout exactly one document: refuse two outputs (or an output and
    ``--json``) that would both go there. ``outputs`` maps option name -> path."""
    on_stdout = [opt for opt, path in outputs.items() if path == "-"]
    if json_on_stdout and on_stdout:
        on_stdout.insert(0, "--json")
    if len(on_stdout) > 1:
        both = "both" if len(on_stdout) == 2 else "all"
        raise OutputError(f"{' and '.join(on_stdout)} would {both} write to stdout; give "
                          f"{on_stdout[-1]} a file name")


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


@contextlib.contextmanager
def _write_errors(path: str, what: str) -> Iterator[None]:
    """A full disk (``-o /dev/full``), a quota or an I/O error: one line naming the path."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        raise OutputError(f"{path}: cannot write the {what} ({os.strerror(exc.errno)}); "
                          "nothing was written") from None


@contextlib.contextmanager
def open_output(path: str, mode: str = "w", *, force: bool, inputs: Sequence[str] = (),
                what: str = "output") -> Iterator[IO[Any]]:
    """Open ``path`` for writing under the rules above (``mode`` "w" or "wb")."""
    how = check_output(path, force=force, inputs=inputs, what=what)
    binary = "b" in mode
    if how == "stdout":
        out = sys.stdout.buffer if binary else sys.stdout
        with _write_errors("stdout", what):
            yield out
            out.flush()
        return
    enc = None if binary else "utf-8"
    if how == "inplace":
        with _write_errors(path, what), open(path, mode, encoding=enc) as f:
            yield f
        return
    fd, tmp = _temp_beside(path)
    try:
        with _write_errors(path, what), os.fdopen(fd, mode, encoding=enc) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_output(path: str, data: Any, *, force: bool, inputs: Sequence[str] = (),
                 what: str = "output") -> None:
    """Write ``data`` (str or bytes) to ``path`` under the rules above."""
    with open_output(path, "wb" if isinstance(data, bytes) else "w", force=force,
                     inputs=inputs, what=what) as f:
        f.write(_marked(data, to_file=path != "-"))


def temp_path_for(path: str) -> str:
    """A fresh temp file name beside ``path`` (for writers that need a path, not a file)."""
    fd, tmp = _temp_beside(path)
    os.close(fd)
    return tmp


def _temp_beside(path: str) -> tuple[int, str]:
    """The atomic write's temporary file beside ``path``; a directory that refuses it is one
    line naming the directory (not an unexpected error)."""
    where = os.path.dirname(os.path.abspath(path))
    try:
        return tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=where)
    except OSError as exc:
        raise GraphscopeError(f"{where}: cannot write there ({exc.strerror or exc}): choose "
                              "another -o") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
