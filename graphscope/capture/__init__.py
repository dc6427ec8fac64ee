"""Obtain graphs (a capture source), build the Graph model, time replays, write the bundle.

Sources (behind :class:`~graphscope.capture.source.CaptureSource`, registered in ``SOURCES``):
``step``, ``forward`` and ``callables`` capture a model file (``graphscope capture``); ``run``
(the :mod:`.run` package) watches the graphs an unmodified program captures itself
(``graphscope run``, :func:`graphscope.profile`). :func:`~.finish.finish` is the shared
tail:
raw capture -> Graph model -> joined timings -> bundle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import native
from .._errors import CaptureError, ConfigError, GraphscopeError, NoGPUError
from ..annotate.fsdp import fsdp_modules
from ..annotate.tensors import tensors_in
from ..model.bundle_files import EAGER_FILE
from . import callables as _callables  # noqa: F401  (registers the source)
from . import forward as _forward  # noqa: F401  (registers the source)
from . import run as _run  # noqa: F401  (registers the source)
from . import step as _step  # noqa: F401  (registers the source)
from .finish import (
    CaptureResult,
    Phases,
    Progress,
    build_graphs,
    bundle_output,
    finish,
    manifest_for,
    versions,
)
from .loader import ModelSpec, default_model_path, load_model_file
from .replay import trace_replays
from .source import SOURCES, ModelJob, ProgramJob, RawCapture, RawGraph, default_output

if TYPE_CHECKING:  # config imports capture's registry (mode names): not back
    from .config import CaptureConfig

GPU_NEEDED = (
    "graphscope {cmd} needs an NVIDIA GPU with its driver: {why}; on this machine use the "
    "commands that need no GPU: graphscope report, dump, diff, check BUNDLE, annotate-trace, "
    "lint"
)


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


def default_loss(out: Any) -> Any:
    """A scalar to call backward on: the output's ``loss`` when it has one (Hugging Face models
    given labels), else the sum of every floating-point output that requires grad."""
    import torch

    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        return loss
    ts = [t for t in tensors_in(out) if t.is_floating_point() and t.requires_grad]
    if not ts:
        raise CaptureError(f"the model returned no floating-point tensor that requires grad to "
                           f"call backward on (got {type(out).__name__}); return one or give "
                           "'loss' in graphscope_model()")
    total = ts[0].float().sum()
    for t in ts[1:]:
        total = total + t.float().sum()
    return total


def _load_job(cfg: CaptureConfig, spec: ModelSpec, rank: Any) -> ModelJob:
    import torch

    model = spec.model
    if hasattr(model, "cuda") and not fsdp_modules(model):  # fully_shard placed FSDP2's
        model = model.cuda()
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
                    buckets=buckets, step=spec.step, try_streams=cfg.try_streams,
                    try_compile=cfg.try_compile, replays=cfg.replays)


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

    check_capture_options(cfg)
    phase = Phases(progress)
    require_gpu(command)
    if cfg.counters:
        from .counters import require_counters

        require_counters()  # one line, before loading the model
    from ..model.ranks import rank_from_env

    rank = rank_from_env()
    if rank is not None:  # under torchrun: one GPU and one bundle per rank
        torch.cuda.set_device(rank.local_rank)
    path = cfg.model or default_model_path()
    out = bundle_output(cfg.output, path, command, rank=rank, force=cfg.force)
    phase("load")
    spec = load_model_file(path, cfg.entry)
    job = _load_job(cfg, spec, rank)
    if cfg.try_compile:  # a glob that matches no module: refused before any GPU work
        from .compile import targets
        from .step import unwrap_ddp

        targets(unwrap_ddp(job.model), cfg.try_compile, spec.path)
    source = SOURCES[cfg.mode]()
    try:
        raw = source.capture(job, phase)
    except torch.cuda.OutOfMemoryError as exc:
        free, total = torch.cuda.mem_get_info()
        raise CaptureError(
            f"{path}: out of GPU memory during {phase.current or 'capture'} "
            f"({_gib(total - free)} of {_gib(total)} in use, "
            f"{_gib(torch.cuda.memory_reserved())} reserved by torch): "
            f"{str(exc).splitlines()[0]}") from exc
    except Exception as exc:
        raise _capture_failure(path, job, cfg.mode, phase.current, exc) from exc
    if cfg.eager_baseline and timing:
        raw.extra_files[EAGER_FILE] = _eager(job, cfg, raw, path)
    manifest = manifest_for(argv if argv is not None else [command], cfg.mode, cfg.depth, rank,
                            warmup=job.warmup, backward=cfg.backward,
                            model={"path": spec.path, "sha256": spec.sha256,
                                   "entry": spec.entry})
    return finish(raw, output=out, manifest=manifest, force=cfg.force,
                  replays=cfg.replays if timing else 0, keep_events=cfg.keep_events,
                  phase=phase, counters=cfg.counters if timing else 0)


EAGER_MODES = ("step", "forward")
COMPILE_MODES = ("step", "forward")  # callables: make_graphed_callables graphs the model whole


def check_capture_options(cfg: CaptureConfig) -> None:
    """What a model file's capture refuses before any work (before the GPU check, and once for
    all ranks under ``--nproc``): a mode that runs a program, ``--eager-baseline`` but for a
    source whose graphs are one eager step, ``--try-compile`` but for those sources too."""
    if SOURCES[cfg.mode].takes != "model":
        models = sorted(n for n, s in SOURCES.items() if s.takes == "model")
        raise ConfigError(f"mode {cfg.mode!r} runs a program (graphscope run); a model file "
                          f"takes one of {', '.join(models)}")
    if cfg.eager_baseline and cfg.mode not in EAGER_MODES:
        raise ConfigError(f"--eager-baseline takes --mode {' or '.join(EAGER_MODES)}, not "
                          f"{cfg.mode!r} (its graphs are not one eager step)")
    if cfg.try_compile and cfg.mode not in COMPILE_MODES:
        raise ConfigError(f"--try-compile takes --mode {' or '.join(COMPILE_MODES)}, not "
                          f"{cfg.mode!r} (make_graphed_callables graphs the model whole)")


def _eager(job: ModelJob, cfg: CaptureConfig, raw: RawCapture, path: str
           ) -> Callable[[], dict[str, Any]]:
    """eager.json's maker: run after the graph's traced replays (capture/eager.py)."""
    from .eager import eager_baseline

    def make() -> dict[str, Any]:
        assert raw.replay is not None
        try:
            return eager_baseline(job, cfg.mode, [r.name for r in raw.graphs], raw.replay,
                                  cfg.replays)
        except GraphscopeError:
            raise
        except Exception as exc:
            from .failure import describe_exception

            raise CaptureError(f"{path}: the eager baseline failed: "
                               f"{describe_exception(exc, job.model)}") from exc

    return make


def run_program_capture(cfg: CaptureConfig, job: ProgramJob, *,
                        argv: Optional[list[str]] = None
                        ) -> tuple[RawCapture, Optional[CaptureResult]]:
    """``graphscope run``: run ``job``'s program with the ``run`` source watching, and write a
    bundle of the graphs it captured (None when it captured none). The program's exit code is
    left in ``job.exit_code``; its failures do not stop the bundle."""
    from ..model.ranks import rank_from_env

    rank = rank_from_env()
    out = bundle_output(cfg.output, job.target, "run", module=job.module, rank=rank,
                        force=cfg.force)  # refused before any GPU work
    require_gpu("run")
    raw = SOURCES["run"]().capture(job, Phases(None))
    if not raw.graphs:
        return raw, None
    manifest = manifest_for(argv or ["graphscope", "run"], "run", cfg.depth, rank,
                            skip_replays=cfg.skip_replays,
                            traced_replays_per_graph=cfg.replays, traced_back_to_back=True)
    return raw, finish(raw, output=out, manifest=manifest, force=cfg.force,
                       keep_events=cfg.keep_events)


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
    from .failure import describe_exception, find_culprit

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


__all__ = [
    "SOURCES",
    "CaptureResult",
    "ProgramJob",
    "RawCapture",
    "RawGraph",
    "build_graphs",
    "check_capture_options",
    "default_loss",
    "default_output",
    "finish",
    "require_gpu",
    "run_capture",
    "run_program_capture",
    "to_cuda",
    "trace_replays",
    "versions",
]


def _gib(n: int) -> str:
    """Bytes in GiB for an out-of-memory message (capture formats nothing else)."""
    return f"{n / 2**30:.1f} GiB"
