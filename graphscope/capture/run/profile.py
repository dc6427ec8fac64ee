"""``graphscope.capture.run.profile``: ``graphscope run`` as a context manager, for the graphs
captured
inside a ``with`` block of the user's own program (the ``run`` capture source)."""

from __future__ import annotations

import sys
from typing import Any, Optional


class profile:
    """Observe every CUDA graph captured in the block; write a bundle when it ends.

    Example::

        with graphscope.capture.run.profile(output="decode.run", replays=20) as p:
            serve()          # captures and replays graphs as it always does
        print(p.bundle_path)

    Args:
        output: bundle directory to write (also written when the block raises); by default
            ``graphscope-out/profile.run``.
        replays: replays of each graph traced by CUPTI (the rest run at plain speed).
        skip_replays: replays of each graph to let pass before tracing.
        graphs: regex; only graphs whose name matches are traced.
        depth: annotate modules at most this deep below the outermost module called.
        record_ops: record the aten op, shapes and source line of every node.
        force: replace an existing ``output``.
    """

    def __init__(self, output: Optional[str] = None, *, replays: int = 20,
                 skip_replays: int = 0, graphs: Optional[str] = None,
                 depth: Optional[int] = None, record_ops: bool = True,
                 force: bool = False, command: Optional[list[str]] = None) -> None:
        from ..config import CaptureConfig

        self.cfg = CaptureConfig(mode="run", output=output, force=force, replays=replays,
                                 skip_replays=skip_replays, graphs=graphs, depth=depth,
                                 record_ops=record_ops).validate()
        self.output: Optional[str] = output  # the bundle directory, once entered
        self.force = force
        self.command = command or ["graphscope.capture.run.profile"]
        self.bundle_path: Optional[str] = None
        self.result: Any = None  # graphscope.capture.CaptureResult once written
        self.watch: Any = None  # the GraphWatch while (and after) the block runs
        self.rank: Any = None
        self._watching: Any = None

    def __enter__(self) -> profile:
        from ...model.ranks import rank_from_env
        from .. import require_gpu
        from ..finish import bundle_output
        from . import watching

        require_gpu("profile")
        self.rank = rank_from_env()
        out = bundle_output(self.cfg.output, "profile", "run", rank=self.rank,
                            force=self.force)
        self.output = out
        self._watching = watching(self.cfg)
        self.watch = self._watching.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._watching.__exit__(None, None, None)
        raw = self.watch.result()
        if not raw.graphs:
            return
        from ..finish import finish, manifest_for

        manifest = manifest_for(self.command, "run", self.cfg.depth, self.rank,
                                skip_replays=self.cfg.skip_replays,
                                traced_replays_per_graph=self.cfg.replays)
        try:
            self.result = finish(raw, output=str(self.output), manifest=manifest,
                                 force=self.force,
                                 keep_events=self.cfg.keep_events)
        except Exception:
            if exc[0] is None:
                raise
            print("graphscope: could not write the bundle after the block raised",
                  file=sys.stderr)
            return
        self.bundle_path = self.result.bundle_path

    @property
    def warnings(self) -> list[str]:
        return list(self.watch.warnings) if self.watch is not None else []

    @property
    def captures(self) -> int:
        return len(self.watch.graphs) if self.watch is not None else 0
