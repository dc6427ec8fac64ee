"""Reading a batch of finished captures, outside the program's capture loop: what a
``CUDAGraph`` gives while it exists (its exec id, its pool, a kept template's DOT), one allocator
snapshot for the batch, each graph's kernel names demangled, and the annotations published
(rekeyed where the graph was instantiated)."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

from ... import annotate as ann
from ... import native
from ...annotate.session import resolve_accumulation
from ...annotate.tables import TABLES
from ...native import nodecount
from ..meter import CaptureMeter
from ..source import RawGraph, read_dot
from .graphs import Pending, ProgramGraph

Spent = Callable[..., float]  # GraphWatch._spent(what, since, later=False) -> now


def note_exec_id(rec: ProgramGraph, cuda_graph: Any) -> None:
    """The graph's exec id now (a new one at each instantiate), its annotations rekeyed to it
    once it is read. Never raises: the exec id is optional; the program goes on."""
    try:
        eid = native.exec_id(cuda_graph.raw_cuda_graph_exec())
        if not rec.exec_ids or rec.exec_ids[-1] != eid:
            rec.exec_ids.append(eid)
        if rec.raw is not None:
            rec.raw.exec_id = eid
            ann.remap_to_exec_graph(cuda_graph)
    except Exception:  # noqa: BLE001
        pass


def read_live(p: Pending, cuda_graph: Any, meter: CaptureMeter, spent: Spent,
              warnings: list[str]) -> None:
    """What a finished capture's ``CUDAGraph`` gives while it exists (the exec id of
    torch's instantiate in ``capture_end``, its pool, a kept template's DOT), read with the
    batch or as the graph goes, not in the program's loop (~25 us a capture on the H200)."""
    rec = p.rec
    if rec.exec_later:
        rec.exec_later = False
        note_exec_id(rec, cuda_graph)
    if rec.window is not None and rec.window.pool is None and not rec.window.pool_read:
        rec.window.pool_read = True
        meter.set_pool(rec.cost, rec.window, cuda_graph)
    if p.dot_later:  # a kept template's DOT, while it exists
        p.dot_later = False
        t = time.perf_counter()
        try:
            p.dot = read_dot(cuda_graph.raw_cuda_graph())
        except Exception as exc:  # noqa: BLE001 - the DOT is optional; the graph is read
            warnings.append(f"{p.rec.site}: the driver's DOT could not be read: {exc}")
        spent("dot", t, later=True)


def read_batch(batch: list[Pending], meter: CaptureMeter, demangled: dict[str, str],
               spent: Spent, warnings: list[str]) -> None:
    """Read every capture of ``batch``: one allocator snapshot for all, each graph's names
    demangled (``demangled``: raw name -> demangled, across batches), its raw graph made and
    its annotations published."""
    graphs = [p.graph() for p in batch]
    t = time.perf_counter()
    for p, g in zip(batch, graphs):
        if g is not None:
            read_live(p, g, meter, spent, warnings)
    t = spent("live", t, later=True)
    meter.read([(p.rec.cost, p.rec.window) for p in batch if p.rec.window is not None])
    spent("meter", t, later=True)
    for p, g in zip(batch, graphs):
        _read_one(p, g, demangled, spent)


def _read_one(p: Pending, g: Any, demangled: dict[str, str], spent: Spent) -> None:
    rec = p.rec
    rec.window = None
    t = time.perf_counter()
    p.inspection = native.demangled(native.as_inspection(p.inspection), demangled)
    spent("inspect", t, later=True)
    records = p.records
    if isinstance(records, nodecount.CountedNodes):  # its nodes are the template's
        records = resolve_accumulation(nodecount.as_created(records, p.inspection),
                                       TABLES.scopes)
    rec.raw = RawGraph(rec.name, p.inspection, records, rec.exec_id, p.dot)
    pool = rec.cost.get("pool_id")
    rec.pool = tuple(pool) if pool is not None else None
    rec.pool_bytes = rec.cost.get("pool_bytes")
    t = time.perf_counter()
    ann.publish(records, g)
    if g is not None and rec.exec_ids and not len(records.exec_id):
        with contextlib.suppress(Exception):  # instantiated after its window
            ann.remap_to_exec_graph(g)
    spent("publish", t, later=True)
