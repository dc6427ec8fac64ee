"""Model file -> captured, annotated, replayed graphs -> bundle. The main job of the tool."""

from __future__ import annotations

import dataclasses
import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from . import annotations as ann
from . import native
from ._errors import CaptureError, NoGPUError
from ._version import __version__
from .bundle import write_bundle
from .config import CaptureConfig
from .cuda_graphs import graph as annotated_graph
from .cuda_graphs import make_graphed_callables
from .graphs.join import JoinResult, join
from .graphs.model import Bundle, CapturedGraph, Node
from .loader import ModelSpec, default_model_path, load_model_file
from .reports.summary import summarize

LOSS_SCOPE = {"module_name": "(loss)"}
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


def _to_cuda(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x.cuda().detach().requires_grad_(x.requires_grad)
    if isinstance(x, (tuple, list)):
        return type(x)(_to_cuda(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_cuda(v) for k, v in x.items()}
    return x


def default_loss(out: Any) -> Any:
    """Sum of every floating-point output: a scalar to call backward on."""
    import torch

    leaves = out if isinstance(out, (tuple, list)) else (out,)
    ts = [t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not ts:
        raise CaptureError("the model returned no floating-point tensor to call backward on")
    total = ts[0].float().sum()
    for t in ts[1:]:
        total = total + t.float().sum()
    return total


def _zero_grad(model: Any) -> None:
    if hasattr(model, "parameters"):
        for p in model.parameters():
            p.grad = None


def _node_table(
    name: str, ins: native.GraphInspection, rec: native.CreatedNodes, exec_id: int
) -> CapturedGraph:
    by_id = {
        int(n): (int(s), int(o))
        for n, s, o in zip(rec.node_id.tolist(), rec.scope.tolist(), rec.op.tolist())
    }
    nodes = []
    for i, nid in enumerate(ins.node_id.tolist()):
        ntype = native.NODE_TYPES.get(int(ins.node_type[i]), f"type{int(ins.node_type[i])}")
        sid, oid = by_id.get(nid, (-1, -1))
        annotation = dict(ann.SCOPES.annotation(sid)) if ntype in ("kernel", "memcpy", "memset") \
            else {}
        op = ann.OPS[oid] if oid >= 0 else None
        k = int(ins.name_idx[i])
        local = nid & 0xFFFFFFFF
        nodes.append(
            Node(
                graph=name,
                local_id=local,
                exec_node_id=(exec_id << 32) | local,
                type=ntype,
                kernel=ins.names[k] if k >= 0 else None,
                demangled=ins.demangled[k] if k >= 0 else None,
                grid=tuple(int(v) for v in ins.grid[i]),  # type: ignore[arg-type]
                block=tuple(int(v) for v in ins.block[i]),  # type: ignore[arg-type]
                smem=int(ins.smem[i]),
                bytes=int(ins.bytes[i]),
                annotation=annotation,
                op=op.op if op else None,
                shapes=op.shapes if op else None,
                source=op.source if op else None,
            )
        )
    nodes.sort(key=lambda n: n.local_id)
    edges = tuple(
        sorted(
            (int(a) & 0xFFFFFFFF, int(b) & 0xFFFFFFFF)
            for a, b in zip(ins.edge_from.tolist(), ins.edge_to.tolist())
        )
    )
    return CapturedGraph(name, ins.graph_id, exec_id, tuple(nodes), edges)


def _read_dot(ptr: int) -> str:
    fd, path = tempfile.mkstemp(suffix=".dot")
    os.close(fd)
    try:
        native.debug_dot_print(ptr, path)
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    finally:
        os.unlink(path)


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


class _Phases:
    def __init__(self, progress: Optional[Progress]) -> None:
        self.progress = progress
        self.times: dict[str, float] = {}
        self._name: Optional[str] = None
        self._t = 0.0

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        if self._name is not None:
            self.times[self._name] = now - self._t
        self._name, self._t = name, now
        if self.progress is not None and name != "done":
            self.progress(name)


def run_capture(
    cfg: CaptureConfig,
    *,
    timing: bool = True,
    command: str = "capture",
    argv: Optional[list[str]] = None,
    progress: Optional[Progress] = None,
) -> CaptureResult:
    """Load, warm up, capture (annotated), instantiate, replay under the tracer, write."""
    import torch

    phase = _Phases(progress)
    require_gpu(command)
    from .ranks import rank_from_env, rank_output

    rank = rank_from_env()
    if rank is not None:  # under torchrun: one GPU and one bundle per rank
        torch.cuda.set_device(rank.local_rank)
    phase("load")
    path = cfg.model or default_model_path()
    spec = load_model_file(path, cfg.entry)
    model = spec.model.cuda() if hasattr(spec.model, "cuda") else spec.model
    if rank is not None and spec.settings.get("ddp"):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        if not dist.is_initialized():
            dist.init_process_group("nccl")
        cfg = dataclasses.replace(cfg, warmup=max(cfg.warmup, 11))  # DDP needs 11 warm-ups
        # DDP must be built on the side stream it will be captured from (torch's docs)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            model = DistributedDataParallel(model, device_ids=[rank.local_rank])
        torch.cuda.current_stream().wait_stream(s)
    args = _to_cuda(spec.args)
    loss_fn = spec.loss or default_loss
    graphs: list[CapturedGraph] = []
    raw: dict[str, str] = {}
    replay: Callable[[], None]
    try:
        if cfg.mode == "step":
            replay, graphs, raw = _capture_step(cfg, model, args, loss_fn, phase)
        else:
            replay, graphs, raw = _capture_callables(cfg, model, args, loss_fn, phase)
    except torch.cuda.OutOfMemoryError as exc:
        raise CaptureError(f"{path}: out of GPU memory during capture: {exc}") from exc
    except RuntimeError as exc:
        msg = str(exc).splitlines()[0]
        if "Cannot copy between CPU and CUDA" in msg:
            msg += (" (a CPU tensor, such as loss targets, reaches the GPU inside the captured "
                    "step: move it to the GPU in graphscope_model() or in warm-up)")
        raise CaptureError(f"{path}: capture failed: {msg}") from exc
    jr: Optional[JoinResult] = None
    if timing and cfg.replays:
        phase("replay")
        jr = trace_replays(replay, graphs, cfg.replays, cfg.keep_events)
    phase("write")
    bundle = _assemble(graphs, jr)
    summary = summarize(bundle)
    manifest = {
        "tool": "graphscope",
        "command": argv if argv is not None else [command],
        "mode": cfg.mode,
        "warmup": cfg.warmup,
        "replays": jr.replays if jr else 0,
        "depth": cfg.depth,
        "backward": cfg.backward,
        "model": {"path": spec.path, "sha256": spec.sha256, "entry": spec.entry},
        "versions": versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "graphs": [g.name for g in graphs],
    }
    timeline = None
    if jr is not None:
        timeline = {
            "replays": jr.replays,
            "durations_ns": {str(k): v for k, v in sorted(jr.durations_ns.items())},
            "replay_kernel_ns": jr.replay_kernel_ns,
            "replay_span_ns": jr.replay_span_ns,
            "events": jr.events,
            "joined_records": jr.joined_records,
            "unjoined_records": jr.unjoined_records,
            "outside_graph_records": jr.outside_graph_records,
        }
    out = cfg.output or _default_output(spec, command)
    if rank is not None:
        out = rank_output(out, rank)
        manifest["rank"] = {"rank": rank.rank, "world_size": rank.world_size,
                            "local_rank": rank.local_rank}
    written = write_bundle(
        out, manifest=manifest, graphs=graphs, timeline=timeline, summary=summary,
        raw_dot=raw, force=cfg.force,
    )
    phase("done")
    final = Bundle(written, manifest, bundle.graphs, bundle.replays, bundle.replay_kernel_ns,
                   bundle.replay_span_ns, bundle.events, bundle.unjoined_records)
    return CaptureResult(written, final, jr, phase.times, summary)


def _default_output(spec: ModelSpec, command: str) -> str:
    stem = os.path.splitext(os.path.basename(spec.path))[0]
    return os.path.join("graphscope-out", f"{stem}.{command}")


def _assemble(graphs: list[CapturedGraph], jr: Optional[JoinResult]) -> Bundle:
    if jr is None:
        return Bundle("", {}, tuple(graphs), 0)
    out = []
    for g in graphs:
        nodes = tuple(
            Node(**{**n.__dict__, "durations_ns": tuple(jr.durations_ns.get(n.exec_node_id, ()))})
            for n in g.nodes
        )
        out.append(CapturedGraph(g.name, g.template_graph_id, g.exec_id, nodes, g.edges))
    return Bundle("", {}, tuple(out), jr.replays, tuple(jr.replay_kernel_ns),
                  tuple(jr.replay_span_ns), tuple(jr.events), jr.unjoined_records)


def _warmup(model: Any, args: tuple, loss_fn: Callable, n: int) -> None:
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            _zero_grad(model)
            loss_fn(model(*args)).backward()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def _capture_step(
    cfg: CaptureConfig, model: Any, args: tuple, loss_fn: Callable, phase: _Phases
) -> tuple[Callable[[], None], list[CapturedGraph], dict[str, str]]:
    import torch

    phase("warmup")
    _warmup(model, args, loss_fn, cfg.warmup)
    phase("capture")
    _zero_grad(model)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    handle = ann.register_module_annotations(model, depth=cfg.depth, backward=cfg.backward)
    try:
        with annotated_graph(g, enable_annotations=True, record_ops=cfg.record_ops) as cap:
            out = model(*args)
            with ann.mark_kernels(LOSS_SCOPE, backward=cfg.backward):
                loss = loss_fn(out)
                loss.backward()  # the gradient seed (ones_like) belongs to the loss
    finally:
        handle.remove()
    phase("inspect")
    ptr = g.raw_cuda_graph()
    ins = native.inspect_graph(ptr)
    raw = {"step": _read_dot(ptr)}
    phase("instantiate")
    g.instantiate()
    eid = native.exec_id(g.raw_cuda_graph_exec())
    ann.remap_to_exec_graph(g)
    graphs = [_node_table("step", ins, cap.records, eid)]
    return g.replay, graphs, raw


def _capture_callables(
    cfg: CaptureConfig, model: Any, args: tuple, loss_fn: Callable, phase: _Phases
) -> tuple[Callable[[], None], list[CapturedGraph], dict[str, str]]:

    phase("capture")
    made: list[Any] = []
    rec_holder: list[native.CreatedNodes] = []
    graphed = make_graphed_callables(
        model, args, num_warmup_iters=max(cfg.warmup, 1), module_depth=cfg.depth,
        record_ops=cfg.record_ops, graphs_out=made, records_out=rec_holder,
    )
    phase("inspect")
    if len(made) != 2:
        raise CaptureError(f"expected a forward and a backward graph, torch made {len(made)}")
    graphs, raw = [], {}
    for name, g in zip(("forward", "backward"), made):
        ptr = g.raw_cuda_graph()
        ins = native.inspect_graph(ptr)
        raw[name] = _read_dot(ptr)
        eid = native.exec_id(g.raw_cuda_graph_exec())
        graphs.append(_node_table(name, ins, rec_holder[0], eid))

    def replay() -> None:
        _zero_grad(model)
        loss_fn(graphed(*args)).backward()

    return replay, graphs, raw


def trace_replays(
    replay: Callable[[], None], graphs: list[CapturedGraph], n: int, keep_events: int
) -> JoinResult:
    """Replay ``n`` times under the CUPTI activity tracer and join records onto nodes."""
    import torch

    replay()  # one untraced replay: first-launch upload costs stay out of the numbers
    torch.cuda.synchronize()
    with native.tracing() as out:
        for _ in range(n):
            replay()
        torch.cuda.synchronize()
    recs = out[0]
    ids = {n.exec_node_id: g.name for g in graphs for n in g.nodes if n.is_work}
    return join(
        recs.graph_node_id, recs.correlation, recs.start_ns, recs.end_ns, recs.stream,
        recs.kind, ids, keep_events,
    )


__all__ = ["CaptureResult", "default_loss", "require_gpu", "run_capture", "trace_replays"]
