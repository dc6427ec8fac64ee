"""The trace's bytes, chunk by chunk (pass 1 and pass 2 of annotate-trace): a plain .json is
memory-mapped (chunks are views of the file, no read copies), a .gz is read and inflated on a
thread. Each chunk goes to the native scanner (csrc, ``scan_events``), split at event
boundaries across a thread pool when it is long; what comes back are its columns and the byte
spans pass 2 (:mod:`.write`) splices. The frame around the ``traceEvents`` array (what comes
before and after it) is kept and checked here.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .model import DTYPES, TraceError
from .streamio import Prefetch, drain, open_read, read_errors

CHUNK_BYTES = 8 << 20
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_MAX_SUFFIX = 64 << 20
_MAX_EVENT = 64 << 20  # one trace event; real ones are under a kilobyte
_BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, which some Windows tools write first


@dataclass
class _Layout:
    prefix: bytes  # everything before the first event (includes '"traceEvents": [')
    suffix: bytes = b""  # everything after the closing ']'


def native_ext() -> Any:
    """The compiled extension (through graphscope.native, its one door)."""
    from .. import native

    return native.extension()


Chunk = tuple[int, bytes, dict[str, np.ndarray], dict[str, Any]]
# the byte spans pass 2 edits, kept from pass 1 (int32: offsets within one chunk)
_SPANS = ("begin", "end", "tid_b", "tid_e", "ts_b", "ts_e", "args_close", "stream_b",
          "stream_e")


def _check_frame(path: str, prefix: bytes, suffix: bytes) -> None:
    """What surrounds the events must be JSON too: the top-level object up to the
    traceEvents array, and what follows it (nothing may come after the closing '}')."""
    import json

    try:
        data = json.loads(prefix + suffix)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{path}: invalid JSON around the traceEvents array "
                         f"({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}: the trace's top level must be a JSON object")


_BOUNDARY = re.compile(rb"\}\s*(,)\s*\{")  # an event's end, the comma, the next event's start
_SPLIT_MIN = 1 << 20  # a chunk shorter than twice this is scanned in one piece


def _scan_split(scan: Any, buf: Any, pos: int, need_comma: bool, pool: Any) -> dict[str, Any]:
    """``scan(buf, pos, need_comma)``, its two halves scanned at once (the scanner releases the
    GIL). The second half starts at a guessed event boundary (``}, {``) past the middle; the
    guess holds when the first half, scanned up to that comma, ends exactly there after a
    complete event: then the sequential scan's state at the comma is the second half's start
    state, and the two results concatenated are its result. Otherwise the second half is
    dropped and the scan goes on from where the first half stopped."""
    n = len(buf)
    m = _BOUNDARY.search(buf, pos + (n - pos) // 2) if n - pos >= 2 * _SPLIT_MIN else None
    if m is None:
        return scan(buf, pos, need_comma)
    comma = m.start(1)
    second = pool.submit(scan, buf, comma, True)
    try:
        first = scan(buf, pos, need_comma, comma)
    except BaseException:
        _settle(second)
        raise
    if first["closed"]:  # the array ended before the guess
        _settle(second)
        return first
    if int(first["resume"]) != comma or not first["need_comma"]:
        _settle(second)  # not a boundary (a "}, {" inside a string or an args value)
        rest = scan(buf, int(first["resume"]), bool(first["need_comma"]))
    else:
        rest = second.result()  # its errors are the sequential scan's own
    out = {k: (v + rest[k] if isinstance(v, bytes) else rest[k]) for k, v in first.items()}
    return out


def _settle(fut: Any) -> None:
    """Wait for a speculative scan whose result is not used; its errors do not matter."""
    import contextlib

    with contextlib.suppress(BaseException):
        fut.result()


class _Stream:
    """The trace's bytes read block by block (a file object; gzip inflated on a thread): each
    buffer is the previous one's tail plus the next block, a new bytes object."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._f = open_read(path)
        self._rd = Prefetch(self._f, CHUNK_BYTES)
        self._eof = False
        self.buf: Any = b""

    def _read(self) -> bytes:
        if self._eof:  # the reader thread has stopped
            return b""
        more = self._rd.read()
        self._eof = not more
        return more

    def grow(self) -> bool:
        """Append the next block to ``buf``; False at the end of the file."""
        more = self._read()
        self.buf += more
        return bool(more)

    def advance(self, resume: int) -> bool:
        """``buf`` becomes its bytes from ``resume`` plus the next block; False if there were
        no more bytes."""
        more = self._read()
        self.buf = self.buf[resume:] + more
        return bool(more)

    def close(self) -> None:
        try:
            self._rd.close()
        finally:
            self._f.close()
        self.buf = b""

    def rechunks(self, sizes: list[tuple[int, int]]) -> Iterator[Any]:
        self.close()  # pass 2 reads the file again, on its own thread
        return _rechunks(self.path, sizes)


