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

The steps, one module each: :mod:`.load` (the annotations), :mod:`.scan` (pass 1), :mod:`.rules`
(PyTorch's rules, one function each, and the modules track), :mod:`.seqmatch` (matching by
kernel sequence, and the match check: a low match is refused before anything is written),
:mod:`.write` (pass 2, atomic). Two streaming passes, chunk by chunk: the first scans the JSON
(natively, each chunk's two halves at once) and keeps compact per-event columns, including the
byte spans the second pass edits; the second takes the same chunks again and splices
(natively) without scanning again, while a thread builds the module track. A plain .json is
memory-mapped, so chunks are views of the file (no read copies); a .gz is read and inflated on
a thread. Writing (with compression) runs on its own thread; the native code releases the GIL.
Peak memory is a few chunks plus those columns, not the whole trace.
"""

from __future__ import annotations

from typing import Any

from ..model.outputs import check_output
from . import rules
from .chunks import source
from .load import AnnotationTable, load_annotations
from .model import MAX_STREAM, MODULES_PID, AnnotateResult, LowMatchError, TraceError
from .rules import TrackInputs
from .scan import TraceScan, scan_trace
from .seqmatch import add_sequence_matches, check_match, count_known_graphs
from .write import Edits, write_trace


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
    min_match: float = 0.0,
) -> AnnotateResult:
    """Write ``out_path``: ``trace_path`` with annotations joined on. Atomic: on any error no
    output file is left behind. The output rules of :mod:`graphscope.model.outputs` apply (never
    onto an input; a device or FIFO is written in place; ``-`` is stdout). With ``min_match``
    above 0, less than that share of the trace's graph work matched (``AnnotateResult.match``)
    raises :class:`LowMatchError` before anything is written."""
    _check_options(default_stream, overlap_stream, min_match)
    how = check_output(out_path, force=force, inputs=(trace_path, annotations_path),
                       what="annotated trace")
    amap, bundle = load_annotations(annotations_path)
    src = source(trace_path)
    try:
        res = AnnotateResult()
        table = AnnotationTable.build(amap, bundle)
        scan = scan_trace(src, sequences=bundle is not None)
        if any(e.get("pid") == MODULES_PID for _, _, e in scan.meta):
            # annotating again would add a second module track over the first
            raise TraceError(f"{trace_path}: already annotated by graphscope (it has the "
                             f"{MODULES_PID!r} track): annotate the profiler's own trace")
        res.events_in, res.graphed_events = scan.events_in, len(scan.ordinal)
        edits, track = _decide(scan, table, bundle, default_stream, overlap_stream, res)
        count_known_graphs(scan, table, bundle, res)
        check_match(res, min_match, trace_path, annotations_path)
        scan.drop_rule_columns()  # pass 2 and the module track need none of them
        _trim()
        write_trace(src, scan, edits, track if module_track else None, out_path, how,
                    gzip_level, res)
        return res
    finally:
        src.close()


def _check_options(default_stream: int, overlap_stream: int, min_match: float) -> None:
    for name, v in (("default_stream", default_stream), ("overlap_stream", overlap_stream)):
        if not 0 <= v <= MAX_STREAM:
            raise TraceError(f"{name} {v} is out of range: a stream id is 0..{MAX_STREAM}")
    if not 0.0 <= min_match <= 1.0:
        raise TraceError(f"min_match {min_match} must be between 0 and 1")


def _decide(scan: TraceScan, table: AnnotationTable, bundle: Any, default_stream: int,
            overlap_stream: int, res: AnnotateResult) -> tuple[Edits, TrackInputs]:
    """PyTorch's rules in PyTorch's order, then the sequence matches: what pass 2 changes,
    and the module track's inputs."""
    lanes = rules.move_to_annotated_stream(scan, table, default_stream, res)
    work_tids = scan.plain_work_tids | lanes.new_tids
    ac2g_tid = rules.move_flow_ends(scan, lanes.new_tid)
    drop: set[int] = set()
    kept_noise_tids = rules.drop_noise_on_empty_lanes(scan, ac2g_tid, work_tids, drop, res)
    named, gpu_pid = rules.drop_metadata_of_empty_lanes(
        scan, scan.other_tids | lanes.new_tids | kept_noise_tids, drop)
    res.events_dropped = len(drop)
    final_tid = rules.move_overlapping_to_stream(scan, lanes.new_tid, default_stream,
                                                 overlap_stream, res)
    new_ts = rules.fix_overlapping_timestamps(
        scan, final_tid, lanes.new_tids | ({overlap_stream} if res.moved_overlapping else set()),
        res)
    track = TrackInputs(table.modules, lanes.frag_of, scan.corr, new_ts, scan.dur)
    seq_frag, track = add_sequence_matches(scan, bundle, table, track, res)
    edits = Edits(scan.ordinal, final_tid, new_ts, new_ts != scan.ts, lanes.frag_of,
                  table.fragments, drop, ac2g_tid, seq_frag,
                  rules.name_new_lanes(work_tids, named, gpu_pid))
    return edits, track


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


def _trim() -> None:
    """Hand freed heap memory back to the system between the passes (glibc keeps the chunk
    buffers' memory otherwise, and peak RSS is what a big trace is judged by)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


__all__ = ["AnnotateResult", "LowMatchError", "TraceError", "annotate_trace_file",
           "load_annotations", "tune_allocator"]
