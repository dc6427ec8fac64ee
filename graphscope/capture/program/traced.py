"""A program's replays, traced as it runs them: replays ``K .. K+N-1`` of each graph run under
the CUPTI activity tracer; the others run at plain speed. Consecutive traced replays share one
tracing window, opened at the first and closed (device synchronize, tracer stop) before a
replay that is not traced, before a capture begins, before a torch.profiler session of the
program opens, and at the end: between them the program runs as it would, so the gaps between
replays on the GPU are the program's own (``traced_back_to_back`` in the manifest; the
diagnosis's "host bound between replays"). The records are joined afterwards by the one join
(capture/replay.py)."""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ... import native
from ..._errors import GraphscopeError
from ...model.join import JoinResult
from ..replay import join_traced

if TYPE_CHECKING:  # config imports capture's registry (mode names): not back
    from ...config import CaptureConfig


class TracedReplays:
    """Which replays to trace, and the activity records of those traced so far."""

    def __init__(self, cfg: CaptureConfig, warnings: list[str]) -> None:
        self.cfg = cfg
        self.cols: list[native.ActivityRecords] = []
        self.warnings = warnings
        self._regex = re.compile(cfg.graphs) if cfg.graphs else None
        self._window: Optional[contextlib.ExitStack] = None  # open tracing window
        self._out: list[native.ActivityRecords] = []

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
