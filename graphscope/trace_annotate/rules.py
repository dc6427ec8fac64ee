"""Step 3: PyTorch's event rules, one function each, as ``torch/cuda/_annotate_cuda_graph_trace.py``
(2.14.1) applies them and in its order, decided on pass 1's columns (numpy; nothing is edited
here: the results are the plans pass 2 splices). Plus graphscope's own: the modules track.

1. :func:`move_to_annotated_stream` — graphed work goes to its annotated ``stream``, else to the
   default stream (upstream ``annotate_trace``);
2. :func:`move_flow_ends` — an ``ac2g`` flow end follows the graphed event it sits on;
3. :func:`drop_noise_on_empty_lanes` — ``gpu_user_annotation`` / ``ac2g`` copies on lanes
   without work go;
4. :func:`drop_metadata_of_empty_lanes` — metadata of lanes left without events goes;
5. :func:`move_overlapping_to_stream` — graphed kernels overlapping their predecessor on the
   default stream move to the overlap stream (upstream ``_move_overlapping_to_stream``);
6. :func:`fix_overlapping_timestamps` — sub-µs overlaps on a lane are clamped (upstream
   ``_fix_overlapping_timestamps``);
7. :func:`name_new_lanes` — lanes with work and no ``thread_name`` get one;
8. :func:`module_track` — graphscope's modules track: per graph launch, a slice per module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import numpy as np

from .chunks import native_ext
from .load import AnnotationTable
from .model import CAT_AC2G, MODULES_PID, NO_TID, UNCHANGED, AnnotateResult
from .scan import TraceScan


@dataclass
class Lanes:
    """Where rule 1 puts each graphed event."""

    frag_of: np.ndarray  # int32 per event: its row in the annotation table (-1: none)
    new_tid: np.ndarray  # int64 per event: its lane
    new_tids: set[int]  # the distinct lanes of new_tid


def move_to_annotated_stream(scan: TraceScan, table: AnnotationTable, default_stream: int,
                             res: AnnotateResult) -> Lanes:
    """Join each graphed event to its annotation by exec node id; it moves to the annotated
    ``stream``, or to ``default_stream`` when it has none (annotated or not)."""
    keys, ann_keys = scan.key, table.keys
    pos = np.searchsorted(ann_keys, keys) if len(ann_keys) else np.zeros(len(keys), np.int64)
    last = max(len(ann_keys) - 1, 0)
    hit = (pos < len(ann_keys)) & (ann_keys[np.minimum(pos, last)] == keys) \
        if len(ann_keys) else np.zeros(len(keys), bool)
    frag_of = np.where(hit, pos, -1).astype(np.int32)
    res.annotated_events = int(hit.sum())
    new_tid = np.full(len(keys), default_stream, dtype=np.int64)
    # the distinct new tids, from the few sources they come from (not a set of 1M values)
    new_tids: set[int] = set()
    if len(ann_keys):
        st = table.streams[np.minimum(pos, last)]
        with_stream = hit & (st != UNCHANGED)
        new_tid[with_stream] = st[with_stream]
        used = np.zeros(len(ann_keys), dtype=bool)
        used[pos[with_stream]] = True
        new_tids = set(table.streams[used].tolist())
        if not with_stream.all():
            new_tids.add(default_stream)
    elif len(keys):
        new_tids = {default_stream}
    return Lanes(frag_of, new_tid, new_tids)


def move_flow_ends(scan: TraceScan, new_tid: np.ndarray) -> dict[int, int]:
    """``ac2g`` flow ends follow the graphed event they sit on (same old lane and ts; the last
    such event wins): {flow end's ordinal: its new lane}."""
    ac2g_tid: dict[int, int] = {}
    if not scan.noise or not len(scan.ts):
        return ac2g_tid
    order = np.argsort(scan.ts, kind="stable")
    ts_sorted = scan.ts[order]
    for ordinal, t, ts, cat_ in scan.noise:
        if cat_ != CAT_AC2G:
            continue
        lo, hi = np.searchsorted(ts_sorted, [ts, ts], side="left")[0], np.searchsorted(
            ts_sorted, ts, side="right")
        cand = order[lo:hi]
        cand = cand[scan.tid[cand] == t]
        if len(cand):
            ac2g_tid[ordinal] = int(new_tid[cand.max()])
    return ac2g_tid


def drop_noise_on_empty_lanes(scan: TraceScan, ac2g_tid: dict[int, int], work_tids: set[int],
                              drop: set[int], res: AnnotateResult) -> set[int]:
    """Noise events (CUPTI copies them onto every lane of a replay) on a lane without work are
    added to ``drop``; returns the lanes where noise stays."""
    kept_noise_tids: set[int] = set()
    for ordinal, t, _, _ in scan.noise:
        t2 = ac2g_tid.get(ordinal, t)
        if t2 not in work_tids:
            drop.add(ordinal)
        else:
            kept_noise_tids.add(t2)
    res.noise_removed = len(drop)
    return kept_noise_tids


def drop_metadata_of_empty_lanes(scan: TraceScan, all_tids: set[int],
                                 drop: set[int]) -> tuple[set[int], Any]:
    """Metadata of lanes (threads) left without events is added to ``drop``; a process's own
    metadata (``process_name``, ``process_labels``, ``process_sort_index``, on tid 0 whether or
    not a lane 0 has events) always stays. Returns the lanes that keep a ``thread_name`` and
    the GPU's pid (that of the first "stream N" thread name; None)."""
    named: set[int] = set()
    for ordinal, t, e in scan.meta:
        if str(e.get("name", "")).startswith("process_"):
            continue
        if t not in all_tids:
            drop.add(ordinal)
        elif e.get("name") == "thread_name":
            named.add(t)
    gpu_pid: Any = None
    for _, _, e in scan.meta:
        args = e.get("args")
        if (e.get("name") == "thread_name" and isinstance(args, dict)
                and str(args.get("name", "")).startswith("stream ")):
            gpu_pid = e.get("pid", 0)
            break
    return named, gpu_pid


def move_overlapping_to_stream(scan: TraceScan, new_tid: np.ndarray, default_stream: int,
                               overlap_stream: int, res: AnnotateResult) -> np.ndarray:
    """Graphed kernels on the default stream that start before the previous kept kernel ends
    move to ``overlap_stream`` (Perfetto hides overlapping slices). Returns the final lanes."""
    final_tid = new_tid.copy()
    if len(scan.ordinal):
        d_idx = np.nonzero((new_tid == default_stream) & scan.is_kernel)[0]
        d_idx = d_idx[np.argsort(scan.ts[d_idx], kind="stable")]
        moved = _sequential_drop(scan.ts[d_idx], scan.dur[d_idx])
        final_tid[d_idx[moved]] = overlap_stream
        res.moved_overlapping = int(moved.sum())
    return final_tid


def fix_overlapping_timestamps(scan: TraceScan, final_tid: np.ndarray, lanes: set[int],
                               res: AnnotateResult) -> np.ndarray:
    """Per lane (ascending), its graphed events by start time (ties in trace order): a start
    up to 1 µs before the previous end is clamped to it, a larger overlap left and noted.
    Returns the new start times."""
    new_ts = scan.ts.copy()
    if len(scan.ordinal):
        for t in sorted(lanes):
            sel = np.nonzero(final_tid == t)[0]
            sel = sel[np.argsort(scan.ts[sel], kind="stable")]
            new_ts[sel] = _clamp(scan.ts[sel], scan.dur[sel], res, t)
    return new_ts


def name_new_lanes(work_tids: set[int], named: set[int], gpu_pid: Any) -> list[bytes]:
    """A ``thread_name`` metadata event for each lane with work that has none."""
    return [json.dumps({"ph": "M", "pid": gpu_pid if gpu_pid is not None else 0,
                        "tid": t, "name": "thread_name",
                        "args": {"name": f"stream {t}"}}).encode()
            for t in sorted(t for t in work_tids - named if t != NO_TID)]


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


@dataclass
class _ModuleTrack:
    """The modules track: its metadata events and the native slices, rendered as JSON piece
    by piece while they are written (hundreds of thousands of slices: never one copy)."""

    head: list[bytes]
    slices: Any  # graphscope.native._native.ModuleSpans
    tail: list[bytes]
    size_hint: int  # about the bytes it renders to (the output's preallocation)

    def pieces(self) -> Iterator[bytes]:
        yield from self.head
        while (piece := self.slices.next_piece()) is not None:
            yield piece
        yield from self.tail


class TrackInputs(NamedTuple):
    """The module track's inputs, per event: its row in ``modules`` (-1: none), launch
    (correlation id), start and duration; graphed events first, then sequence-matched ones."""

    modules: list[Any]
    of: np.ndarray
    corr: np.ndarray
    ts: np.ndarray
    dur: np.ndarray


def module_track(inputs: TrackInputs) -> Optional[_ModuleTrack]:
    """Per graph launch (correlation id) and module depth, one slice per run of consecutive
    work (by start, all streams) of one module prefix, built natively (no dict per slice;
    None: no slices): a module's forward and backward are two slices, siblings never nest.
    ``inputs.of``: per event, the index of its annotation's module in ``modules`` (-1: none)."""
    modules, ann_of, corr, ts, dur = inputs
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
    # events without a finite ts/dur (a kernel missing "ts") take no part in the spans; an
    # annotated one without a module (-1: the loss, say) ends the runs it falls between
    sel = np.nonzero(hit & np.isfinite(ts) & np.isfinite(dur))[0]
    mk = ann_module[ann_of[sel]]
    # per (launch, prefix): min start / max end over its events, natively (csrc/tracejson.cpp)
    depth = max(len(r) for r in rows)
    table = np.full((len(rows), depth), -1, dtype=np.int64)
    for m, ids in enumerate(rows):
        table[m, : len(ids)] = ids
    level = {v: k.count(".") for k, v in prefixes.items()}
    pid_json = json.dumps(MODULES_PID)
    heads = [""] * len(prefixes)
    for k, v in prefixes.items():
        heads[v] = (f'{{"ph": "X", "cat": "graphscope_module", "pid": {pid_json}, '
                    f'"tid": {level[v]}, "name": {json.dumps(k.rsplit(".", 1)[-1])}, "args": '
                    f'{{"module_name": {json.dumps(k)}, "correlation": ')
    t0 = np.ascontiguousarray(ts[sel], dtype=np.float64)
    slices = native_ext().ModuleSpans(
        np.ascontiguousarray(corr[sel], dtype=np.int64).tobytes(),
        np.ascontiguousarray(mk, dtype=np.int64).tobytes(), t0.tobytes(),
        (t0 + dur[sel]).tobytes(), table.tobytes(), depth, heads)
    if not len(slices):
        return None
    head = [json.dumps({"ph": "M", "pid": MODULES_PID, "tid": 0, "name": "process_name",
                        "args": {"name": "modules (graphscope)"}}).encode()]
    tail = [json.dumps({"ph": "M", "pid": MODULES_PID, "tid": lv, "name": "thread_name",
                        "args": {"name": f"module depth {lv}"}}).encode()
            for lv in sorted(set(level.values()))]
    per_slice = sum(map(len, heads)) // len(heads) + 64  # + correlation, ts, dur
    return _ModuleTrack(head, slices, tail, len(slices) * per_slice)

