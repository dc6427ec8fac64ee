"""What a watched program's captures hand over: the raw graphs that were recorded, with the run's
facts (captures observed, empty and failed, graphscope's own seconds by cause, warnings, the
tracing windows) in the manifest and the traced replays joined."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...model.bundle_files import TREES_FILE
from ..source import RawCapture, RawGraph, unplaced_reason
from .graphs import ProgramGraph

if TYPE_CHECKING:
    from .watch import GraphWatch


def _seconds(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in d.items()}


def run_meta(watch: GraphWatch) -> dict[str, Any]:
    """The manifest's facts about the watched run (``capture_overhead_s`` and the rest)."""
    graphs = watch.graphs
    meta: dict[str, Any] = {
        "observed_captures": len(graphs),
        "empty_captures": sum(1 for g in graphs if g.raw is not None
                              and not len(g.raw.inspection.node_id)),
        "failed_captures": [{"site": g.site, "why": g.failed} for g in graphs if g.failed],
    }
    if watch.overhead:
        meta["capture_overhead_s"] = _seconds(watch.overhead)
    if watch.steps_s:
        meta["capture_steps_s"] = round(watch.steps_s, 6)
    if watch.read_overhead:
        meta["read_overhead_s"] = _seconds(watch.read_overhead)
    if watch.install_s:
        meta["install_warm_s"] = round(watch.install_s, 6)
    if watch.install_note:
        meta["install_warm_failed"] = watch.install_note
    if watch.warnings:
        meta["warnings"] = list(watch.warnings)
    return meta


def _raw(watch: GraphWatch, g: ProgramGraph) -> RawGraph:
    raw = g.raw
    assert raw is not None
    raw.exec_id = g.exec_id
    raw.info = g.info()
    if g.kind == "compiled":
        raw.place = lambda n, site=g.site: watch.provenance.place(n.source, site=site)
    else:
        raw.place = unplaced_reason
    return raw


def raw_capture(watch: GraphWatch) -> RawCapture:
    """Everything ``watch`` read so far (call after its flush), as a raw capture with its
    traced replays joined."""
    done = [g for g in watch.graphs if g.raw is not None and not g.failed
            and len(g.raw.inspection.node_id)]
    raws = [_raw(watch, g) for g in done]
    meta = run_meta(watch)
    join = watch.traced.join(done)  # closes the open window: its facts are complete
    windows = watch.traced.facts()
    if windows:
        meta["tracing_windows"] = windows
    out = RawCapture(raws, join=join, meta=meta)
    trees = watch.trees.doc()
    if trees is not None:
        out.extra_files[TREES_FILE] = lambda: trees
    return out
