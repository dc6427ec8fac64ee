"""Join graphscope (or PyTorch) annotations onto an existing profiler trace, streaming.

Join key: a work event's ``args["graph node id"]``. Two forms exist: Kineto's packed 64-bit
``exec_id << 32 | local_id``, and PyTorch's in-process exporter's low 32 bits next to a separate
``args["graph id"]``; both are turned into the packed form. Traces without graph node ids
(torch <= 2.11) are matched against a bundle instead: per graph launch (one correlation id), the
replayed kernels' (name, grid, block) sequence is matched to the bundle's recorded execution
order, and the match rate is reported. No clocks are aligned: times are never compared across
files.

Event-level semantics follow PyTorch's ``torch/cuda/_annotate_cuda_graph_trace.py`` (2.14.1) so
that for the same input the output's args are a superset of its: annotation values are written
with ``str()``, graphed work moves to its annotated ``stream`` (else ``default_stream``) together
with its ``ac2g`` flow end, ``gpu_user_annotation``/``ac2g`` noise on streams without work is
dropped, thread-name metadata of emptied streams is removed and added for new ones, graphed
kernels overlapping their predecessor on the default stream move to stream 8, and sub-µs
timestamp overlaps are clamped. graphscope adds a "modules" track (spans of each module's work
per graph launch) and, from a bundle, the op, shapes and source of every node.

Two streaming passes, chunk by chunk: the first scans the JSON (natively, each chunk's two halves
at once) and keeps compact per-event columns, including the byte spans the second pass edits;
the second takes the same chunks again and splices (natively) without scanning again, while a
thread builds the module track. A plain .json is memory-mapped, so chunks are views of the
file (no read copies); a .gz is read and inflated on a thread. Writing (with compression) runs
on its own thread; the native code releases the GIL.
Peak memory is a few chunks plus those columns, not the whole trace.
"""

from __future__ import annotations

import errno
import gzip
import os
import pickle
import re
import stat
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Optional

import numpy as np

from .._errors import GraphscopeError

WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
CHUNK_BYTES = 8 << 20
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


class TraceError(GraphscopeError):
    """The trace or annotation file cannot be read."""


# ------------------------------------------------------------------ annotations in
class _SafeUnpickler(pickle.Unpickler):
    """Admits plain containers and scalars only: a pickle naming any class or function is
    refused, so loading an annotation pickle cannot run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise TraceError(f"annotation pickle refers to {module}.{name}: only plain dicts, "
                         "lists, strings and numbers are accepted")


class _OverBudget(Exception):
    pass


def _normalise(entries: Any, budget: Optional[list[int]] = None) -> dict[str, Any]:
    """One node's annotation list (PyTorch shape, legacy shapes too) -> merged dict."""
    items = entries if isinstance(entries, (list, tuple)) else [entries]
    merged: dict[str, Any] = {}
    for ann in items:
        if isinstance(ann, Mapping):
            if budget is not None:
                budget[0] -= len(ann) + 1
                if budget[0] < 0:
                    raise _OverBudget
            for k, v in ann.items():
                if isinstance(v, (list, tuple, dict)) and budget is not None:
                    v = _bounded(v, budget)
                merged["name" if k == "str" else str(k)] = v
        else:
            merged["name"] = ann
    return merged


def _bounded(v: Any, budget: list[int], depth: int = 0) -> Any:
    """``v`` if walking it stays within the budget (nested values are stringified later)."""
    if depth > 64:
        raise _OverBudget
    items = v.values() if isinstance(v, dict) else v
    budget[0] -= len(items) + 1
    if budget[0] < 0:
        raise _OverBudget
    for x in items:
        if isinstance(x, (list, tuple, dict)):
            _bounded(x, budget, depth + 1)
    return v


def load_annotations(path: str) -> tuple[dict[int, dict[str, Any]], Any]:
    """Annotation map from a bundle dir, graphscope's annotations.json, or a PyTorch pickle.

    Returns ``({exec node id: merged dict}, bundle or None)``.
    """
    if os.path.isdir(path):
        from ..bundle import read_bundle

        b = read_bundle(path)
        amap = {n.exec_node_id: dict(n.annotation) for n in b.work_nodes() if n.annotation}
        return amap, b
    import io

    try:
        if os.path.getsize(path) > _MAX_PICKLE:
            raise TraceError(f"{path}: larger than {_MAX_PICKLE >> 30} GiB: not an annotation "
                             "file")
        with open(path, "rb") as f:
            # Read first, unpickle from memory: a length field in the pickle can then never
            # make the reader allocate more than the file holds.
            raw = f.read(_MAX_PICKLE)
        if raw[:1] in (b"{", b"[", b" ", b"\n"):
            import json

            data = json.loads(raw)
            if isinstance(data, dict) and "annotations" in data:
                data = data["annotations"]
        else:
            data = _SafeUnpickler(io.BytesIO(raw)).load()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such annotation file") from None
    except (pickle.UnpicklingError, EOFError, ValueError, RecursionError, MemoryError,
            OverflowError) as exc:
        raise TraceError(f"{path}: not an annotation pickle or JSON ({exc})") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}: expected {{exec node id: [annotation dict]}}, "
                         f"got {type(data).__name__}")
    # Shared references (pickle memo) can make a small file a huge tree: walk a bounded
    # number of items, linear in the file's size.
    budget = [64 * len(raw) + 4096]
    try:
        return {int(k): _normalise(v, budget) for k, v in data.items()}, None
    except (TypeError, ValueError, OverflowError) as exc:
        raise TraceError(f"{path}: keys must be exec node ids ({exc})") from None
    except _OverBudget:
        raise TraceError(f"{path}: expands to far more annotations than its size allows "
                         "(shared references): not an annotation file graphscope reads"
                         ) from None