class _Mapped:
    """A regular uncompressed trace file mapped read-only: every buffer is a memoryview of
    the mapping, so neither pass copies the trace's bytes (no reads, no tail + block
    concatenation). Pages behind the current buffer are dropped from this process's mapping
    as it moves on (the page cache keeps them), so peak RSS stays a few chunks. The one risk
    of a mapping, another process truncating the file while it is read (SIGBUS), is why
    ``GRAPHSCOPE_NO_MMAP=1`` reads instead."""

    def __init__(self, path: str, fd: int, size: int) -> None:
        import mmap

        self.path, self.size = path, size
        self._mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        self._mv = memoryview(self._mm)
        self._start, self._released = 0, 0
        self.buf: Any = self._mv[: min(size, CHUNK_BYTES)]

    @classmethod
    def open(cls, path: str) -> Optional[_Mapped]:
        """The mapped file, or None where it is not mapped (compressed, not a regular file,
        empty, mmap refused, GRAPHSCOPE_NO_MMAP=1)."""
        if path.endswith(".gz") or os.environ.get("GRAPHSCOPE_NO_MMAP") == "1":
            return None
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise TraceError(f"{path}: no such trace file") from None
        except OSError:
            return None  # the read path reports it
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                return None
            try:
                return cls(path, fd, st.st_size)
            except (OSError, ValueError):
                return None
        finally:
            os.close(fd)  # the mapping holds the file

    def _window(self, start: int, length: int) -> Any:
        import mmap

        page = start - start % mmap.PAGESIZE
        if page > self._released and hasattr(mmap, "MADV_DONTNEED"):  # done with these pages
            self._mm.madvise(mmap.MADV_DONTNEED, self._released, page - self._released)
            self._released = page
        self._start = start
        return self._mv[start: start + length]

    def grow(self) -> bool:
        n = len(self.buf)
        if self._start + n >= self.size:
            return False
        self.buf = self._window(self._start, n + CHUNK_BYTES)
        return True

    def advance(self, resume: int) -> bool:
        n = len(self.buf)
        more = self._start + n < self.size
        start = self._start + resume
        self.buf = self._window(start, n - resume + (CHUNK_BYTES if more else 0))
        return more

    def rechunks(self, sizes: list[tuple[int, int]]) -> Iterator[Any]:
        """The same buffers as pass 1's, from the mapping: buffer i + 1 starts at buffer i's
        resume offset."""
        if self.size != _size_of(self.path):
            raise TraceError(f"{self.path}: changed while it was being read")
        self._start, self._released, start = 0, 0, 0
        for size, resume in sizes:
            view = self._window(start, size)
            yield view
            view.release()
            start += resume

    def close(self) -> None:
        self.buf = b""
        self._mv.release()
        try:
            self._mm.close()
        except BufferError:  # a view is still held somewhere: the mapping goes with it
            pass


