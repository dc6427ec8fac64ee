"""The patches that let graphscope watch an unmodified program: ``torch.cuda.CUDAGraph``'s
methods and ``torch.compile``.

torch 2.11 has no official capture/instantiate/replay hooks (pytorch PR 192162 adds them later),
so the methods of ``torch.cuda.CUDAGraph`` are wrapped; measured on the H200, that sees every
capture of a decode loop, a whole training step, ``make_graphed_callables`` and torch.compile's
cudagraph trees (``shared/probes/probe_run_hooks.txt``). Every graph is created with the
program's own ``keep_graph`` (the watch reads the graph before ``capture_end``, while it is
still being captured).
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, Callable

_METHODS = ("__init__", "capture_begin", "capture_end", "instantiate", "replay", "reset",
            "__del__")


def _parent(cls: Any, name: str, real: dict[str, Any]) -> Callable[..., Any]:
    """The method as torch defines it (on the class itself or on its C++ base)."""
    fn = real.get(name)
    if fn is not None:
        return fn
    return getattr(super(cls, cls), name)


class _Methods:
    """``torch.cuda.CUDAGraph``'s methods as torch defines them, by name."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls
        self.real = {k: cls.__dict__[k] for k in _METHODS if k in cls.__dict__}

    def __call__(self, name: str) -> Callable[..., Any]:
        return _parent(self.cls, name, self.real)

    def undo(self) -> None:
        for name in _METHODS:
            if name in self.real:
                setattr(self.cls, name, self.real[name])
            else:
                with contextlib.suppress(AttributeError):
                    delattr(self.cls, name)


def _capture_methods(watch: Any, torch_: _Methods) -> dict[str, Callable[..., Any]]:
    """``__init__``, ``capture_begin`` and ``capture_end`` through ``watch``."""
    cls = torch_.cls
    base_init = torch_.real.get("__init__") or getattr(cls.__mro__[1], "__init__")  # noqa: B009
    keep_of: dict[int, bool] = {}

    # keep_graph is read by the C++ constructor (__init__, not __new__): the program's choice,
    # remembered and passed on as it is
    def __init__(self: Any, keep_graph: bool = False, *a: Any, **k: Any) -> None:
        keep_of[id(self)] = bool(keep_graph)
        base_init(self, keep_graph, *a, **k)

    # graphscope's own seconds in these two, torch's calls left out (GraphWatch.steps_s)
    def capture_begin(self: Any, *a: Any, **k: Any) -> None:
        t0 = time.perf_counter()
        watch.traced.close()  # no tracing window across a capture
        watch.traced.settle()  # CUPTI detached if the windows are long past
        watch.begin(self, keep_of.get(id(self), False))
        t1 = time.perf_counter()
        try:
            torch_("capture_begin")(self, *a, **k)
        except BaseException:
            watch.abort(self, "capture_begin raised")
            raise
        t2 = time.perf_counter()
        watch.begun(self)
        watch.steps_s += (t1 - t0) + (time.perf_counter() - t2)

    def capture_end(self: Any) -> None:
        t0 = time.perf_counter()
        watch.ending(self)
        t = time.perf_counter()
        try:
            torch_("capture_end")(self)
        except BaseException as exc:
            watch.abort(self, f"capture failed: {str(exc).splitlines()[0] if str(exc) else exc}")
            raise
        t2 = time.perf_counter()
        watch.end(self, t2 - t)
        watch.steps_s += (t - t0) + (time.perf_counter() - t2)

    return {"__init__": __init__, "capture_begin": capture_begin, "capture_end": capture_end}


def _replay_methods(watch: Any, torch_: _Methods) -> dict[str, Callable[..., Any]]:
    """``instantiate``, ``replay``, ``reset`` and ``__del__`` through ``watch``."""

    def instantiate(self: Any) -> None:
        t = time.perf_counter()
        torch_("instantiate")(self)
        watch.instantiated(self, time.perf_counter() - t)

    def replay(self: Any) -> None:
        plain = torch_("replay")
        if watch.holding:  # the program replays: its batch is read first
            watch.flush()
        rec = watch.by_id.get(id(self))
        if rec is None or rec.failed:
            return plain(self)
        if rec.exec_id < 0:  # a kept graph replayed without instantiate (torch's AG2)
            instantiate(self)
        rec.replays += 1
        if watch.traced.wanted(rec):
            watch.traced.run(rec, lambda: plain(self))
        else:
            watch.traced.close()  # the window holds consecutive traced replays only
            plain(self)
            if watch.traced.detach_at is not None:
                watch.traced.settle()

    def reset(self: Any) -> None:
        watch.graph_going(self)  # its template goes: inspected first if still waiting
        torch_("reset")(self)

    real_del = torch_.real.get("__del__")

    def __del__(self: Any) -> None:
        try:
            watch.graph_going(self)
        except Exception:  # noqa: BLE001 - never raise under GC
            pass
        if real_del is not None:
            real_del(self)

    return {"instantiate": instantiate, "replay": replay, "reset": reset, "__del__": __del__}


def patch_cuda_graph(watch: Any) -> Callable[[], None]:
    """Route ``torch.cuda.CUDAGraph``'s capture, instantiate and replay through ``watch`` (a
    :class:`~graphscope.capture.run.watch.GraphWatch`); returns the undo."""
    import torch

    torch_ = _Methods(torch.cuda.CUDAGraph)
    for name, fn in {**_capture_methods(watch, torch_), **_replay_methods(watch, torch_)}.items():
        setattr(torch_.cls, name, fn)
    return torch_.undo


def patch_compile(*hooks: Any) -> Callable[[], None]:
    """Install inductor provenance (and the other ``hooks``: the cudagraph-tree watch) now if
    inductor is loaded, else at the first ``torch.compile`` call; returns the undo."""
    import torch

    if "torch._inductor" in sys.modules:
        for h in hooks:
            h.install()
    real_compile = torch.compile

    def compile(*a: Any, **k: Any) -> Any:  # noqa: A001 - wraps torch.compile
        for h in hooks:
            h.install()
        return real_compile(*a, **k)

    torch.compile = compile
    return lambda: setattr(torch, "compile", real_compile)