# ------------------------------------------------------------------ chunked JSON
@dataclass
class _Layout:
    prefix: bytes  # everything before the first event (includes '"traceEvents": [')
    suffix: bytes = b""  # everything after the closing ']'


def _igzip() -> Any:
    """python-isal's igzip where it is installed (a dependency on the platforms it has wheels
    for): the same gzip format through Intel's ISA-L, ~4x zlib's speed at level 1 and faster
    to inflate. None without it, or with GRAPHSCOPE_ZLIB=1."""
    if os.environ.get("GRAPHSCOPE_ZLIB") == "1":
        return None
    try:
        from isal import igzip
    except ImportError:
        return None
    return igzip


def _read_errors() -> tuple[type[BaseException], ...]:
    """What a damaged compressed input raises (zlib's, and ISA-L's own error type)."""
    import zlib

    errs: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)
    if _igzip() is not None:
        from typing import cast

        from isal import isal_zlib

        errs += (cast("type[BaseException]", isal_zlib.error),)
    return errs


def _open(path: str) -> IO[bytes]:
    if path.endswith(".gz"):
        return (_igzip() or gzip).open(path, "rb")
    return open(path, "rb")


def _ext() -> Any:
    from .. import native

    return native.extension()


Chunk = tuple[int, bytes, dict[str, np.ndarray], dict[str, Any]]
# the byte spans pass 2 edits, kept from pass 1 (int32: offsets within one chunk)
_SPANS = ("begin", "end", "tid_b", "tid_e", "ts_b", "ts_e", "args_close", "stream_b",
          "stream_e")


class _Prefetch:
    """Reads a file object block by block on a thread (file reads and gzip inflation release
    the GIL), one block ahead of the consumer."""

    def __init__(self, f: IO[bytes], block: int) -> None:
        import queue
        import threading

        self._q: Any = queue.Queue(maxsize=2)
        self._stop = False
        self._f, self._block = f, block

        def run() -> None:
            try:
                while not self._stop:
                    more = f.read(block)
                    self._q.put(more)
                    if not more:
                        return
            except BaseException as exc:  # handed to the consumer
                self._q.put(exc)

        self._t = threading.Thread(target=run, name="graphscope-read", daemon=True)
        self._t.start()

    def read(self) -> bytes:
        """The next block (b"" at the end of the file)."""
        more = self._q.get()
        if isinstance(more, BaseException):
            raise more
        return more

    def close(self) -> None:
        self._stop = True
        _drain(self._q, self._t)


def _drain(q: Any, t: Any) -> None:
    """Empty ``q`` until its producer thread ``t`` has stopped (it may block on a full q)."""
    import contextlib
    import queue

    while t.is_alive():
        with contextlib.suppress(queue.Empty):
            q.get(timeout=0.05)
    t.join()


class _Writer:
    """Writes (and compresses) on a thread, in order; errors surface at the next call.

    A plain output file is written with O_DIRECT where the file system takes it: the bytes go
    from one reused, page-aligned staging buffer to the disk, so a large trace costs disk time
    on this thread instead of fresh page-cache pages on the CPU (and does not evict the page
    cache). Elsewhere (gzip, pipes, tmpfs, a refused first write) it writes through ``w``."""

    def __init__(self, w: IO[bytes], direct: bool = True) -> None:
        import queue
        import threading

        self._q: Any = queue.Queue(maxsize=2)
        self._err: Optional[BaseException] = None
        self.queued = 0  # bytes handed over so far: the file offset they end at
        self._w = w
        self._reserved = 0  # bytes preallocated (posix_fallocate), 0 where not possible
        self._dfd = self._open_direct() if direct else None
        self.direct = self._dfd is not None  # what the writes went through (tests, doctor)

        def run() -> None:
            sink: Any = w
            try:
                if self._dfd is not None:
                    sink = _DirectSink(self._dfd, w)
                while True:
                    data = self._q.get()
                    if data is None:
                        if self._err is None and isinstance(sink, _DirectSink):
                            self._pad = sink.end()
                            self.direct = sink.direct
                        return
                    if self._err is None:
                        sink.write(data)
            except BaseException as exc:
                self._err = exc
                while self._q.get() is not None:  # let the producer finish its puts
                    pass
            finally:
                if isinstance(sink, _DirectSink):
                    sink.close()
                elif self._dfd is not None:
                    os.close(self._dfd)

        self._t = threading.Thread(target=run, name="graphscope-write", daemon=True)
        self._t.start()

    def _open_direct(self) -> Optional[int]:
        if isinstance(self._w, gzip.GzipFile) or not hasattr(os, "O_DIRECT") or \
                os.environ.get("GRAPHSCOPE_BUFFERED_OUTPUT"):
            return None
        try:
            fd = self._w.fileno()
            if not stat.S_ISREG(os.fstat(fd).st_mode) or self._w.tell() != 0:
                return None
            return os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_DIRECT)
        except (AttributeError, OSError, ValueError):
            return None

    def write(self, data: bytes) -> None:
        if self._err is not None:
            raise self._err
        if data:
            self.queued += len(data)
            self._q.put(data)

    def reserve(self, nbytes: int) -> None:
        """Preallocate the next ``nbytes`` of a regular output file: ext4 then skips its block
        reservation on every page written (several times faster for a big trace). Where the
        output is not a plain file (gzip, a pipe, stdout) or the call fails, nothing happens."""
        if isinstance(self._w, gzip.GzipFile) or nbytes <= 0:
            return
        try:
            fd = self._w.fileno()
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            os.posix_fallocate(fd, self.queued, nbytes)
            self._reserved = max(self._reserved, self.queued + nbytes)
        except (AttributeError, OSError, ValueError):
            pass

    _pad = 0  # bytes the direct path padded its last block with

    def finish(self) -> None:
        """Close the queue; cut a preallocated (or block-padded) file back to what was
        written."""
        self.close()
        if self._reserved > self.queued or self._pad:
            self._w.flush()
            os.ftruncate(self._w.fileno(), self.queued)

    def close(self) -> None:
        self._q.put(None)
        self._t.join()
        self._dfd = None  # the sink closed it
        if self._err is not None:
            raise self._err

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.finish()
        else:
            self.close()


