"""What graphscope run keeps of each capture a program makes: :class:`ProgramGraph` (one
capture, its name, replays, cost and memory) and :class:`Pending` (a finished capture whose
graph is not read yet); :class:`~graphscope.capture.run.watch.GraphWatch` makes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ...native import nodecount
from ..meter import Window
from ..source import RawGraph

# how a counted capture's notes counted the graph's nodes (graph info "node_counts_by")
_COUNT_BY = {nodecount.WALK: "walk", nodecount.DEPS: "stream_deps",
             nodecount.VERIFY: "walk_verified"}


@dataclass
class ProgramGraph:
    """One capture the program made."""

    site: str
    kind: str  # "eager" or "compiled"
    ordinal: int = 0
    shapes: str = ""
    name: str = ""
    raw: Optional[RawGraph] = None
    exec_ids: list[int] = field(default_factory=list)
    # instantiated by torch inside capture_end: its exec id is read with the batch
    exec_later: bool = False
    replays: int = 0
    traced: int = 0
    pool_bytes: Optional[int] = None
    pool: Any = None
    user_keep: bool = False
    failed: Optional[str] = None
    untraced_why: Optional[str] = None  # why a replay ran untraced (the first reason)
    cost: dict[str, Any] = field(default_factory=dict)  # capture time and memory (meter.py)
    instantiate_s: float = 0.0  # every instantiate of this graph, summed
    static_input_bytes: Optional[int] = None  # the first module's inputs (eager captures)
    static_output_bytes: Optional[int] = None  # what the outermost modules returned
    outputs: list[Any] = field(default_factory=list)  # those returns, until the capture ends
    window: Optional[Window] = None  # the meter's window, until the batch is read
    ops_recorded: bool = True  # False: past the site's --op-captures (scopes only; not --no-ops)
    # scopes from node counts, not CUPTI's callbacks (graphscope.native.nodecount)
    counted: bool = False
    count_how: int = nodecount.WALK  # how a counted capture counted (nodecount.WALK/DEPS/VERIFY)
    scopes_unknown: str = ""  # a counted capture whose nodes were left unscoped: why

    @property
    def exec_id(self) -> int:
        return self.exec_ids[-1] if self.exec_ids else -1

    def info(self) -> dict[str, Any]:
        """The graph-level facts a bundle keeps (graph.json ``info``)."""
        info = {"site": self.site, "ordinal": self.ordinal, "kind": self.kind,
                "shapes": self.shapes, "replays": self.replays, "traced_replays": self.traced,
                "pool_bytes": self.pool_bytes, "keep_graph": self.user_keep}
        if self.pool is not None:  # graphs that share a pool are shown with it once
            info["pool_id"] = [int(x) for x in self.pool]
        info.update({k: v for k, v in self.cost.items() if k not in info})
        if self.exec_ids:
            info["instantiate_s"] = round(self.instantiate_s, 6)
        if self.static_input_bytes is not None:
            info["static_input_bytes"] = self.static_input_bytes
        if self.static_output_bytes is not None:
            info["static_output_bytes"] = self.static_output_bytes
        if not self.ops_recorded:
            info["ops_recorded"] = False
        if self.counted:
            info["scopes_from"] = "node_counts"
            info["node_counts_by"] = _COUNT_BY[self.count_how]
        if self.scopes_unknown:
            info["scopes_unknown"] = self.scopes_unknown
        return info


@dataclass
class Pending:
    """A finished capture whose graph is not read yet (see the module's docstring)."""

    rec: ProgramGraph
    graph: Any  # weakref to the torch.cuda.CUDAGraph
    records: Any  # the recorder's CreatedNodes, or a counted window's CountedNodes
    # read before capture_end: native.read_graph's answer until the batch is read, then a
    # GraphInspection (names demangled then)
    inspection: Any = None
    dot: str = ""
    dot_later: bool = False  # the DOT is read from the kept template (keep_graph=True)
