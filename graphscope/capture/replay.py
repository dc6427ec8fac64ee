"""Replays under the CUPTI activity tracer, joined onto nodes by exec node id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

from .. import native
from ..model.join import JoinResult, join


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
    recs = out[0]
    return join(
        recs.graph_node_id, recs.correlation, recs.start_ns, recs.end_ns, recs.stream,
        recs.kind, exec_node_ids, keep_events,
        launches=(recs.launch_correlation, recs.launch_start_ns, recs.launch_end_ns),
    )
