"""Step 5: pass 2 — the same buffers as pass 1 again, each spliced natively (csrc,
``rewrite_events``) from the byte spans pass 1 kept and the rules' plans, written on a thread
(:class:`graphscope.trace_annotate.streamio.Writer`), the module track (made meanwhile on a thread)
last.
Atomic: written to a temp file beside the output and renamed into place; on any error
(Ctrl-C included) the temp file is removed and nothing is left behind.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..model.outputs import OutputError, temp_path_for
from .chunks import native_ext
from .model import UNCHANGED, AnnotateResult
from .rules import TrackInputs, module_track
from .scan import TraceScan
from .streamio import Writer, open_write, publish


@dataclass
class Edits:
    """What pass 2 changes, by event ordinal: the graphed events' final lanes, start times
    and fragments (sorted by ordinal, as pass 1 found them), the events dropped, the flow
    ends moved, the sequence-matched kernels' fragments, and the events appended."""

    ordinal: np.ndarray  # int64, graphed events
    tid: np.ndarray  # int64 final lane per graphed event
    ts: np.ndarray  # float64 final start per graphed event
    ts_changed: np.ndarray  # bool
    frag_of: np.ndarray  # int32 fragment per graphed event (-1: none)
    fragments: list[str]
    drop: set[int]
    ac2g_tid: dict[int, int]  # flow end's ordinal: its new lane
    seq_frag: dict[int, int]  # sequence-matched kernel's ordinal: its fragment
    lane_names: list[bytes]  # thread_name events appended after the events


def write_trace(src: Any, scan: TraceScan, edits: Edits, track: Optional[TrackInputs],
                out_path: str, how: str, gzip_level: int, res: AnnotateResult) -> None:
    """Write the annotated trace to ``out_path`` (``how``: from
    :func:`graphscope.model.outputs.check_output`)."""
    layout = scan.layout
    assert layout is not None  # scan_trace sets it
    tmp = temp_path_for(out_path) if how == "atomic" else (
        "/dev/stdout" if how == "stdout" else out_path)
    try:
        with open_write(tmp, gzip_level, out_path.endswith(".gz")) as f_out, \
                Writer(f_out) as w, \
                ThreadPoolExecutor(1, thread_name_prefix="graphscope-modules") as pool:
            # the module track is made (natively, without the GIL) while the events are spliced
            spans_fut = pool.submit(module_track, track) if track is not None else None
            w.reserve(_output_estimate(scan.sizes, len(layout.suffix), edits))
            w.write(layout.prefix)
            first = _write_events(src, scan, edits, w, res)
            _write_tail(w, edits.lane_names, spans_fut.result() if spans_fut else None,
                        layout.suffix, first, res)
        if how == "atomic":
            publish(tmp, out_path)
    except BaseException as exc:
        if how == "atomic" and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, BrokenPipeError) and how == "stdout":
            raise  # the reader went away (`| head`): 141, as every command (cli/main.py)
        if isinstance(exc, OSError):  # the input's read errors are TraceErrors by now
            raise OutputError(f"{out_path}: cannot write the annotated trace "
                              f"({exc.strerror or exc})") from None
        raise


def _output_estimate(sizes: list[tuple[int, int]], suffix_bytes: int, edits: Edits) -> int:
    """About the bytes the events take: the input's plus the fragments spliced in."""
    in_bytes = sum(r for _, r in sizes[:-1]) + sizes[-1][0] + suffix_bytes if sizes else 0
    hit_frags = edits.frag_of[edits.frag_of >= 0]
    frag_bytes = int((np.array([len(f) + 2 for f in edits.fragments], dtype=np.int64)[hit_frags]
                      ).sum()) if len(hit_frags) else 0
    return in_bytes + frag_bytes + 24 * len(edits.ordinal) + (1 << 20)


def _write_events(src: Any, scan: TraceScan, edits: Edits, w: Writer,
                  res: AnnotateResult) -> bool:
    """Splice and write every buffer's events; True if none was written."""
    o = edits.ordinal
    drop_at = np.array(sorted(edits.drop), dtype=np.int64)
    ac2g_at = np.array(sorted(edits.ac2g_tid), dtype=np.int64)
    ac2g_to = np.array([edits.ac2g_tid[k] for k in ac2g_at.tolist()], dtype=np.int64)
    seq_at = np.array(sorted(edits.seq_frag), dtype=np.int64)
    seq_to = np.array([edits.seq_frag[k] for k in seq_at.tolist()], dtype=np.int32)
    ext = native_ext()
    first = True
    base = 0
    for i_buf, text in enumerate(src.rechunks(scan.sizes)):
        span_cols = scan.spans_of.pop(i_buf, None)
        if span_cols is None:
            continue
        n = len(span_cols[0])
        lo, hi = np.searchsorted(o, [base, base + n])
        rel = o[lo:hi] - base
        keep = np.ones(n, dtype=np.uint8)
        a_, b_ = np.searchsorted(drop_at, [base, base + n])
        keep[drop_at[a_:b_] - base] = 0
        tid_plan = np.full(n, UNCHANGED, dtype=np.int64)
        stream_plan = np.full(n, UNCHANGED, dtype=np.int64)
        ts_plan = np.full(n, np.nan)
        frag_plan = np.full(n, -1, dtype=np.int32)
        tid_plan[rel] = edits.tid[lo:hi]
        stream_plan[rel] = edits.tid[lo:hi]
        ch = edits.ts_changed[lo:hi]
        ts_plan[rel[ch]] = edits.ts[lo:hi][ch]
        frag_plan[rel] = edits.frag_of[lo:hi]
        a_, b_ = np.searchsorted(ac2g_at, [base, base + n])
        tid_plan[ac2g_at[a_:b_] - base] = ac2g_to[a_:b_]
        a_, b_ = np.searchsorted(seq_at, [base, base + n])
        frag_plan[seq_at[a_:b_] - base] = seq_to[a_:b_]
        out = ext.rewrite_events(text, *(a.astype(np.int64) for a in span_cols), keep,
                                 tid_plan, ts_plan, stream_plan, frag_plan, edits.fragments)
        if out:
            if not first:
                w.write(b",")
            w.write(out)
            first = False
        res.events_out += int(keep.sum())
        base += n
    return first


def _write_tail(w: Writer, lane_names: list[bytes], track: Any, suffix: bytes, first: bool,
                res: AnnotateResult) -> None:
    """The new lanes' names, the module track (rendered while the writer writes what came
    before), and what followed the events array."""
    parts: Iterator[bytes] = iter(lane_names)
    hint = sum(len(p) + 1 for p in lane_names) + len(suffix) + 16
    if track is not None:
        parts = itertools.chain(lane_names, track.pieces())
        hint += track.size_hint
        res.module_spans = len(track.slices)
        res.events_out += len(track.head) + len(track.tail) + len(track.slices)
    w.reserve(hint)
    res.events_out += len(lane_names)
    for part in parts:
        if not first:
            w.write(b",")
        w.write(part)
        first = False
    w.write(b"]" + suffix)
