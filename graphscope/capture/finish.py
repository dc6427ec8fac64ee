"""The shared tail of every capture source: raw capture -> Graph model -> joined timings ->
bundle, with the one manifest writer and the one default-output rule."""

from __future__ import annotations

import dataclasses
import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import native
from .._version import __version__
from ..analysis.summary import summarize
from ..annotate.tables import TABLES
from ..model.build import build_graph
from ..model.bundle import Bundle
from ..model.bundle_io import write_bundle
from ..model.graph import CapturedGraph, Node
from ..model.join import JoinResult
from .replay import trace_replays
from .source import RawCapture, default_output

Progress = Callable[[str], None]


@dataclass
class CaptureResult:
    bundle_path: Optional[str]
    bundle: Bundle
    join: Optional[JoinResult]
    phases_s: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    # why the bundle keeps no diagnosis.json (the analysis failed on it: `report` diagnoses
    # the bundle and says what fails), or None
    diagnosis_error: Optional[str] = None


def versions() -> dict[str, Any]:
    import torch

    caps = native.extension().probe(False)
    return {
        "graphscope": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "driver_cuda": caps.get("driver_cuda_version"),
        "cupti_api": caps.get("cupti_api_version"),
        "gpu": torch.cuda.get_device_name(),
    }


class Phases:
    """Wall time per named phase; reports each new phase to ``progress``."""

    def __init__(self, progress: Optional[Progress]) -> None:
        self.progress = progress
        self.times: dict[str, float] = {}
        self._name: Optional[str] = None
        self._t = 0.0

    @property
    def current(self) -> Optional[str]:
        return self._name

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        if self._name is not None:
            self.times[self._name] = self.times.get(self._name, 0.0) + now - self._t
        self._name, self._t = name, now
        if self.progress is not None and name != "done":
            self.progress(name)


def build_graphs(raw: RawCapture) -> list[CapturedGraph]:
    """Raw graphs -> the Graph model, scope and op ids resolved through the annotate tables."""
    ops, scopes = TABLES.ops, TABLES.scopes

    def op_of(i: int) -> Any:
        return ops.get(i)

    return [
        build_graph(r.name, r.inspection, r.records, r.exec_id, scopes.annotation, op_of,
                    r.info, r.place)
        for r in raw.graphs
    ]


def work_ids(graphs: list[CapturedGraph]) -> dict[int, str]:
    return {n.exec_node_id: g.name for g in graphs for n in g.nodes if n.is_work}


def with_timings(graphs: list[CapturedGraph], jr: Optional[JoinResult]) -> Bundle:
    if jr is None:
        return Bundle("", {}, tuple(graphs), 0)
    out = []
    for g in graphs:
        nodes = tuple(
            Node(**{**n.__dict__, "durations_ns": tuple(jr.durations_ns.get(n.exec_node_id, ()))})
            for n in g.nodes
        )
        out.append(dataclasses.replace(g, nodes=nodes))
    # everything timeline.json keeps, launch records included: the kept diagnosis is the one
    # a read of the written bundle gives
    return Bundle("", {}, tuple(out), jr.replays, tuple(jr.replay_kernel_ns),
                  tuple(jr.replay_span_ns), tuple(jr.events), jr.unjoined_records,
                  tuple(jr.launches))


def timeline_of(jr: Optional[JoinResult]) -> Optional[dict[str, Any]]:
    if jr is None:
        return None
    return {
        "replays": jr.replays,
        "durations_ns": {str(k): v for k, v in sorted(jr.durations_ns.items())},
        "replay_kernel_ns": jr.replay_kernel_ns,
        "replay_span_ns": jr.replay_span_ns,
        "events": jr.events,
        "joined_records": jr.joined_records,
        "unjoined_records": jr.unjoined_records,
        "outside_graph_records": jr.outside_graph_records,
        "outside_graph_ns": jr.outside_graph_ns,
        **({"launches": jr.launches} if jr.launches else {}),
    }


