"""A capture's scopes without CUPTI (csrc/nodecount.h): the capturing thread notes the node
count of the graph being captured at each change of its scope; node ``k`` (creation order) gets
the scope noted last at a count ``<= k`` — the scope the CUPTI recorder's GRAPHNODE_CREATED
callback reads on that thread. Nothing is subscribed while the capture runs: on the H200 CUPTI's
resource callbacks cost ~4.5 us per captured kernel, as much as capturing the kernel
(``bench/probes/process_wide_gpu.py``), and slow the program's eager launches ~15% while
subscribed.

What it cannot see: nodes made on another thread (autograd's device thread in a backward) —
their scope changes are only counted (``foreign``; their op changes not even that: the op
observer sees every thread's aten ops, a data loader's too). The capturing thread's op changes
are noted with its scope changes, so a counted capture carries each node's aten op as CUPTI's
would (``tests/gpu/test_nodecount_gpu.py``: the same scope, op, shapes and source line on every
node of GPT-2 and of a side-stream model). ``graphscope run`` therefore counts every capture
begun with grad off (no backward can run on autograd's thread there), from a site's first, ops
included, so an inference ladder never subscribes CUPTI; and a grad-on site's captures past its
first ``--op-captures`` once those (recorded by CUPTI) made every node on the capturing thread.
A counted capture in which a backward ran or another thread changed its scope keeps its nodes
unscoped, and sends the site back to CUPTI (capture/run/watch.py). Nodes of child graphs
(conditional bodies) are not in the count. ``GRAPHSCOPE_NODE_COUNTS=learned`` counts only the
grad-on way (grad-off sites' first captures on CUPTI too), ``GRAPHSCOPE_NODE_COUNTS=0`` keeps
CUPTI in every capture.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .inspect import GraphInspection
from .loader import call, ensure_loaded, extension
from .recorder import CreatedNodes, release_held

ENV = "GRAPHSCOPE_NODE_COUNTS"
DEPS_ENV = "GRAPHSCOPE_COUNT_DEPS"

# How a note counts (csrc/nodecount.h): WALK walks the graph (cuGraphGetNodes, exact, O(nodes));
# DEPS reads the capture stream's dependencies (O(1), exact while the newest node is one of
# them; one walk at the capture's end checks the last count); VERIFY walks and compares the two
# at every note.
WALK, DEPS, VERIFY = 0, 1, 2


def deps_allowed() -> bool:
    """``GRAPHSCOPE_COUNT_DEPS=0`` keeps every count a walk of the graph."""
    return os.environ.get(DEPS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def mode() -> str:
    """``GRAPHSCOPE_NODE_COUNTS``: "all" (the default: every capture begun with grad off, and a
    site's captures past its op captures once its CUPTI captures made every node on the
    capturing thread), "learned" (``learned``: only the latter), "off" (``0``: CUPTI in every
    capture)."""
    raw = os.environ.get(ENV, "all").strip().lower()
    if raw in ("0", "false", "no", "off", ""):
        return "off"
    return "learned" if raw == "learned" else "all"


class CountedNodes:
    """One capture window's scope and op changes: ``scopes[i]`` and ``ops[i]`` from node count
    ``counts[i]`` on. The three columns may be given as the extension's bytes (:func:`stop`,
    in a ladder's every capture): they become arrays when first read, after the loop (three
    ``np.frombuffer`` calls cost ~11 us a capture on the H200 host)."""

    __slots__ = ("_cols", "attached", "foreign", "errors", "thread", "how", "mismatches",
                 "queries", "query_s")

    def __init__(self, counts: Any, scopes: Any, ops: Any, attached: bool, foreign: int,
                 errors: int, thread: int, how: int = WALK, mismatches: int = 0,
                 queries: int = 0, query_s: float = 0.0) -> None:
        self._cols: list[Any] = [counts, scopes, ops]
        self.attached = attached  # the capture began and its graph was found (count_attach)
        self.foreign = foreign  # scope changes on other threads while counting (unknown nodes)
        self.errors = errors  # node counts the driver refused
        self.thread = thread  # the capturing thread's native id
        self.how = how  # WALK, DEPS or VERIFY
        self.mismatches = mismatches  # notes (DEPS: the capture's end) where the counts differed
        self.queries = queries  # node counts asked of the driver (a note whose scope/op changed)
        self.query_s = query_s  # the seconds those took

    def _col(self, i: int, dtype: str) -> np.ndarray:
        c = self._cols[i]
        if isinstance(c, (bytes, bytearray, memoryview)):
            c = self._cols[i] = np.frombuffer(c, dtype=dtype)
        return c

    @property
    def counts(self) -> np.ndarray:  # uint64, ascending
        return self._col(0, "<u8")

    @property
    def scopes(self) -> np.ndarray:  # int64
        return self._col(1, "<i8")

    @property
    def ops(self) -> np.ndarray:  # int64: the op observer's op (or op call) id, -1 for none
        return self._col(2, "<i8")

    def problem(self) -> str:
        """Why this window recorded nothing usable ('' when it did)."""
        if not self.attached:
            return "the capture's graph was not found for node counting"
        if self.errors:
            return f"the driver refused {self.errors} node count(s)"
        return ""

    def unplaced(self) -> CountedNodes:
        """The same window with no scope for any node: other threads made some of its nodes
        (their scopes are not in the counts), so none is given a scope it may not have."""
        return CountedNodes(np.zeros(0, np.uint64), np.zeros(0, np.int64),
                            np.zeros(0, np.int64), self.attached, self.foreign, self.errors,
                            self.thread, self.how, self.mismatches, self.queries, self.query_s)


def start(fake: bool = False, how: int = WALK) -> None:
    """Start counting nodes on this thread, the ``how`` way (attach to the capture with
    :func:`attach` once it has begun; end with :func:`stop`). CUPTI's subscription held across
    captures (:class:`~graphscope.native.recorder.HeldRecorder`) is released first: while
    subscribed, every captured launch pays for its callbacks."""
    ext = extension() if fake else ensure_loaded()
    release_held()
    call(ext.count_start, fake, how)


def stop() -> CountedNodes:
    """Stop counting: what was noted since :func:`start`."""
    d = extension().count_stop()
    return CountedNodes(counts=d["counts"], scopes=d["scopes"], ops=d["ops"],
                        attached=bool(d["attached"]), foreign=int(d["foreign"]),
                        errors=int(d["errors"]), thread=threading.get_native_id(),
                        how=int(d["how"]), mismatches=int(d["mismatches"]),
                        queries=int(d["queries"]), query_s=float(d["query_s"]))


@contextmanager
def counting(fake: bool = False, how: int = WALK) -> Iterator[list[CountedNodes]]:
    """Count nodes on this thread for the ``with`` body (:func:`start`, :func:`stop`); yields a
    list that holds the :class:`CountedNodes` once the body ends."""
    start(fake, how)
    out: list[CountedNodes] = []
    try:
        yield out
    finally:
        out.append(stop())


def detach() -> None:
    """The capture is about to end (a failed ``capture_end`` destroys its graph): no more
    notes."""
    extension().count_detach()


def attach(stream: int) -> None:
    """The capture has begun on ``stream`` (this thread's current CUDA stream handle)."""
    call(extension().count_attach, int(stream))


def as_created(marks: CountedNodes, inspection: GraphInspection) -> CreatedNodes:
    """The recorder's columns for a counted capture, its nodes read from the template:
    each node's scope and op by its creation rank (its local id's order); no clone or exec rows
    (the exec graph is rekeyed from its own id, as for a graph instantiated after its
    window)."""
    nid = np.asarray(inspection.node_id, dtype=np.uint64)
    n = len(nid)
    rank = np.empty(n, dtype=np.uint64)
    rank[np.argsort(nid & np.uint64(0xFFFFFFFF), kind="stable")] = np.arange(n, dtype=np.uint64)
    at = np.searchsorted(marks.counts, rank, side="right") - 1
    scope = np.where(at >= 0, marks.scopes[np.maximum(at, 0)] if len(marks.scopes) else -1, -1)
    op = np.where(at >= 0, marks.ops[np.maximum(at, 0)] if len(marks.ops) else -1, -1)
    u8, u4 = np.zeros(0, np.uint64), np.zeros(0, np.uint32)
    return CreatedNodes(
        node_id=nid.copy(), graph_id=(nid >> np.uint64(32)).astype(np.uint32),
        node_type=np.asarray(inspection.node_type, dtype=np.int32).copy(),
        scope=scope.astype(np.int64), op=op.astype(np.int64),
        thread=np.full(n, marks.thread, np.uint64), clone_id=u8, clone_origin=u8.copy(),
        exec_id=u4, exec_graph=u4.copy(), callback_errors=0)
