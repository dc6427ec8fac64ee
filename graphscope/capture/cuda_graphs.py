"""``graph``, ``Graph`` and ``make_graphed_callables`` with annotations (SPEC CG3, AG1-7, CG4-5).

Thin layers over torch's own CUDA-graph API: torch does the capture, graphscope holds the CUPTI
subscription around it and publishes the exec-id annotation map afterwards.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from .. import annotate as _ann
from .._errors import CaptureError, NoGPUError

_ERROR_MODES = ("default", "global", "thread_local", "relaxed")


class _GcPause:
    """Keep Python's cyclic GC from running inside a capture window.

    A collection there can run the destructor of an unreachable CUDAGraph (or other CUDA
    object) from earlier work; its cudaFree is illegal while a stream captures and invalidates
    the capture. torch.cuda.graph collects once at entry; graphscope then pauses the collector
    until the capture ends.
    """

    def __init__(self) -> None:
        self._was = False

    def pause(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def resume(self) -> None:
        if self._was:
            gc.enable()
            self._was = False


def _cuda_or_raise(what: str) -> None:
    """One clear error naming ``what`` where no CUDA GPU is visible (torch's own are about
    dummy base classes and streams)."""
    import torch

    if not torch.cuda.is_available():
        built = (f"built for CUDA {torch.version.cuda}" if torch.version.cuda
                 else "a CPU-only build")
        raise NoGPUError(f"graphscope.{what} needs a CUDA GPU: none is visible to PyTorch "
                         f"(torch {torch.__version__}, {built})")


class graph:
    """``torch.cuda.graph`` (CG3) plus ``enable_annotations`` (MK1) and ``record_ops``.

    Args:
        cuda_graph: a ``torch.cuda.CUDAGraph`` to capture into.
        pool, stream, capture_error_mode: as ``torch.cuda.graph``.
        enable_annotations: hold the CUPTI recorder for the capture, so that
            ``mark_kernels``, module annotations and backward attribution tag nodes.
        record_ops: also record the aten op, input shapes and user source line per node.
        session: the capture's :class:`graphscope.annotate.Session`, where its caller sets
            more than ``record_ops`` (a capture source's DDP watch and leaf scopes); implies
            ``enable_annotations``.
    """

    def __init__(
        self,
        cuda_graph: Any,
        pool: Any = None,
        stream: Any = None,
        capture_error_mode: str = "global",
        enable_annotations: bool = False,
        record_ops: bool = False,
        *,
        session: Optional[_ann.Session] = None,
    ) -> None:
        _cuda_or_raise("graph")
        import torch

        self.cuda_graph = cuda_graph
        self._inner = torch.cuda.graph(
            cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode
        )
        self._annotation = session if session is not None or not enable_annotations else (
            _ann.Session(record_ops))
        self._session: Optional[contextlib.ExitStack] = None
        self._records: list[Any] = []
        self._gc = _GcPause()
        self.template_graph_ids: list[int] = []

    def __enter__(self) -> graph:
        if self._annotation is not None:
            stack = contextlib.ExitStack()
            self._records = stack.enter_context(_ann.run_session(self._annotation))
            self._session = stack
        try:
            self._inner.__enter__()  # synchronize, gc.collect(), empty_cache, capture_begin
            self._gc.pause()
        except BaseException:
            if self._session is not None:
                self._session.close()
                self._session = None
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Optional[bool]:
        try:
            self._inner.__exit__(exc_type, exc, tb)  # capture_end; instantiates unless kept
        except BaseException:
            recover_failed_capture(self.cuda_graph, getattr(self._inner, "stream_ctx", None))
            raise
        finally:
            self._gc.resume()
            if self._session is not None:
                self._session.close()  # exits modes, releases CUPTI on every path
                self._session = None
                if self._records and exc_type is None:
                    self.template_graph_ids = _ann.publish(self._records[0], self.cuda_graph)
        return None

    @property
    def records(self) -> Any:
        """The raw node records of this capture (after exit), or None without annotations."""
        return self._records[0] if self._records else None


def recover_failed_capture(cuda_graph: Any, stream_ctx: Any = None) -> None:
    """Leave the process usable after ``capture_end`` raised (an invalidated capture).

    torch's ``capture_end`` throws before its epilogue: ``torch.cuda.graph`` then skips
    restoring the stream, the caching allocator keeps routing to the graph's pool and the
    default CUDA generator still believes it is capturing ("Offset increment outside graph
    capture"). Undo each of those; the generator restarts from its initial seed.
    """
    import torch

    if stream_ctx is not None:
        with contextlib.suppress(Exception):
            stream_ctx.__exit__(None, None, None)
    dev = torch.cuda.current_device()
    with contextlib.suppress(Exception):
        torch._C._cuda_endAllocateToPool(dev, cuda_graph.pool())
    with contextlib.suppress(Exception):
        gen = torch.cuda.default_generators[dev]
        fresh = torch.Generator(device=f"cuda:{dev}")
        fresh.manual_seed(gen.initial_seed())
        gen.graphsafe_set_state(fresh.graphsafe_get_state())
    with contextlib.suppress(Exception):
        cuda_graph.reset()


def _has_torch_accelerator_graph() -> bool:
    import torch

    return hasattr(torch, "accelerator") and hasattr(torch.accelerator, "Graph")


class Graph:
    """``torch.accelerator.Graph`` (AG1-AG7) for torch versions without it, CUDA backend.

    ``with stream, g:`` captures the current stream. graphscope adds the keyword
    ``enable_annotations``: capture with the recorder held, then keys annotations to the exec
    graph at every instantiate (also the implicit one of the first ``replay()``).
    """

    def __init__(
        self,
        keep_graph: bool = False,
        *,
        pool: Optional[tuple[int, int]] = None,
        capture_error_mode: str = "default",
        enable_annotations: bool = False,
        record_ops: bool = False,
    ) -> None:
        _cuda_or_raise("Graph")
        import torch

        if capture_error_mode not in _ERROR_MODES:
            raise ValueError(
                f"capture_error_mode must be one of {', '.join(_ERROR_MODES)}, "
                f"not {capture_error_mode!r}"
            )
        self.keep_graph = keep_graph
        self._pool = pool
        self._mode = "global" if capture_error_mode == "default" else capture_error_mode
        self._g = torch.cuda.CUDAGraph(keep_graph=keep_graph)
        self._annotate = enable_annotations
        self._record_ops = record_ops
        self._session: Optional[contextlib.ExitStack] = None
        self._records: list[Any] = []
        self._instantiated = False
        self._gc = _GcPause()

    # AG5
    def capture_begin(self) -> None:
        if self._annotate:
            stack = contextlib.ExitStack()
            self._records = stack.enter_context(_ann.session(self._record_ops))
            self._session = stack
        try:
            gc.collect()
            self._g.capture_begin(pool=self._pool, capture_error_mode=self._mode)  # type: ignore[arg-type]
            self._gc.pause()
        except BaseException:
            self._close_session(publish=False)
            raise

    def capture_end(self) -> None:
        try:
            self._g.capture_end()
        except BaseException:
            recover_failed_capture(self._g)
            raise
        finally:
            self._gc.resume()
            self._close_session(publish=True)
        self._instantiated = not self.keep_graph

    def _close_session(self, publish: bool) -> None:
        if self._session is None:
            return
        self._session.close()
        self._session = None
        if publish and self._records:
            _ann.publish(self._records[0], self._g)

    # AG1: context manager over the current stream
    def __enter__(self) -> Graph:
        self.capture_begin()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.capture_end()

    # AG7
    def instantiate(self) -> None:
        self._g.instantiate()
        self._instantiated = True
        if self._annotate:
            _ann.remap_to_exec_graph(self._g)

    def replay(self) -> None:
        if not self._instantiated:  # AG2: the first replay instantiates a kept graph
            self.instantiate()
        self._g.replay()

    def reset(self) -> None:
        self._g.reset()
        self._instantiated = False

    def pool(self) -> Any:
        return self._g.pool()

    # AG6
    def enable_debug_mode(self) -> None:
        self._g.enable_debug_mode()

    def debug_dump(self, path: str) -> None:
        self._g.debug_dump(path)

    @property
    def cuda_graph(self) -> Any:
        """The underlying ``torch.cuda.CUDAGraph``."""
        return self._g


@contextlib.contextmanager
def _kept_graphs() -> Iterator[list[Any]]:
    """Make torch's internal CUDAGraph() calls keep their templates, and collect them."""
    import torch

    made: list[Any] = []
    real = torch.cuda.CUDAGraph

    def factory(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("keep_graph", True)
        g = real(*args, **kwargs)
        made.append(g)
        return g

    torch.cuda.CUDAGraph = factory  # type: ignore[misc,assignment]
    try:
        yield made
    finally:
        torch.cuda.CUDAGraph = real  # type: ignore[misc]


@dataclass
class GraphedCallables:
    """What :func:`graph_callables` made: torch's graphed callables and, for graphscope's own
    callables source, the ``CUDAGraph`` objects (forward graphs in order, then backward graphs
    in reverse order) and the raw node records of the call."""

    callables: Any
    graphs: list[Any]
    records: Any


def graph_callables(
    callables: Any,
    sample_args: Any,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: Any = None,
    *,
    module_depth: Optional[int] = None,
    record_ops: bool = False,
) -> GraphedCallables:
    """:func:`make_graphed_callables` that also hands back the graphs and records it made.

    torch does the graphing (and raises CG5's errors); graphscope holds the recorder for the
    call, tags module scopes through global module hooks (per-module hooks would be refused by
    CG5), and instantiates the kept templates inside the window so exec ids are recorded.
    """
    import torch

    mods = callables if isinstance(callables, tuple) else (callables,)
    handles = [
        _ann.register_module_annotations(m, depth=module_depth)
        for m in mods
        if isinstance(m, torch.nn.Module)
    ]
    try:
        with _ann.session(record_ops) as records, _kept_graphs() as made:
            try:
                out = torch.cuda.make_graphed_callables(
                    callables, sample_args, num_warmup_iters=num_warmup_iters,
                    allow_unused_input=allow_unused_input, pool=pool,
                )
            except RuntimeError as exc:
                raise CaptureError(f"make_graphed_callables failed: {exc}") from exc
            for g in made:
                g.instantiate()
    finally:
        for h in handles:
            h.remove()
    _ann.publish(records[0])  # rekeyed through the clone map of the instantiates above
    return GraphedCallables(out, list(made), records[0])


def make_graphed_callables(
    callables: Any,
    sample_args: Any,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: Any = None,
) -> Any:
    """``torch.cuda.make_graphed_callables`` (CG4-CG5), same signature, with forward and
    backward graphs annotated by module FQN (``L``, ``L.<path>``)."""
    return graph_callables(callables, sample_args, num_warmup_iters, allow_unused_input,
                           pool).callables
