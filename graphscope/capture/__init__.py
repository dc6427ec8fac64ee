"""Obtain graphs (a capture source), build the Graph model, time replays, write the bundle.

Sources (one per file, behind :class:`~graphscope.capture.source.CaptureSource`):
``step`` and ``callables`` capture a model file (``graphscope capture``); ``observe`` watches
the graphs an unmodified program captures itself (``graphscope run``). :func:`finish` is the
shared tail: raw capture -> Graph model -> joined timings -> bundle.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import annotate as ann
from .. import native
from .._errors import CaptureError, GraphscopeError, NoGPUError
from .._version import __version__
from ..analysis.summary import summarize
from ..bundle import write_bundle
from ..loader import ModelSpec, default_model_path, load_model_file
from ..model.build import build_graph
from ..model.graph import Bundle, CapturedGraph, Node
from ..model.join import JoinResult
from ..render.fmt import fmt_bytes
from . import callables as _callables  # noqa: F401  (registers the source)
from . import forward as _forward  # noqa: F401  (registers the source)
from . import step as _step  # noqa: F401  (registers the source)
from .replay import trace_replays
from .source import SOURCES, ModelJob, RawCapture, RawGraph

if TYPE_CHECKING:  # config validates --mode against SOURCES: it imports capture, not back
    from ..config import CaptureConfig

Progress = Callable[[str], None]

GPU_NEEDED = (
    "graphscope {cmd} needs an NVIDIA GPU with its driver ({why}); on this machine use the "
    "commands that read bundles: graphscope dump, graphscope report"
)


@dataclass
class CaptureResult:
    bundle_path: Optional[str]
    bundle: Bundle
    join: Optional[JoinResult]
    phases_s: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


def require_gpu(command: str) -> None:
    """Fail fast, with one line, when capture cannot work here."""
    try:
        native.ensure_loaded()
    except NoGPUError as exc:
        raise NoGPUError(GPU_NEEDED.format(cmd=command, why=exc)) from None


def to_cuda(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x.cuda().detach().requires_grad_(x.requires_grad)
    if isinstance(x, (tuple, list)):
        return type(x)(to_cuda(v) for v in x)
    if isinstance(x, dict):
        return {k: to_cuda(v) for k, v in x.items()}
    return x


def _float_leaves(x: Any, out: list[Any], depth: int = 0) -> None:
    """Floating-point tensors in an output: tensors, tuples/lists, dicts (Hugging Face's
    ``ModelOutput`` is one) and dataclasses, in order."""
    import torch

    if depth > 32:
        return
    if isinstance(x, torch.Tensor):
        if x.is_floating_point() and x.requires_grad:
            out.append(x)
    elif isinstance(x, Mapping):
        for v in x.values():
            _float_leaves(v, out, depth + 1)
    elif isinstance(x, (tuple, list)):
        for v in x:
            _float_leaves(v, out, depth + 1)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            _float_leaves(getattr(x, f.name, None), out, depth + 1)


def default_loss(out: Any) -> Any:
    """A scalar to call backward on: the output's ``loss`` when it has one (Hugging Face models
    given labels), else the sum of every floating-point output that requires grad."""
    import torch

    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        return loss
    ts: list[Any] = []
    _float_leaves(out, ts)
    if not ts:
        raise CaptureError(f"the model returned no floating-point tensor that requires grad to "
                           f"call backward on (got {type(out).__name__}); return one or give "
                           "'loss' in graphscope_model()")
    total = ts[0].float().sum()
    for t in ts[1:]:
        total = total + t.float().sum()
    return total


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
    ops = ann.ops.OPS

    def op_of(i: int) -> Any:
        return ops.get(i)

    return [
        build_graph(r.name, r.inspection, r.records, r.exec_id, ann.SCOPES.annotation, op_of,
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
    return Bundle("", {}, tuple(out), jr.replays, tuple(jr.replay_kernel_ns),
                  tuple(jr.replay_span_ns), tuple(jr.events), jr.unjoined_records)


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
        **({"launches": jr.launches} if jr.launches else {}),
    }


def finish(
    raw: RawCapture,
    *,
    output: str,
    manifest: Mapping[str, Any],
    force: bool,
    replays: int = 0,
    keep_events: int = 3,
    phase: Optional[Phases] = None,
) -> CaptureResult:
    """The shared tail of every source: Graph model, timings, summary, bundle (atomic)."""
    phase = phase or Phases(None)
    graphs = build_graphs(raw)
    jr: Optional[JoinResult] = raw.join
    if jr is None and raw.replay is not None and replays:
        phase("replay")
        jr = trace_replays(raw.replay, work_ids(graphs), replays, keep_events)
    phase("write")
    bundle = with_timings(graphs, jr)
    summary = summarize(bundle)
    full = {**manifest, **raw.meta, "replays": jr.replays if jr else 0,
            "versions": versions(), "graphs": [g.name for g in graphs],
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    written = write_bundle(
        output, manifest=full, graphs=list(bundle.graphs), timeline=timeline_of(jr),
        summary=summary, raw_dot={r.name: r.dot for r in raw.graphs if r.dot}, force=force,
    )
    phase("done")
    final = dataclasses.replace(bundle, path=written, manifest=full)
    return CaptureResult(written, final, jr, phase.times, summary)


def _load_job(cfg: CaptureConfig, spec: ModelSpec, rank: Any) -> ModelJob:
    import torch

    model = spec.model.cuda() if hasattr(spec.model, "cuda") else spec.model
    warm = cfg.warmup
    if spec.settings.get("ddp") and rank is None:
        raise CaptureError(f"{spec.path}: settings['ddp'] needs several processes: run "
                           "graphscope capture --nproc N (or under torchrun)")
    if rank is not None and spec.settings.get("ddp"):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        if not dist.is_initialized():
            dist.init_process_group("nccl")
        warm = max(warm, 11)  # DDP needs 11 warm-ups
        # DDP must be built on the side stream it will be captured from (torch's docs)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            model = DistributedDataParallel(model, device_ids=[rank.local_rank])
        torch.cuda.current_stream().wait_stream(s)
    buckets = tuple((to_cuda(a), to_cuda(kw)) for a, kw in spec.buckets)
    if buckets:
        args, kwargs = buckets[0]
    else:
        args, kwargs = to_cuda(spec.args), to_cuda(spec.kwargs)
    return ModelJob(model=model, args=args, kwargs=kwargs,
                    loss_fn=spec.loss or default_loss, warmup=warm, depth=cfg.depth,
                    backward=cfg.backward, record_ops=cfg.record_ops, settings=spec.settings,
                    buckets=buckets, step=spec.step)


def run_capture(
    cfg: CaptureConfig,
    *,
    timing: bool = True,
    command: str = "capture",
    argv: Optional[list[str]] = None,
    progress: Optional[Progress] = None,
) -> CaptureResult:
    """Load a model file, capture it with the source ``cfg.mode`` names, replay, write."""
    import torch

    phase = Phases(progress)
    require_gpu(command)
    from ..ranks import rank_from_env, rank_output

    rank = rank_from_env()
    if rank is not None:  # under torchrun: one GPU and one bundle per rank
        torch.cuda.set_device(rank.local_rank)
    phase("load")
    path = cfg.model or default_model_path()
    spec = load_model_file(path, cfg.entry)
    job = _load_job(cfg, spec, rank)
    source = SOURCES[cfg.mode]()
    try:
        raw = source.capture(job, phase)
    except torch.cuda.OutOfMemoryError as exc:
        free, total = torch.cuda.mem_get_info()
        raise CaptureError(
            f"{path}: out of GPU memory during {phase.current or 'capture'} "
            f"({fmt_bytes(total - free)} of {fmt_bytes(total)} in use, "
            f"{fmt_bytes(torch.cuda.memory_reserved())} reserved by torch): "
            f"{str(exc).splitlines()[0]}") from exc
    except Exception as exc:
        raise _capture_failure(path, job, cfg.mode, phase.current, exc) from exc
    manifest: dict[str, Any] = {
        "tool": "graphscope",
        "command": argv if argv is not None else [command],
        "mode": cfg.mode,
        "warmup": job.warmup,
        "depth": cfg.depth,
        "backward": cfg.backward,
        "model": {"path": spec.path, "sha256": spec.sha256, "entry": spec.entry},
    }
    out = cfg.output or default_output(spec.path, command)
    if rank is not None:
        out = rank_output(out, rank)
        manifest["rank"] = {"rank": rank.rank, "world_size": rank.world_size,
                            "local_rank": rank.local_rank}
    return finish(raw, output=out, manifest=manifest, force=cfg.force,
                  replays=cfg.replays if timing else 0, keep_events=cfg.keep_events,
                  phase=phase)


def _eager_once(job: ModelJob, mode: str) -> Callable[[], Any]:
    """One eager run of what ``mode`` captures (to find what broke the capture)."""
    import torch

    if mode == "forward":
        def forward() -> Any:
            with torch.inference_mode():
                return job.model(*job.args, **job.kwargs)

        return forward
    from .step import step_of

    return step_of(job)


def _capture_failure(path: str, job: ModelJob, mode: str, phase: Optional[str],
                     exc: BaseException) -> GraphscopeError:
    """One line that says what to fix: the model's own exception (warm-up), or the op, module
    and line that a capture forbids (found by running the step once more, eagerly)."""
    from .diagnose import describe_exception, find_culprit

    if isinstance(exc, GraphscopeError):
        return exc
    if phase == "warmup" or not isinstance(exc, RuntimeError):
        return CaptureError(f"{path}: the model raised during {phase or 'capture'}: "
                            f"{describe_exception(exc, job.model)}")
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    culprit = find_culprit(_eager_once(job, mode), job.model)
    if culprit:
        return CaptureError(f"{path}: capture failed: {culprit} ({msg})")
    if "Cannot copy between CPU and CUDA" in msg:
        msg += (" (a CPU tensor, such as loss targets, reaches the GPU inside the captured "
                "step: move it to the GPU in graphscope_model() or in warm-up)")
    return CaptureError(f"{path}: capture failed: {msg}")


def default_output(path: str, command: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.join("graphscope-out", f"{stem}.{command}")


__all__ = [
    "SOURCES",
    "CaptureResult",
    "RawCapture",
    "RawGraph",
    "default_loss",
    "finish",
    "require_gpu",
    "run_capture",
    "trace_replays",
]
