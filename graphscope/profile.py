"""``graphscope.profile``: ``graphscope run`` as a context manager, for the graphs captured
inside a ``with`` block of the user's own program."""

from __future__ import annotations

import sys
from typing import Any, Optional

from ._errors import BundleError


class profile:
    """Observe every CUDA graph captured in the block; write a bundle when it ends.

    Example::

        with graphscope.profile(output="decode.run", replays=20) as p:
            serve()          # captures and replays graphs as it always does
        print(p.bundle_path)

    Args:
        output: bundle directory to write (also written when the block raises).
        replays: replays of each graph traced by CUPTI (the rest run at plain speed).
        skip_replays: replays of each graph to let pass before tracing.
        graphs: regex; only graphs whose name matches are traced.
        depth: annotate modules at most this deep below the outermost module called.
        record_ops: record the aten op, shapes and source line of every node.
        force: replace an existing ``output``.
    """

    def __init__(self, output: str = "graphscope-out/profile.run", *, replays: int = 20,
                 skip_replays: int = 0, graphs: Optional[str] = None,
                 depth: Optional[int] = None, record_ops: bool = True,
                 force: bool = False, command: Optional[list[str]] = None) -> None:
        from .capture.observe import ObserveConfig

        self.output = output
        self.force = force
        self.cfg = ObserveConfig(replays=replays, skip_replays=skip_replays, graphs=graphs,
                                 depth=depth, record_ops=record_ops).validate()
        self.command = command or ["graphscope.profile"]
        self.bundle_path: Optional[str] = None
        self.result: Any = None  # graphscope.capture.CaptureResult once written
        self.observer: Any = None
        self.rank: Any = None

    def __enter__(self) -> profile:
        import os

        from .capture import require_gpu
        from .capture.observe import Observer
        from .ranks import rank_from_env, rank_output

        require_gpu("profile")
        self.rank = rank_from_env()
        if self.rank is not None:
            self.output = rank_output(self.output, self.rank)
        if os.path.exists(self.output) and not self.force:
            raise BundleError(f"{os.path.abspath(self.output)} already exists: pass --force "
                              "to replace it or choose -o PATH")
        self.observer = Observer(self.cfg)
        self.observer.install()
        return self

    def __exit__(self, *exc: object) -> None:
        obs = self.observer
        obs.uninstall()
        raw = obs.result()
        if not raw.graphs:
            return
        from .capture import finish

        manifest: dict[str, Any] = {"tool": "graphscope", "command": self.command,
                                    "mode": "run", "depth": self.cfg.depth,
                                    "skip_replays": self.cfg.skip_replays,
                                    "traced_replays_per_graph": self.cfg.replays}
        if self.rank is not None:
            manifest["rank"] = {"rank": self.rank.rank, "world_size": self.rank.world_size,
                                "local_rank": self.rank.local_rank}
        try:
            self.result = finish(raw, output=self.output, manifest=manifest, force=self.force,
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
        return list(self.observer.warnings) if self.observer is not None else []

    @property
    def captures(self) -> int:
        return len(self.observer.graphs) if self.observer is not None else 0