def _size_of(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def source(path: str) -> Any:
    """The trace's bytes: mapped, or read (see :class:`_Mapped`, :class:`_Stream`). Only a
    regular file is taken: the trace is read twice, which a pipe or device cannot give."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{path}: is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(f"{path}: not a regular file (annotate-trace reads the trace twice: "
                         "save it to a file first)")
    src: Any = _Mapped.open(path)
    if src is not None:
        return src
    try:
        return _Stream(path)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _chunks(src: Any, layout_out: Optional[list[_Layout]] = None,
            sizes_out: Optional[list[tuple[int, int]]] = None) -> Iterator[Chunk]:
    """Yield (buffer index, buffer, columns, raw columns) for runs of complete events of the
    trace ``src`` (a :class:`_Mapped` or :class:`_Stream`).

    ``sizes_out`` gets (len(buffer), resume offset) of every buffer, also of those that end
    before an event does (and yield nothing): ``src.rechunks`` rebuilds the same buffers."""
    from concurrent.futures import ThreadPoolExecutor

    scan = native_ext().scan_events
    path = src.path
    with ThreadPoolExecutor(1, thread_name_prefix="graphscope-scan2") as pool:
        try:
            layout, pos = _events_start(src, path)
            need_comma = False
            n_buf = 0
            while True:
                buf = src.buf
                try:
                    raw = _scan_split(scan, buf, pos, need_comma, pool)
                except RuntimeError as exc:
                    msg = str(exc).split(":", 2)[-1]
                    raise TraceError(f"{path}: invalid JSON in traceEvents ({msg})") from None
                cols = {k: np.frombuffer(v, dtype=DTYPES.get(k, "<i8"))
                        for k, v in raw.items() if isinstance(v, bytes)}
                resume = int(raw["resume"])
                if sizes_out is not None:
                    sizes_out.append((len(buf), resume))
                if len(cols["begin"]):
                    yield n_buf, buf, cols, raw
                del buf
                n_buf += 1
                need_comma = bool(raw["need_comma"])
                if raw["closed"]:
                    layout.suffix = _after_events(src, resume, layout, path)
                    break
                if not src.advance(resume):
                    raise TraceError(f"{path}: truncated JSON (the traceEvents array never "
                                     "closes)")
                if len(src.buf) > _MAX_EVENT + CHUNK_BYTES:
                    raise TraceError(f"{path}: an event larger than {_MAX_EVENT >> 20} MiB: "
                                     "not a trace graphscope reads")
                pos = 0
        except read_errors() as exc:
            raise TraceError(f"{path}: cannot read ({exc})") from None
    if layout_out is not None:
        layout_out.append(layout)


def _events_start(src: Any, path: str) -> tuple[_Layout, int]:
    """The layout's prefix (everything up to ``"traceEvents": [``) and the offset of the
    first event in ``src.buf``; a file with no such array is refused."""
    if not len(src.buf):
        src.grow()
    while True:
        m = _EVENTS_KEY.search(src.buf)
        if m:
            break
        if len(src.buf) > (64 << 20) or not src.grow():
            raise TraceError(f"{path}: no \"traceEvents\" array: not a Chrome/Kineto trace")
    # a UTF-8 BOM before the trace stays in the input: json.load refuses one
    layout = _Layout(prefix=bytes(src.buf[: m.end()]).removeprefix(_BOM))
    _check_frame(path, layout.prefix, b"]}")
    return layout, m.end()


def _after_events(src: Any, resume: int, layout: _Layout, path: str) -> bytes:
    """What follows the closing ``]`` of the events (read to the end, checked)."""
    src.advance(resume)
    while len(src.buf) <= _MAX_SUFFIX and src.grow():
        pass
    rest = bytes(src.buf)
    if len(rest) > _MAX_SUFFIX:
        raise TraceError(f"{path}: more than {_MAX_SUFFIX >> 20} MiB after the "
                         "traceEvents array: not a trace graphscope reads")
    if not rest.rstrip().endswith(b"}"):
        raise TraceError(f"{path}: truncated after the traceEvents array")
    _check_frame(path, layout.prefix, b"]" + rest)
    return rest


def _rechunks(path: str, sizes: list[tuple[int, int]]) -> Iterator[bytes]:
    """The buffers of :func:`_chunks` again, in order (one per entry of ``sizes``), without
    scanning: each is the previous one's tail from its resume offset plus the next bytes. A
    thread makes each buffer (one read of exactly the bytes it lacks) while the caller works on
    the previous one."""
    import queue
    import threading

    q: Any = queue.Queue(maxsize=1)
    stop = threading.Event()

    def run() -> None:
        try:
            with open_read(path) as f:
                carry = b""
                for size, resume in sizes:
                    more = f.read(size - len(carry))
                    if len(more) != size - len(carry):
                        raise TraceError(f"{path}: changed while it was being read")
                    text = carry + more if carry else more
                    del more
                    while not stop.is_set():
                        try:
                            q.put(text, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
                    carry = text[resume:]
                    del text
            q.put(None)
        except FileNotFoundError:
            q.put(TraceError(f"{path}: no such trace file"))
        except read_errors() as exc:
            q.put(TraceError(f"{path}: cannot read ({exc})"))
        except BaseException as exc:
            q.put(exc)

    t = threading.Thread(target=run, name="graphscope-reread", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            del item
    finally:
        stop.set()
        drain(q, t)