class _DirectSink:
    """Writes byte strings in order through an O_DIRECT descriptor, in aligned blocks from one
    reused page-aligned staging buffer. If the very first write is refused (EINVAL: the file
    system takes no direct I/O) everything goes through the buffered file object instead."""

    STAGE = 8 << 20  # a multiple of any block size
    BLOCK = 4096  # O_DIRECT alignment of offsets and lengths

    def __init__(self, dfd: int, fallback: IO[bytes]) -> None:
        import mmap

        self._dfd: Optional[int] = dfd
        self._w = fallback
        self._stage = mmap.mmap(-1, self.STAGE)
        self._view = memoryview(self._stage)
        self._fill = 0  # bytes staged
        self._off = 0  # file offset of the stage's first byte
        self.direct = True

    def _put(self, nbytes: int) -> bool:
        """Write stage[:nbytes] at the current offset; False: direct I/O refused up front."""
        done = 0
        while done < nbytes:
            try:
                n = os.pwrite(self._dfd, self._view[done:nbytes],  # type: ignore[arg-type]
                              self._off + done)
            except OSError as exc:
                if self._off == 0 and done == 0 and exc.errno == errno.EINVAL:
                    return False
                raise
            if n <= 0:
                raise OSError(errno.EIO, "short write to the output file")
            done += n
        return True

    def _fall_back(self) -> None:
        self.direct = False
        self._w.write(self._view[: self._fill])
        self._fill = 0

    def write(self, data: bytes) -> None:
        if not self.direct:
            self._w.write(data)
            return
        mv = memoryview(data)
        while len(mv):
            n = min(len(mv), self.STAGE - self._fill)
            self._view[self._fill:self._fill + n] = mv[:n]
            self._fill += n
            mv = mv[n:]
            if self._fill == self.STAGE:
                if not self._put(self._fill):
                    self._fall_back()
                    self._w.write(mv)
                    return
                self._off += self._fill
                self._fill = 0

    def end(self) -> int:
        """Write the tail padded to a block; returns the padding the caller truncates away."""
        if not self.direct or not self._fill:
            return 0
        fill = self._fill
        padded = -(-fill // self.BLOCK) * self.BLOCK
        self._view[fill:padded] = bytes(padded - fill)
        if not self._put(padded):
            self._fall_back()
            return 0
        self._fill = 0
        return padded - fill

    def close(self) -> None:
        import contextlib

        if self._dfd is not None:
            os.close(self._dfd)
            self._dfd = None
        with contextlib.suppress(BufferError):  # a traceback may still hold a slice of it
            self._view.release()
            self._stage.close()


_MAX_SUFFIX = 64 << 20
_MAX_EVENT = 64 << 20  # one trace event; real ones are under a kilobyte
_MAX_PICKLE = 1 << 30


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
        self._f = _open(path)
        self._rd = _Prefetch(self._f, CHUNK_BYTES)
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


def _source(path: str) -> Any:
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

    scan = _ext().scan_events
    path = src.path
    with ThreadPoolExecutor(1, thread_name_prefix="graphscope-scan2") as pool:
        try:
            if not len(src.buf):
                src.grow()
            while True:
                m = _EVENTS_KEY.search(src.buf)
                if m:
                    break
                if len(src.buf) > (64 << 20) or not src.grow():
                    raise TraceError(f"{path}: no \"traceEvents\" array: not a Chrome/Kineto "
                                     "trace")
            layout = _Layout(prefix=bytes(src.buf[: m.end()]))
            _check_frame(path, layout.prefix, b"]}")
            pos = m.end()
            need_comma = False
            n_buf = 0
            while True:
                buf = src.buf
                try:
                    raw = _scan_split(scan, buf, pos, need_comma, pool)
                except RuntimeError as exc:
                    msg = str(exc).split(":", 2)[-1]
                    raise TraceError(f"{path}: invalid JSON in traceEvents ({msg})") from None
                cols = {k: np.frombuffer(v, dtype=_DTYPES.get(k, "<i8"))
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
                    layout.suffix = rest
                    break
                if not src.advance(resume):
                    raise TraceError(f"{path}: truncated JSON (the traceEvents array never "
                                     "closes)")
                if len(src.buf) > _MAX_EVENT + CHUNK_BYTES:
                    raise TraceError(f"{path}: an event larger than {_MAX_EVENT >> 20} MiB: "
                                     "not a trace graphscope reads")
                pos = 0
        except _read_errors() as exc:
            raise TraceError(f"{path}: cannot read ({exc})") from None
    if layout_out is not None:
        layout_out.append(layout)


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
            with _open(path) as f:
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
        except _read_errors() as exc:
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
        _drain(q, t)


@dataclass
class AnnotateResult:
    events_in: int = 0
    events_out: int = 0
    graphed_events: int = 0
    annotated_events: int = 0
    matched_by_sequence: int = 0
    sequence_candidates: int = 0
    moved_overlapping: int = 0
    timestamps_fixed: int = 0
    noise_removed: int = 0
    module_spans: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def match_rate(self) -> Optional[float]:
        if not self.sequence_candidates:
            return None
        return 100.0 * self.matched_by_sequence / self.sequence_candidates


_MODULES_PID = "graphscope modules"
_DTYPES = {"cat": "i1", "ph": "i1", "has_gnid": "u1", "tid": "<f8", "ts": "<f8", "dur": "<f8",
           "gnid": "<u8", "gid": "<u8"}
CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET, CAT_AC2G, CAT_RUNTIME, CAT_USER = 1, 2, 3, 4, 5, 6
PH_M, PH_F = ord("M"), ord("f")
_NO_TID = -(1 << 62)
_UNCHANGED = np.iinfo(np.int64).min


def _int_tids(a: np.ndarray) -> np.ndarray:
    ok = np.isfinite(a)
    return np.where(ok, np.where(ok, a, 0).astype(np.int64), _NO_TID)


def _decode(text: Any, b: int, e: int) -> dict[str, Any]:
    import json

    try:
        out = json.loads(bytes(text[b:e]))
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"invalid JSON in an event at byte {b} ({exc})") from None
    return out if isinstance(out, dict) else {}


def _fragment(ann: Mapping[str, Any], extra: Optional[Mapping[str, Any]] = None) -> str:
    import json

    parts = [f"{json.dumps(str(k))}: {json.dumps(str(v))}" for k, v in ann.items()
             if k != "stream"]
    for k, v in (extra or {}).items():
        if v and k not in ann:
            parts.append(f"{json.dumps(k)}: {json.dumps(v, default=str, allow_nan=False)}")
    return ", ".join(parts)


def _sequential_drop(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """PyTorch's overlap rule on events sorted by ts: an event starting before the previous
    *kept* event's end is moved. Vectorised when nothing overlaps (the usual case)."""
    ends = ts + dur
    prev = np.concatenate(([0.0], np.maximum.accumulate(ends)[:-1]))
    moved = np.zeros(len(ts), dtype=bool)
    if len(ts) == 0 or bool(np.all(ts >= prev)):
        return moved
    prev_end = 0.0
    for j, (t, d) in enumerate(zip(ts.tolist(), dur.tolist())):
        if t < prev_end:
            moved[j] = True
        else:
            prev_end = t + d
    return moved


def _clamp(ts: np.ndarray, dur: np.ndarray, res: AnnotateResult, tid: Any) -> np.ndarray:
    """Clamp sub-µs overlaps of events sorted by ts (PyTorch's rule)."""
    ends = ts + dur
    prev = np.concatenate(([0.0], np.maximum.accumulate(ends)[:-1]))
    if len(ts) == 0 or bool(np.all(ts >= prev)):
        return ts
    out = ts.copy()
    prev_end = 0.0
    for j in range(len(out)):
        t = out[j]
        if t < prev_end:
            if prev_end - t <= 1.0:
                out[j] = prev_end
                res.timestamps_fixed += 1
            elif len(res.notes) < 20:
                res.notes.append(f"large overlap {prev_end - t:.3f}us on stream {tid}, left")
        prev_end = out[j] + dur[j]
    return out


def annotate_trace_file(
    trace_path: str,
    annotations_path: str,
    out_path: str,
    *,
    default_stream: int = 7,
    overlap_stream: int = 8,
    module_track: bool = True,
    gzip_level: int = 1,
    force: bool = True,
) -> AnnotateResult:
    """Write ``out_path``: ``trace_path`` with annotations joined on. Atomic: on any error no
    output file is left behind. The output rules of :mod:`graphscope.outputs` apply (never
    onto an input; a device or FIFO is written in place; ``-`` is stdout)."""
    from ..outputs import check_output

    how = check_output(out_path, force=force, inputs=(trace_path, annotations_path),
                       what="annotated trace")
    amap, bundle = load_annotations(annotations_path)
    src = _source(trace_path)
    try:
        return _annotate(src, amap, bundle, out_path, how, default_stream=default_stream,
                         overlap_stream=overlap_stream, module_track=module_track,
                         gzip_level=gzip_level)
    finally:
        src.close()


def _annotate(src: Any, amap: dict[int, dict[str, Any]], bundle: Any, out_path: str, how: str,
              *, default_stream: int, overlap_stream: int, module_track: bool,
              gzip_level: int) -> AnnotateResult:
    res = AnnotateResult()
    nodes = {n.exec_node_id: n for n in bundle.work_nodes()} if bundle is not None else {}
    ann_keys = np.array(sorted(amap), dtype=np.uint64)
    ann_stream = np.array([int(amap[int(k)]["stream"]) if _is_int(amap[int(k)].get("stream"))
                           else _UNCHANGED for k in ann_keys.tolist()], dtype=np.int64)
    frags = [_fragment(amap[k], _extras(nodes.get(k))) for k in ann_keys.tolist()]

    # ---- pass 1: columns
    g_ord, g_key, g_tid, g_ts, g_dur, g_kernel, g_corr = [], [], [], [], [], [], []
    plain_work_tids: set[int] = set()
    other_tids: set[int] = set()
    noise: list[tuple[int, int, float, int]] = []  # ordinal, tid, ts, cat
    meta: list[tuple[int, int, dict[str, Any]]] = []  # ordinal, tid, event
    launches: set[int] = set()
    seq_events: dict[int, list[tuple[float, int, str, tuple, tuple]]] = defaultdict(list)
    seq_times: dict[int, tuple[float, float]] = {}  # ordinal -> (ts, dur) of those kernels
    layout: list[_Layout] = []
    sizes: list[tuple[int, int]] = []
    spans_of: dict[int, tuple[np.ndarray, ...]] = {}  # buffer index -> _SPANS columns (int32)
    base = 0
    for i_buf, text, c, _ in _chunks(src, layout, sizes):
        spans_of[i_buf] = tuple(c[k].astype(np.int32) for k in _SPANS)
        n = len(c["begin"])
        cat, ph = c["cat"], c["ph"]
        tid = _int_tids(c["tid"])
        work = (cat >= CAT_KERNEL) & (cat <= CAT_MEMSET)
        key = c["gnid"].copy()
        low = (key >> np.uint64(32) == 0) & (c["gid"] != 0)
        key[low] |= c["gid"][low] << np.uint64(32)
        graphed = work & (c["has_gnid"] == 1) & (key != 0)
        idx = np.nonzero(graphed)[0]
        g_ord.append(idx + base)
        g_key.append(key[idx])
        g_tid.append(tid[idx])
        g_ts.append(c["ts"][idx])
        g_dur.append(np.nan_to_num(c["dur"][idx]))
        g_kernel.append(cat[idx] == CAT_KERNEL)
        g_corr.append(c["corr"][idx])
        plain_work_tids.update(tid[work & ~graphed].tolist())
        is_noise = (cat == CAT_USER) | ((cat == CAT_AC2G) & (ph == PH_F))
        is_meta = ph == PH_M
        other_tids.update(tid[~graphed & ~is_noise & ~is_meta].tolist())
        noise.extend((base + j, int(tid[j]), float(c["ts"][j]), int(cat[j]))
                     for j in np.nonzero(is_noise)[0].tolist())
        meta.extend((base + j, int(tid[j]), _decode(text, int(c["begin"][j]), int(c["end"][j])))
                    for j in np.nonzero(is_meta)[0].tolist())
        for j in np.nonzero(cat == CAT_RUNTIME)[0].tolist():
            nb, ne = int(c["name_b"][j]), int(c["name_e"][j])
            if nb >= 0 and b"GraphLaunch" in bytes(text[nb:ne]):
                launches.add(int(c["corr"][j]))
        if bundle is not None:
            for j in np.nonzero((cat == CAT_KERNEL) & ~graphed & (c["corr"] >= 0))[0].tolist():
                e = _decode(text, int(c["begin"][j]), int(c["end"][j]))
                a = e.get("args") or {}
                seq_events[int(c["corr"][j])].append(
                    (float(e.get("ts", 0.0)), base + j, str(e.get("name", "")),
                     tuple(a.get("grid", ())), tuple(a.get("block", ()))))
                seq_times[base + j] = (float(c["ts"][j]), float(c["dur"][j]))
        base += n
    res.events_in = base
    o = _cat(g_ord, np.int64)
    keys = _cat(g_key, np.uint64)
    old_tid = _cat(g_tid, np.int64)
    ts0 = _cat(g_ts, np.float64)
    dur = _cat(g_dur, np.float64)
    is_kernel = _cat(g_kernel, np.bool_)
    corr = _cat(g_corr, np.int64)
    res.graphed_events = len(o)

    # ---- decisions, vectorised
    pos = np.searchsorted(ann_keys, keys) if len(ann_keys) else np.zeros(len(keys), np.int64)
    hit = (pos < len(ann_keys)) & (ann_keys[np.minimum(pos, max(len(ann_keys) - 1, 0))] == keys) \
        if len(ann_keys) else np.zeros(len(keys), bool)
    frag_of = np.where(hit, pos, -1).astype(np.int32)
    res.annotated_events = int(hit.sum())
    st = ann_stream[np.minimum(pos, max(len(ann_keys) - 1, 0))] if len(ann_keys) else None
    new_tid = np.full(len(o), default_stream, dtype=np.int64)
    # the distinct new tids, from the few sources they come from (not a set of 1M values)
    new_tids: set[int] = set()
    if st is not None:
        with_stream = hit & (st != _UNCHANGED)
        new_tid[with_stream] = st[with_stream]
        used = np.zeros(len(ann_keys), dtype=bool)
        used[pos[with_stream]] = True
        new_tids = set(ann_stream[used].tolist())
        if not with_stream.all():
            new_tids.add(default_stream)
    elif len(o):
        new_tids = {default_stream}
    work_tids = plain_work_tids | new_tids

    # ac2g flow ends follow the graphed event they sit on (same old tid and ts; the last wins)
    ac2g_tid: dict[int, int] = {}
    if noise and len(o):
        order = np.argsort(ts0, kind="stable")
        ts_sorted = ts0[order]
        for ordinal, t, ts, cat_ in noise:
            if cat_ != CAT_AC2G:
                continue
            lo, hi = np.searchsorted(ts_sorted, [ts, ts], side="left")[0], np.searchsorted(
                ts_sorted, ts, side="right")
            cand = order[lo:hi]
            cand = cand[old_tid[cand] == t]
            if len(cand):
                ac2g_tid[ordinal] = int(new_tid[cand.max()])
    drop: set[int] = set()
    kept_noise_tids: set[int] = set()
    for ordinal, t, _, _ in noise:
        t2 = ac2g_tid.get(ordinal, t)
        if t2 not in work_tids:
            drop.add(ordinal)
        else:
            kept_noise_tids.add(t2)
    res.noise_removed = len(drop)
    all_tids = other_tids | new_tids | kept_noise_tids
    named: set[int] = set()
    gpu_pid: Any = None
    for ordinal, t, e in meta:
        if t not in all_tids:
            drop.add(ordinal)
        elif e.get("name") == "thread_name":
            named.add(t)
    for _, _, e in meta:
        if (e.get("name") == "thread_name"
                and str((e.get("args") or {}).get("name", "")).startswith("stream ")):
            gpu_pid = e.get("pid", 0)
            break

    # overlaps on the default stream move to overlap_stream; then sub-µs clamps per stream
    final_tid = new_tid.copy()
    new_ts = ts0.copy()
    if len(o):
        d_idx = np.nonzero((new_tid == default_stream) & is_kernel)[0]
        d_idx = d_idx[np.argsort(ts0[d_idx], kind="stable")]
        moved = _sequential_drop(ts0[d_idx], dur[d_idx])
        final_tid[d_idx[moved]] = overlap_stream
        res.moved_overlapping = int(moved.sum())
        # per stream (ascending), its events by start time, ties in trace order
        for t in sorted(new_tids | ({overlap_stream} if res.moved_overlapping else set())):
            sel = np.nonzero(final_tid == t)[0]
            sel = sel[np.argsort(ts0[sel], kind="stable")]
            new_ts[sel] = _clamp(ts0[sel], dur[sel], res, t)

    # sequence matching for traces without graph node ids (needs a bundle)
    seq_frag: dict[int, int] = {}
    # the module track's inputs: per event, its module (an index into `modules`), launch,
    # start and duration; graphed events first (by annotation key), then matched ones
    modules: list[Any] = [amap[k].get("module_name") for k in ann_keys.tolist()]
    track_of, track_corr, track_ts, track_dur = frag_of, corr, new_ts, dur
    if bundle is not None and seq_events:
        matched = _match_sequences(bundle, {k: v for k, v in seq_events.items()
                                            if k in launches}, res)
        corr_of = {ordinal: c for c, evs in seq_events.items() for _, ordinal, *_ in evs}
        m_of, m_corr, m_ts, m_dur = [], [], [], []
        for ordinal, a in matched.items():
            seq_frag[ordinal] = len(frags)
            frags.append(_fragment(a))
            m_of.append(len(modules))
            modules.append(a.get("module_name"))
            m_corr.append(corr_of[ordinal])
            m_ts.append(seq_times[ordinal][0])
            m_dur.append(seq_times[ordinal][1])
        res.annotated_events += len(matched)
        if m_of:
            track_of = np.concatenate([frag_of, np.array(m_of, dtype=np.int32)])
            track_corr = np.concatenate([corr, np.array(m_corr, dtype=np.int64)])
            track_ts = np.concatenate([new_ts, np.array(m_ts)])
            track_dur = np.concatenate([dur, np.array(m_dur)])

    # ---- pass 2: splice and write (the module track, made meanwhile on a thread, last)
    ts_changed = new_ts != ts0
    del ts0, old_tid, is_kernel, new_tid, pos, st, keys, hit  # pass 2 and the track need none
    _trim()
    drop_at = np.array(sorted(drop), dtype=np.int64)
    ac2g_at = np.array(sorted(ac2g_tid), dtype=np.int64)
    ac2g_to = np.array([ac2g_tid[k] for k in ac2g_at.tolist()], dtype=np.int64)
    seq_at = np.array(sorted(seq_frag), dtype=np.int64)
    seq_to = np.array([seq_frag[k] for k in seq_at.tolist()], dtype=np.int32)
    ext = _ext()
    from ..outputs import temp_path_for

    gz = out_path.endswith(".gz")
    tmp = temp_path_for(out_path) if how == "atomic" else (
        "/dev/stdout" if how == "stdout" else out_path)
    try:
        from concurrent.futures import ThreadPoolExecutor

        with _open_out(tmp, gzip_level, gz) as f_out, _Writer(f_out) as w, \
                ThreadPoolExecutor(1, thread_name_prefix="graphscope-modules") as pool:
            # the module track is made (natively, without the GIL) while the events are spliced
            spans_fut = pool.submit(_module_spans, modules, track_of, track_corr, track_ts,
                                    track_dur) \
                if module_track else None
            in_bytes = sum(r for _, r in sizes[:-1]) + sizes[-1][0] + len(layout[0].suffix) \
                if sizes else 0
            hit_frags = frag_of[frag_of >= 0]
            frag_bytes = int((np.array([len(f) + 2 for f in frags], dtype=np.int64)[hit_frags]
                              ).sum()) if len(hit_frags) else 0
            w.reserve(in_bytes + frag_bytes + 24 * len(o) + (1 << 20))
            w.write(layout[0].prefix)
            first = True
            base = 0
            for i_buf, text in enumerate(src.rechunks(sizes)):
                span_cols = spans_of.pop(i_buf, None)
                if span_cols is None:
                    continue
                n = len(span_cols[0])
                lo, hi = np.searchsorted(o, [base, base + n])
                rel = o[lo:hi] - base
                keep = np.ones(n, dtype=np.uint8)
                a_, b_ = np.searchsorted(drop_at, [base, base + n])
                keep[drop_at[a_:b_] - base] = 0
                tid_plan = np.full(n, _UNCHANGED, dtype=np.int64)
                stream_plan = np.full(n, _UNCHANGED, dtype=np.int64)
                ts_plan = np.full(n, np.nan)
                frag_plan = np.full(n, -1, dtype=np.int32)
                tid_plan[rel] = final_tid[lo:hi]
                stream_plan[rel] = final_tid[lo:hi]
                ch = ts_changed[lo:hi]
                ts_plan[rel[ch]] = new_ts[lo:hi][ch]
                frag_plan[rel] = frag_of[lo:hi]
                a_, b_ = np.searchsorted(ac2g_at, [base, base + n])
                tid_plan[ac2g_at[a_:b_] - base] = ac2g_to[a_:b_]
                a_, b_ = np.searchsorted(seq_at, [base, base + n])
                frag_plan[seq_at[a_:b_] - base] = seq_to[a_:b_]
                out = ext.rewrite_events(text, *(a.astype(np.int64) for a in span_cols), keep,
                                         tid_plan, ts_plan, stream_plan, frag_plan, frags)
                if out:
                    if not first:
                        w.write(b",")
                    w.write(out)
                    first = False
                res.events_out += int(keep.sum())
                base += n
            import json

            extra = [json.dumps({"ph": "M", "pid": gpu_pid if gpu_pid is not None else 0,
                                 "tid": t, "name": "thread_name",
                                 "args": {"name": f"stream {t}"}}).encode()
                     for t in sorted(t for t in work_tids - named if t != _NO_TID)]
            track = spans_fut.result() if spans_fut is not None else None
            parts: Iterator[bytes] = iter(extra)
            hint = sum(len(p) + 1 for p in extra) + len(layout[0].suffix) + 16
            if track is not None:
                import itertools

                parts = itertools.chain(extra, track.pieces())
                hint += track.size_hint
                res.module_spans = len(track.slices)
                res.events_out += len(track.head) + len(track.tail) + len(track.slices)
            w.reserve(hint)
            res.events_out += len(extra)
            for part in parts:  # the track rendered while the writer writes what came before
                if not first:
                    w.write(b",")
                w.write(part)
                first = False
            w.write(b"]" + layout[0].suffix)
        if how == "atomic":
            if os.path.exists(out_path):
                # Renaming over an existing file makes ext4 (auto_da_alloc) flush the new
                # file's data synchronously: seconds for a big trace. The user asked (--force)
                # to replace it.
                os.unlink(out_path)
            os.replace(tmp, out_path)
    except BaseException:
        if how == "atomic" and os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return res


def _extras(node: Any) -> Optional[dict[str, Any]]:
    if node is None:
        return None
    return {"op": node.op, "shapes": node.shapes, "source": node.source}


@dataclass
class _ModuleTrack:
    """The modules track: its metadata events and the native slices, rendered as JSON piece
    by piece while they are written (hundreds of thousands of slices: never one copy)."""

    head: list[bytes]
    slices: Any  # graphscope._native.ModuleSpans
    tail: list[bytes]
    size_hint: int  # about the bytes it renders to (the output's preallocation)

    def pieces(self) -> Iterator[bytes]:
        yield from self.head
        while (piece := self.slices.next_piece()) is not None:
            yield piece
        yield from self.tail


def _module_spans(modules: list[Any], ann_of: np.ndarray, corr: np.ndarray, ts: np.ndarray,
                  dur: np.ndarray) -> Optional[_ModuleTrack]:
    """Per graph launch (correlation id), one slice per module prefix from the first start to
    the last end of its work, aggregated natively (no dict per slice; None: no slices).
    ``ann_of``: per event, the index of its annotation's module in ``modules`` (-1: none)."""
    import json

    hit = ann_of >= 0
    if not hit.any():
        return None
    prefixes: dict[str, int] = {}
    used = np.zeros(len(modules), dtype=bool)
    used[ann_of[hit]] = True
    ann_module = np.full(len(modules), -1, dtype=np.int64)
    rows: list[list[int]] = []
    for i in np.nonzero(used)[0].tolist():  # prefix ids in annotation order
        m = modules[i]
        if not m:
            continue
        parts = str(m).split(".")
        rows.append([prefixes.setdefault(".".join(parts[:j]), len(prefixes))
                     for j in range(1, len(parts) + 1)])
        ann_module[i] = len(rows) - 1
    if not rows:
        return None
    # events without a finite ts/dur (a kernel missing "ts") take no part in the spans
    sel = np.nonzero(hit & np.isfinite(ts) & np.isfinite(dur))[0]
    mk = ann_module[ann_of[sel]]
    sel, mk = sel[mk >= 0], mk[mk >= 0]
    # per (launch, prefix): min start / max end over its events, natively (csrc/tracejson.cpp)
    depth = max(len(r) for r in rows)
    table = np.full((len(rows), depth), -1, dtype=np.int64)
    for m, ids in enumerate(rows):
        table[m, : len(ids)] = ids
    level = {v: k.count(".") for k, v in prefixes.items()}
    pid_json = json.dumps(_MODULES_PID)
    heads = [""] * len(prefixes)
    for k, v in prefixes.items():
        heads[v] = (f'{{"ph": "X", "cat": "graphscope_module", "pid": {pid_json}, '
                    f'"tid": {level[v]}, "name": {json.dumps(k.rsplit(".", 1)[-1])}, "args": '
                    f'{{"module_name": {json.dumps(k)}, "correlation": ')
    t0 = np.ascontiguousarray(ts[sel], dtype=np.float64)
    slices = _ext().ModuleSpans(
        np.ascontiguousarray(corr[sel], dtype=np.int64).tobytes(),
        np.ascontiguousarray(mk, dtype=np.int64).tobytes(), t0.tobytes(),
        (t0 + dur[sel]).tobytes(), table.tobytes(), depth, heads)
    if not len(slices):
        return None
    head = [json.dumps({"ph": "M", "pid": _MODULES_PID, "tid": 0, "name": "process_name",
                        "args": {"name": "modules (graphscope)"}}).encode()]
    tail = [json.dumps({"ph": "M", "pid": _MODULES_PID, "tid": lv, "name": "thread_name",
                        "args": {"name": f"module depth {lv}"}}).encode()
            for lv in sorted(set(level.values()))]
    per_slice = sum(map(len, heads)) // len(heads) + 64  # + correlation, ts, dur
    return _ModuleTrack(head, slices, tail, len(slices) * per_slice)


def tune_allocator() -> bool:
    """For a process that only annotates (the CLI command): glibc's malloc keeps freed large
    blocks for reuse instead of giving each big array fresh, zeroed pages from the kernel (up
    to a third of a large trace's run went to page faults). Peak memory is unchanged: the
    blocks are reused, and the heap is still trimmed between the passes. False where it does
    not apply (not glibc)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # not glibc, or not a POSIX libc
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(mallopt(m_trim_threshold, 256 << 20))


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """The parts joined, the list emptied (its arrays would double the columns' memory)."""
    out = np.concatenate(parts) if parts else np.zeros(0, dtype)
    parts.clear()
    return out


def _trim() -> None:
    """Hand freed heap memory back to the system between the passes (glibc keeps the chunk
    buffers' memory otherwise, and peak RSS is what a big trace is judged by)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _open_out(path: str, gzip_level: int, gz: bool) -> IO[bytes]:
    if gz:
        igzip = _igzip() if gzip_level == 1 else None  # ISA-L's level 1 is zlib's size, 4x faster
        if igzip is not None:
            return igzip.open(path, "wb", compresslevel=1)
        return gzip.open(path, "wb", compresslevel=gzip_level)  # type: ignore[return-value]
    return open(path, "wb", buffering=1 << 20)  # noqa: SIM115  (_Writer makes big writes)


def _is_int(v: Any) -> bool:
    try:
        int(v)
        return v is not None
    except (TypeError, ValueError):
        return False


def _match_sequences(bundle: Any, launches: dict[Any, list[tuple[float, int, str, Any, Any]]],
                     res: AnnotateResult) -> dict[int, dict[str, Any]]:
    """Match each launch's kernels to a bundle graph by (name, grid, block) in order."""
    graphs = []
    order = {int(e["exec_node_id"]): k for k, e in enumerate(
        sorted((e for e in bundle.events if e.get("replay") == 0), key=lambda e: e["start_ns"]))}
    for g in bundle.graphs:
        seqs: dict[tuple[str, tuple, tuple], list[Any]] = defaultdict(list)
        nodes = sorted((n for n in g.nodes if n.type == "kernel"),
                       key=lambda n: (order.get(n.exec_node_id, 1 << 40), n.local_id))
        for n in nodes:
            seqs[(n.demangled or n.kernel or "", tuple(n.grid), tuple(n.block))].append(n)
        graphs.append(seqs)
    out: dict[int, dict[str, Any]] = {}
    for evs in launches.values():
        evs.sort()
        res.sequence_candidates += len(evs)
        best, best_hits = None, -1
        for seqs in graphs:
            hits = sum(1 for ev in evs if (ev[2], ev[3], ev[4]) in seqs)
            if hits > best_hits:
                best, best_hits = seqs, hits
        if best is None:
            continue
        used: dict[tuple[str, tuple, tuple], int] = defaultdict(int)
        for _ts, ordinal, name, grid, block in evs:
            k = (name, grid, block)
            lst = best.get(k)
            if not lst or used[k] >= len(lst):
                continue
            node = lst[used[k]]
            used[k] += 1
            a = {kk: str(vv) for kk, vv in node.annotation.items()}
            a["graphscope match"] = "sequence"
            a["graphscope local id"] = node.local_id
            for kk in ("op", "shapes", "source"):
                v = getattr(node, kk)
                if v:
                    a[kk] = v
            out[ordinal] = a
            res.matched_by_sequence += 1
    return out


__all__ = ["AnnotateResult", "TraceError", "annotate_trace_file", "load_annotations"]
