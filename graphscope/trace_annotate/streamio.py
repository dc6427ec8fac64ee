"""Large-file I/O for streaming commands (annotate-trace): the gzip engine, a reader that reads
ahead on a thread, and a writer that writes (and compresses) on a thread, through O_DIRECT where
the file system takes it. The rules of what may be written where, temp names and the final
rename are :mod:`graphscope.model.outputs`'; :func:`publish` adds only what a path-based writer
needs.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
from typing import IO, Any, Optional

from ..model.outputs import _umask, temp_path_for


def isal_gzip() -> Any:
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


def read_errors() -> tuple[type[BaseException], ...]:
    """What a damaged compressed input raises (zlib's, and ISA-L's own error type)."""
    import zlib

    errs: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)
    if isal_gzip() is not None:
        from typing import cast

        from isal import isal_zlib

        errs += (cast("type[BaseException]", isal_zlib.error),)
    return errs


def open_read(path: str) -> IO[bytes]:
    """``path`` opened for reading, inflated when it ends in .gz."""
    if path.endswith(".gz"):
        return (isal_gzip() or gzip).open(path, "rb")
    return open(path, "rb")


class Prefetch:
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
        drain(self._q, self._t)


def drain(q: Any, t: Any) -> None:
    """Empty ``q`` until its producer thread ``t`` has stopped (it may block on a full q)."""
    import contextlib
    import queue

    while t.is_alive():
        with contextlib.suppress(queue.Empty):
            q.get(timeout=0.05)
    t.join()


class Writer:
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
                    sink = DirectSink(self._dfd, w)
                while True:
                    data = self._q.get()
                    if data is None:
                        if self._err is None and isinstance(sink, DirectSink):
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
                if isinstance(sink, DirectSink):
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

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.finish()
        else:
            self.close()


class DirectSink:
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


def open_write(path: str, gzip_level: int, gz: bool) -> IO[bytes]:
    """``path`` opened for the Writer: gzip-compressed at ``gzip_level`` when ``gz``."""
    if gz:
        # ISA-L's level 1 is zlib's size, 4x faster
        igzip = isal_gzip() if gzip_level == 1 else None
        if igzip is not None:
            return igzip.open(path, "wb", compresslevel=1)
        return gzip.open(path, "wb", compresslevel=gzip_level)  # type: ignore[return-value]
    return open(path, "wb", buffering=1 << 20)  # noqa: SIM115  (Writer makes big writes)


def publish(tmp: str, path: str) -> None:
    """Put the finished temp file ``tmp`` (from :func:`graphscope.model.outputs.temp_path_for`, made
    0600) in place at ``path`` with the mode every output gets (0666 less the umask)."""
    os.chmod(tmp, 0o666 & ~_umask())
    if os.path.exists(path):
        # Renaming over an existing file makes ext4 (auto_da_alloc) flush the new file's data
        # synchronously: seconds for a big trace. The user asked (--force) to replace it.
        os.unlink(path)
    os.replace(tmp, path)


__all__ = ["DirectSink", "Prefetch", "Writer", "drain", "isal_gzip", "open_read", "open_write",
           "publish", "read_errors", "temp_path_for"]
