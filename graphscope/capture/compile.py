"""``capture --try-compile GLOB``: what compiling modules would buy, measured. The graph is
captured twice more: once with the modules GLOB matches run eagerly, once with each of them
compiled by ``torch.compile`` (inductor, ``triton.cudagraphs`` off: graphscope owns the
graph, so inductor makes no CUDA graph of its own; static shapes). Both captures are replayed
alternated under the tracer, and compile.json keeps per module its kernels and time in each
version, the graph's spans, and how the compiled graph's outputs (and, for a step, gradients
and the state it writes) compare with the eager one's, within the tolerances of compiled code
(:data:`graphscope.capture.compare.TOLERANCES`).

GLOB is matched against module paths as graphscope names them (``L``, ``L.<path>``;
``fnmatch``: ``*`` crosses dots); a match inside another match is compiled as part of it.
Each matched module's ``forward`` is wrapped in a ``mark_kernels`` scope, in both versions
and outside the compiled code, so its kernels (in a step, its backward's too: autograd's
node for a compiled forward is created inside the scope) carry its path; no module hooks run
in these captures (dynamo would trace them). The eager version is captured the same way, so
the two differ only by compilation.

A capture or measurement that fails is reported in its graph's entry (``error``), not raised:
the bundle stands without it. A GLOB that matches no module is refused before any GPU work.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import annotate as ann
from .._errors import ConfigError
from ..model.build import build_graph
from ..model.bundle_files import COMPILE_VERSION
from .alternate import exec_id_of, one_line, replays_of, trace_alternated
from .compare import Ran, compare_replays, summary
from .compile_doc import graph_entry, module_paths, select, version_stats
from .cuda_graphs import graph as annotated_graph
from .source import inspect_template
from .source import warmup as warm_up
from .streams import plan_mode
from .streams_train import named_grads, set_grads, state_names

BACKEND = "inductor"
OPTIONS = {"triton.cudagraphs": False}  # no CUDA graphs of inductor's own
KIND = "compiled"  # the tolerances of compiled code (compare.TOLERANCES)


@dataclass
class Targets:
    """The modules a glob compiles (``(path, module)``) and the matches inside them."""

    glob: str
    modules: list[tuple[str, Any]]
    nested: list[str] = field(default_factory=list)
    # path -> its compiled forward, made once: every graph (bucket) reuses dynamo's cache
    compiled: dict[str, Callable[..., Any]] = field(default_factory=dict)
    backend: str = BACKEND  # (tests compile with "eager": dynamo without inductor)

    @property
    def paths(self) -> list[str]:
        return [p for p, _ in self.modules]


def targets(model: Any, glob: str, where: str = "the model") -> Targets:
    """The modules of ``model`` that ``glob`` compiles; a glob that matches none is refused
    (a one-line ConfigError naming a few of the model's module paths)."""
    named = module_paths(model) if hasattr(model, "named_modules") else []
    chosen, nested = select([p for p, _ in named], glob)
    if not chosen:
        some = ", ".join(p for p, _ in named[:6]) or "none: it is not an nn.Module"
        more = f" ... ({len(named)} in all)" if len(named) > 6 else ""
        raise ConfigError(f"--try-compile {glob!r} matches no module of {where} (its modules: "
                          f"{some}{more}); module paths are named L, L.<path>")
    by_path = dict(named)
    return Targets(glob, [(p, by_path[p]) for p in chosen], nested)


def _scoped(fn: Callable[..., Any], path: str, compiled: bool = False) -> Callable[..., Any]:
    """``fn`` in a ``mark_kernels`` scope of ``path``; a compiled ``fn`` runs with no
    TorchDispatchMode active: dynamo runs every frame eagerly under one (graphscope's op mode
    is on where a stream is marked or DDP scoped), and would compile nothing. The module's
    scope, pushed outside, still tags its kernels."""
    annotation = {"module_name": path}
    if not compiled:
        def forward(*args: Any, **kwargs: Any) -> Any:
            with ann.mark_kernels(annotation):
                return fn(*args, **kwargs)

        return forward
    from torch.utils._python_dispatch import _disable_current_modes

    def compiled_forward(*args: Any, **kwargs: Any) -> Any:
        with ann.mark_kernels(annotation), _disable_current_modes():
            return fn(*args, **kwargs)

    return compiled_forward


@contextlib.contextmanager
def patched(t: Targets, compiled: bool) -> Iterator[None]:
    """Each target's ``forward`` scoped by its path and, with ``compiled``, compiled; put
    back on exit."""
    import torch

    saved: list[tuple[Any, Any]] = []
    try:
        for path, m in t.modules:
            own = m.__dict__.get("forward")  # an instance attribute, if the model set one
            fn = m.forward
            if compiled:
                if path not in t.compiled:
                    options: Optional[dict[str, Any]] = (
                        dict(OPTIONS) if t.backend == BACKEND else None)
                    t.compiled[path] = torch.compile(fn, backend=t.backend, options=options,
                                                     dynamic=False)
                fn = t.compiled[path]
            saved.append((m, own))
            m.forward = _scoped(fn, path, compiled)
        yield
    finally:
        for m, own in saved:
            if own is None:
                m.__dict__.pop("forward", None)
            else:
                m.forward = own


@dataclass
class Version:
    ran: Ran
    nodes: Sequence[Any]
    exec_id: int
    warmup_s: float


@contextlib.contextmanager
def told_capturing() -> Iterator[None]:
    """``torch.cuda.is_current_stream_capturing()`` answers True, as it will in the capture.
    Models branch on it (transformers skips a data-dependent check and builds an attention
    mask while a capture is under way): compiled code warmed up on the other branch would
    recompile inside the capture, where compiling cannot run."""
    import torch
    import torch.cuda.graphs as graphs

    saved = (torch.cuda.is_current_stream_capturing, graphs.is_current_stream_capturing)

    def is_current_stream_capturing() -> bool:
        return True

    torch.cuda.is_current_stream_capturing = is_current_stream_capturing
    graphs.is_current_stream_capturing = is_current_stream_capturing
    try:
        yield
    finally:
        torch.cuda.is_current_stream_capturing, graphs.is_current_stream_capturing = saved


def capture_version(run: Callable[[], Any], name: str, warmup: int, model: Any) -> Version:
    """``run`` warmed up (compiling, the first time) and captured with the recorder held,
    so each node carries the scope it was launched in; instantiated. Warm-up and capture
    run :func:`told_capturing`, so both take the branches a capture takes."""
    import torch

    t = time.perf_counter()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with told_capturing():
        warm_up(run, max(warmup, 2))
        warmup_s = time.perf_counter() - t
        with ann.session(False) as records, annotated_graph(g):
            out = run()
    raw = inspect_template(g, name, records[0], dot=False)
    g.instantiate()
    eid = exec_id_of(g)
    graph = build_graph(name, raw.inspection, raw.records, eid,
                        ann.TABLES.scopes.annotation, lambda _i: None)
    return Version(Ran(g, out, named_grads(model)), graph.nodes, eid, round(warmup_s, 3))


def external_writes(run: Callable[[], Any]) -> list[Any]:
    """What one eager run of ``run`` writes in place but does not make (parameters,
    optimizer state, caches), seen by the stream plan's dispatch mode on one stream."""
    import torch

    mode = plan_mode(1)
    with mode:
        run()
    torch.cuda.synchronize()
    return list(mode.core.external.values())


def try_graph(name: str, run: Callable[[], Any], t: Targets, model: Any, warmup: int,
              replays: int) -> dict[str, Any]:
    """compile.json's entry for one graph (module docstring)."""
    grads = named_grads(model)  # the bundle's graph's: put back after these captures
    try:
        with patched(t, compiled=False):
            external = external_writes(run)
            eager = capture_version(run, name, warmup, model)
        with patched(t, compiled=True):
            compiled = capture_version(run, name, warmup, model)
    except Exception as exc:  # a failed capture ended itself; the process goes on
        return {"graph": name, "error": one_line(exc)}
    finally:
        set_grads(model, grads)
    try:
        parts = compare_replays(eager.ran, compiled.ran, external, state_names(model), KIND)
        cols = trace_alternated([(eager.ran.graph, compiled.ran.graph)], replays)
        stats = [version_stats(v.nodes, replays_of(cols, v.exec_id), t.paths)
                 for v in (eager, compiled)]
        return {**graph_entry(name, stats[0], stats[1], t.paths, replays,
                              summary(parts, KIND)),
                "warmup_s": {"eager": eager.warmup_s, "compiled": compiled.warmup_s},
                "same_kernels": same_kernels(eager.nodes, compiled.nodes)}
    except Exception as exc:  # the tracer refused (a profiler active) or a replay failed
        return {"graph": name, "error": "measuring: " + one_line(exc)}
    finally:
        del eager, compiled


def same_kernels(eager: Sequence[Any], compiled: Sequence[Any]) -> bool:
    """Whether the compiled version launched the very kernels of the eager one (each name as
    many times): torch.compile took no effect (dynamo ran the modules eagerly)."""
    from collections import Counter

    from ..model.graph import NodeKind

    def names(nodes: Sequence[Any]) -> Counter[str]:
        return Counter(n.kernel or "" for n in nodes if n.type == NodeKind.KERNEL)

    return names(eager) == names(compiled)


def try_compile(model: Any, glob: str, runs: Sequence[tuple[str, Callable[[], Any]]],
                warmup: int, replays: int, refused: Optional[str] = None) -> dict[str, Any]:
    """compile.json: every graph of ``runs`` (``(name, what it captures)``) tried with the
    modules ``glob`` matches compiled; ``refused``: why none is tried (in each entry)."""
    import torch

    t = targets(model, glob)
    doc: dict[str, Any] = {
        "compile_version": COMPILE_VERSION, "glob": glob, "backend": BACKEND,
        "options": dict(OPTIONS), "dynamic": False,
        "modules": [{"module": p, "class": type(m).__name__} for p, m in t.modules],
        "nested": t.nested, "torch": torch.__version__, "graphs": [],
    }
    for name, run in runs:
        doc["graphs"].append({"graph": name, "error": refused} if refused else
                             try_graph(name, run, t, model, warmup, replays))
    return doc
