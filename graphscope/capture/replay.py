"""Replays under the CUPTI activity tracer, joined onto nodes by exec node id: the one join and
exec-id rekey of every source (a model file's replays traced here, a program's traced as it
runs them: capture/run/traced.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

import numpy as np

from .. import native
from ..model.join import JoinResult, join

_COLUMNS = ("graph_node_id", "correlation", "start_ns", "end_ns", "stream", "kind",
            "launch_correlation", "launch_start_ns", "launch_end_ns")
_LOCAL = np.uint64(0xFFFFFFFF)


def join_traced(
    cols: Sequence[native.ActivityRecords],
    exec_node_ids: Mapping[int, str],
    keep_events: int,
    rekey: Optional[Mapping[int, int]] = None,
) -> JoinResult:
    """Join traced activity records onto nodes.

    Key: a replayed top-level node's record carries ``exec id << 32 | local id``, the node's
    ``exec_node_id`` (DESIGN.md, invariants); ``exec_node_ids`` is {exec node id: graph name}.
    Each instantiate mints a new exec id: ``rekey`` maps the exec ids of a graph's earlier
    instantiates to its last one, so replays before and after land on the same nodes. Durations
    are one record's end - start, so no clock alignment is needed.
    """
    if len(cols) == 1:
        cat = {k: getattr(cols[0], k) for k in _COLUMNS}
    else:
        cat = {k: np.concatenate([getattr(c, k) for c in cols]) if cols else np.zeros(0)
               for k in _COLUMNS}
    gnid = cat["graph_node_id"]
    if rekey:
        gnid = gnid.astype(np.uint64)  # a copy: the records themselves stay as traced
        for old, new in rekey.items():
            hit = (gnid >> np.uint64(32)) == np.uint64(old)
            gnid[hit] = (np.uint64(new) << np.uint64(32)) | (gnid[hit] & _LOCAL)
    jr = join(gnid, cat["correlation"], cat["start_ns"], cat["end_ns"], cat["stream"],
              cat["kind"], exec_node_ids, keep_events,
              launches=(cat["launch_correlation"], cat["launch_start_ns"],
                        cat["launch_end_ns"]),
              join_records=_native_join())
    outside = np.asarray(gnid) == 0  # eager work in the traced windows (graph coverage)
    jr.outside_graph_ns = int((np.asarray(cat["end_ns"], dtype=np.int64)[outside]
                               - np.asarray(cat["start_ns"], dtype=np.int64)[outside]).sum())
    return jr


def _native_join() -> Optional[Callable[..., Any]]:
    """The extension's join (csrc/join.cpp) where it loads, else None (numpy's)."""
    try:
        return native.extension().join_records
    except Exception:
        return None


def trace_replays(
    replay: Callable[[], None], exec_node_ids: Mapping[int, str], n: int, keep_events: int
) -> JoinResult:
    """Replay ``n`` times under the CUPTI activity tracer and join records onto nodes.

    ``exec_node_ids``: {exec node id: graph name} of the work nodes to join onto.
    """
    import torch

    replay()  # one untraced replay: first-launch upload costs stay out of the numbers
    torch.cuda.synchronize()
    with native.tracing() as out:
        for _ in range(n):
            replay()
        torch.cuda.synchronize()
    return join_traced(out, exec_node_ids, keep_events)
