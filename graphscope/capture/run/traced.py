"""A program's replays, traced as it runs them: replays ``K .. K+N-1`` of each graph run under
the CUPTI activity tracer; the others run at plain speed. Consecutive traced replays share one
tracing window, opened at the first and closed (device synchronize, tracer stop) before a
replay that is not traced, before a capture begins, before a torch.profiler session of the
program opens, and at the end: between them the program runs as it would, so the gaps between
replays on the GPU are the program's own (``traced_back_to_back`` in the manifest; the
diagnosis's "host bound between replays"). The records are joined afterwards by the one join
(capture/replay.py).

After each window, CUPTI is detached (``native.cupti_detach``): with its activity records once
on, an attached CUPTI left the program's later captures ~20% slower and its eager launches ~20%
slower on the H200 (bench/probes/after_trace_gpu.py). The detach is made as the window closes,
right after its synchronize and the tracer's stop. A detach put off until the program had gone
on replaying with CUPTI attached (made at a later replay, so that windows close together would
share one attachment) crashed the program's next graph launch (SIGSEGV in ``replay``, on the
67-bucket ladder of bench/bench_ladder.py and in tests/gpu/test_run_gpu.py, 2026-12-02, a
synchronize before it or not; the cause inside CUPTI or the driver is not established), so each
window pays for attaching again (~15 ms, in the manifest's ``tracing_windows.open_s``). Not while
the program's torch.profiler runs (it owns CUPTI then): the detach stays due and is made at the
program's first replay or capture after it. ``GRAPHSCOPE_CUPTI_DETACH=0`` keeps CUPTI attached,
for a program that reads CUPTI's activity records itself without a callback subscriber (which
would stop a detach)."""

from __future__ import annotations

import contextlib
import os
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ... import native
from ..._errors import GraphscopeError
from ...model.join import JoinResult
from ...native.profilers import profiler_active
from ..replay import join_traced

if TYPE_CHECKING:  # config imports capture's registry (mode names): not back
    from ..config import CaptureConfig


class TracedReplays:
    """Which replays to trace, and the activity records of those traced so far."""

    def __init__(self, cfg: CaptureConfig, warnings: list[str]) -> None:
        self.cfg = cfg
        self.cols: list[native.ActivityRecords] = []
        self.warnings = warnings
        self._regex = re.compile(cfg.graphs) if cfg.graphs else None
        self._window: Optional[contextlib.ExitStack] = None  # open tracing window
        self._out: list[native.ActivityRecords] = []
        self.detach = os.environ.get("GRAPHSCOPE_CUPTI_DETACH", "1") != "0"
        self.windows = 0
        self.open_s = 0.0  # opening windows (CUPTI attached again after a detach among it)
        self.detached = 0  # detaches made
        self.detach_s = 0.0
        self.not_detached = ""  # why a detach was refused (the first reason)
        self.detach_at: Optional[float] = None  # a detach is due from then (perf_counter)

    def wanted(self, rec: Any) -> bool:
        """Whether this replay of graph ``rec`` (a ``ProgramGraph``, counted already) is traced."""
        if rec.raw is None or rec.traced >= self.cfg.replays:
            return False
        if rec.replays <= self.cfg.skip_replays:
            return False
        return self._regex is None or bool(self._regex.search(rec.name))

    def run(self, rec: Any, replay: Callable[[], None]) -> None:
        """One replay under the tracer (or plainly, where the tracer cannot be had), in the
        open tracing window or a new one."""
        if self._window is None:
            if native.tracer_active():  # someone else's tracer (a replay inside a replay)
                replay()
                return
            stack = contextlib.ExitStack()
            t = time.perf_counter()
            try:
                self._out = stack.enter_context(native.tracing())
            except GraphscopeError as exc:
                # e.g. the program replays under its own torch.profiler, which keeps CUPTI's
                # activity buffers: this replay runs untraced (a later one may be traced), and
                # the program goes on
                stack.close()
                if rec.untraced_why is None:
                    rec.untraced_why = str(exc)
                    self.warnings.append(f"{rec.name}: some replays not traced ({exc})")
                replay()
                return
            self.open_s += time.perf_counter() - t
            self.windows += 1
            self.detach_at = None  # attached again for this window: detached as it closes
            self._window = stack
            native.BEFORE_PROFILER.append(self.close)
        replay()
        rec.traced += 1

    def close(self) -> None:
        """End the open tracing window: synchronize, stop the tracer, keep its records."""
        if self._window is None:
            return
        import torch

        stack, self._window = self._window, None
        if self.close in native.BEFORE_PROFILER:
            native.BEFORE_PROFILER.remove(self.close)
        try:
            torch.cuda.synchronize()
        finally:
            stack.close()
        self.cols.extend(self._out)
        self._out = []
        if self.detach:
            self.detach_at = time.perf_counter()
            self.settle()

    def settle(self) -> None:
        """Detach CUPTI if a detach is due (a window closed) and the program's torch.profiler
        does not own CUPTI (called as a window closes, and at the program's replays outside a
        window and its captures' start, for a detach put off by the profiler)."""
        if self.detach_at is None or self._window is not None:
            return
        t = time.perf_counter()
        if t < self.detach_at or profiler_active():
            return  # the program's torch.profiler owns CUPTI now: later
        self.detach_at = None
        import torch

        torch.cuda.synchronize()  # no work of the program's in flight while CUPTI finalizes
        why = native.cupti_detach()
        self.detach_s += time.perf_counter() - t
        if why:
            self.not_detached = self.not_detached or why
        else:
            self.detached += 1

    def facts(self) -> dict[str, Any]:
        """The tracing windows for the manifest: how many, their opening and detaching
        seconds, how many detaches, why one was refused (the first reason), and whether the
        program ended with a detach still due."""
        if not self.windows:
            return {}
        out: dict[str, Any] = {"windows": self.windows, "open_s": round(self.open_s, 6),
                               "cupti_detached": self.detached,
                               "detach_s": round(self.detach_s, 6)}
        if not self.detach:
            out["not_detached"] = "GRAPHSCOPE_CUPTI_DETACH=0"
        elif self.not_detached:
            out["not_detached"] = self.not_detached
        if self.detach_at is not None:  # no replay or capture came after the last window
            out["attached_at_end"] = True
        return out

    def join(self, done: list[Any]) -> Optional[JoinResult]:
        """The traced records of graphs ``done`` joined onto their nodes (None: none traced)."""
        self.close()
        if not any(g.traced for g in done):
            return None
        rekey = {old: g.exec_id for g in done for old in g.exec_ids[:-1]}
        ids = {}
        for g in done:
            local = g.raw.inspection.node_id & np.uint64(0xFFFFFFFF)
            for lid in local.tolist():
                ids[(g.exec_id << 32) | int(lid)] = g.name
        return join_traced(self.cols, ids, self.cfg.keep_events, rekey)
