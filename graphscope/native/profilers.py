"""Which torch.profiler sessions of this process are open: graphscope's CUPTI tracer and
recorder stay off CUPTI while one is (CUPTI has one subscriber, and Kineto needs its activity
API). :func:`watch_profiler` notes every session from its start to its stop; what must let go
of CUPTI before a session opens registers in :data:`BEFORE_PROFILER`."""

from __future__ import annotations

import functools
from typing import Any, Callable

# torch.profiler objects between start and stop (see watch_profiler), with how many of their
# start/prepare calls are not closed yet: Kineto holds CUPTI's activity API from the warm-up of
# a schedule on, before the profiler counts as "enabled"
_PROFILERS_OPEN: dict[int, int] = {}
# called before a torch.profiler session opens: graphscope's own open tracing windows close
# first (a profiler needs CUPTI's activity API to itself)
BEFORE_PROFILER: list[Callable[[], None]] = []


def profiler_active() -> bool:
    if _PROFILERS_OPEN:
        return True
    try:
        import torch

        return bool(torch.autograd.profiler._is_profiler_enabled)
    except (ImportError, AttributeError):
        return False


def _unopen(prof: Any) -> None:
    left = _PROFILERS_OPEN.pop(id(prof), 0) - 1
    if left > 0:
        _PROFILERS_OPEN[id(prof)] = left


def watch_profiler() -> None:
    """Note every torch.profiler session of this process from its start to its stop, so that
    graphscope's tracer and recorder stay off CUPTI for all of it — also during a schedule's
    wait and warm-up steps, when Kineto has (or is about to have) CUPTI's activity API but
    torch.profiler does not yet count as enabled. Tracing a replay in a warm-up step left the
    program's trace without a single GPU event. The legacy ``torch.autograd.profiler.profile``
    (Kineto too) is noted from ``__enter__`` to ``__exit__``. Idempotent; a no-op without
    torch."""
    try:
        from torch.autograd import profiler as legacy
        from torch.profiler import profiler as tp
    except ImportError:
        return
    kineto = (("start", "stop"), ("prepare_trace", "stop_trace"))
    for cls, pairs in ((tp._KinetoProfile, kineto), (tp.profile, kineto),
                       (legacy.profile, (("__enter__", "__exit__"),))):
        if cls.__dict__.get("_graphscope_watched"):
            continue
        for opener, closer in pairs:
            if opener not in cls.__dict__ or closer not in cls.__dict__:
                continue
            real_open, real_close = cls.__dict__[opener], cls.__dict__[closer]

            def opened(self: Any, *a: Any, _real: Any = real_open, **k: Any) -> Any:
                for before in BEFORE_PROFILER:
                    before()
                _PROFILERS_OPEN[id(self)] = _PROFILERS_OPEN.get(id(self), 0) + 1
                try:
                    return _real(self, *a, **k)
                except BaseException:  # it did not open: nothing to close later
                    _unopen(self)
                    raise

            def closed(self: Any, *a: Any, _real: Any = real_close, **k: Any) -> Any:
                try:
                    return _real(self, *a, **k)
                finally:
                    _unopen(self)

            setattr(cls, opener, functools.wraps(real_open)(opened))
            setattr(cls, closer, functools.wraps(real_close)(closed))
        cls._graphscope_watched = True  # type: ignore[union-attr]
