"""What the steps of annotate-trace share: its errors, its result and the scanner's codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .._errors import GraphscopeError


class TraceError(GraphscopeError):
    """The trace or annotation file cannot be read."""


class LowMatchError(TraceError):
    """Too little of the trace's graph work matched the annotations (wrong bundle or pickle)."""


@dataclass
class AnnotateResult:
    """What one run did: events in and out, what each rule changed, the match figures."""

    events_in: int = 0
    events_out: int = 0
    graphed_events: int = 0
    annotated_events: int = 0
    matched_by_sequence: int = 0
    sequence_candidates: int = 0
    moved_overlapping: int = 0
    timestamps_fixed: int = 0
    noise_removed: int = 0
    events_dropped: int = 0  # noise, and metadata of lanes left empty
    module_spans: int = 0
    notes: list[str] = field(default_factory=list)
    # graphed events of a graph (exec id) that the annotations know
    graphed_known: int = 0
    # kernels of graph launches without graph node ids, with no bundle to match them to
    launched_unmatched: int = 0

    @property
    def match_rate(self) -> Optional[float]:
        if not self.sequence_candidates:
            return None
        return 100.0 * self.matched_by_sequence / self.sequence_candidates

    @property
    def match(self) -> tuple[int, int]:
        """(matched, to match): graphed events of graphs the annotations know plus kernels
        matched by sequence, of all graphed events and graph-launched kernels. A graph's
        nodes without annotations (a pickle lists annotated nodes only) still count as
        matched: the graph is the right one."""
        return (self.graphed_known + self.matched_by_sequence,
                self.graphed_events + self.sequence_candidates + self.launched_unmatched)


WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
MODULES_PID = "graphscope modules"
# the native scanner's columns: dtype of each (int64 where not listed)
DTYPES = {"cat": "i1", "ph": "i1", "has_gnid": "u1", "tid": "<f8", "ts": "<f8", "dur": "<f8",
          "gnid": "<u8", "gid": "<u8"}
CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET, CAT_AC2G, CAT_RUNTIME, CAT_USER = 1, 2, 3, 4, 5, 6
PH_M, PH_F = ord("M"), ord("f")
NO_TID = -(1 << 62)  # an event without a numeric tid
UNCHANGED = np.iinfo(np.int64).min  # "leave this value as it is" in the splice plans
# stream ids graphscope writes: exact in a JSON double, far from the sentinels above
MAX_STREAM = (1 << 53) - 1