def clock_of(jr: JoinResult) -> dict[str, Any]:
    """Where the events' times start: ``origin_ns``, a CUPTI timestamp (CUPTI puts GPU times on
    the host's clock, one for every process of the host), and the host, so that the ranks of
    one job line up on one clock (analysis/collectives.py)."""
    import socket

    return {"source": "cupti", "origin_ns": jr.origin_ns, "host": socket.gethostname()}


def finish(
    raw: RawCapture,
    *,
    output: str,
    manifest: Mapping[str, Any],
    force: bool,
    replays: int = 0,
    keep_events: int = 3,
    phase: Optional[Phases] = None,
    counters: int = 0,
) -> CaptureResult:
    """The shared tail of every source: Graph model, timings, summary, bundle (atomic)."""
    phase = phase or Phases(None)
    graphs = build_graphs(raw)
    jr: Optional[JoinResult] = raw.join
    if jr is None and raw.replay is not None and replays:
        phase("replay")
        jr = trace_replays(raw.replay, work_ids(graphs), replays, keep_events)
    counters_json = None
    if counters and raw.replay is not None:  # dedicated replays, after the timed ones
        phase("counters")
        from .counters import collect

        counters_json = collect(raw.replay, work_ids(graphs), counters)
    extra = {}
    for name, make in raw.extra_files.items():
        phase(name.split(".")[0])
        extra[name] = make()
    phase("write")
    full = {**manifest, **raw.meta, "replays": jr.replays if jr else 0,
            "versions": versions(), "graphs": [g.name for g in graphs],
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **({"clock": clock_of(jr)} if jr is not None and jr.origin_ns is not None else {})}
    # the summary reads the manifest too (callables' one capture window, say)
    bundle = dataclasses.replace(with_timings(graphs, jr), manifest=full)
    summary = summarize(bundle)
    phase("diagnosis")
    from ..analysis.report import report_diagnosis

    try:  # the bundle is what the capture was for: it is written without a kept diagnosis
        diagnosis, diagnosis_error = report_diagnosis(bundle), None
    except Exception as exc:  # noqa: BLE001 - any failure of the analysis, said to the user
        diagnosis, diagnosis_error = None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    written = write_bundle(
        output, manifest=full, graphs=list(bundle.graphs), timeline=timeline_of(jr),
        summary=summary, raw_dot={r.name: r.dot for r in raw.graphs if r.dot}, force=force,
        counters=counters_json,
        extra=extra, diagnosis=diagnosis,
    )
    phase("done")
    final = dataclasses.replace(bundle, path=written, manifest=full)
    return CaptureResult(written, final, jr, phase.times, summary, diagnosis_error)


def bundle_output(output: Optional[str], target: str, command: str, *, module: bool = False,
                  rank: Any = None, force: bool = False) -> str:
    """The bundle directory to write: ``output`` or the default for ``target``
    (:func:`~graphscope.capture.source.default_output`), under ``rank<r>/`` for a torchrun
    rank; refused before any work when it exists and ``force`` is not given."""
    from ..model.outputs import check_bundle_output
    from ..model.ranks import rank_output

    out = output or default_output(target, command, module)
    if rank is not None:
        out = rank_output(out, rank)
    check_bundle_output(out, force=force, inputs=() if module else (target,))
    return out


def manifest_for(command: list[str], mode: str, depth: Optional[int], rank: Any = None,
                 **fields: Any) -> dict[str, Any]:
    """The manifest every source writes (``finish`` adds replays, versions, graphs, time)."""
    manifest: dict[str, Any] = {"tool": "graphscope", "command": command, "mode": mode,
                                "depth": depth, **fields}
    if rank is not None:
        manifest["rank"] = {"rank": rank.rank, "world_size": rank.world_size,
                            "local_rank": rank.local_rank}
    return manifest
