"""The ``run`` source: the CUDA graphs an unmodified program captures itself (``graphscope run``
and :func:`graphscope.profile`).

Split by concern: :mod:`.patch` wraps ``torch.cuda.CUDAGraph`` and ``torch.compile``;
:mod:`.watch` holds each capture window (recorder, module and optimizer hooks);
:mod:`.counting` decides which captures are recorded by node counts; :mod:`.reading` reads a
batch of finished captures after the program's loop; :mod:`.results` hands the result over as a
:class:`~graphscope.capture.source.RawCapture`; :mod:`.names` names graphs and modules;
:mod:`.provenance` places compiled kernels through inductor's metadata; :mod:`.traced` traces
replays as the program runs them; :mod:`.runner` runs the program as ``python`` would.
The join, the manifest, the default output and the bundle are the shared ones
(capture/replay.py, capture/finish.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from ..source import Phase, ProgramJob, RawCapture, register
from .runner import check_target, run_program, settled_heap
from .watch import GraphWatch

if TYPE_CHECKING:  # config imports capture's registry (mode names): not back
    from ..config import CaptureConfig


@contextlib.contextmanager
def watching(cfg: CaptureConfig) -> Iterator[GraphWatch]:
    """Watch every CUDA graph captured in the ``with`` body; the patches are undone on exit."""
    watch = GraphWatch(cfg)
    watch.install()
    try:
        yield watch
    finally:
        watch.uninstall()


@register
class RunSource:
    name: ClassVar[str] = "run"
    help: ClassVar[str] = "the graphs an unmodified program captures itself (graphscope run)"
    takes: ClassVar[str] = "program"

    def capture(self, job: ProgramJob, phase: Phase) -> RawCapture:
        phase("run")
        with watching(job.config) as watch, settled_heap():
            job.exit_code = run_program(job.target, job.args, job.module)
        return watch.result()


__all__ = ["GraphWatch", "RunSource", "check_target", "run_program", "watching"]
