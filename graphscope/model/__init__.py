"""The data: the Graph model (nodes, edges, annotations, timings of captured CUDA graphs),
built from raw capture records (build.py) and joined with replay records (join.py); the loaded
bundle (bundle.py), read and written by bundle_io.py; the files beside the nodes
(bundle_files.py). The names below are imported on first use: a reader of a bundle's
summary.json alone loads none of the node model."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bundle import Bundle
    from .graph import CapturedGraph, Node, NodeKind, short_kernel_name

_WHERE = {"Bundle": "bundle", "CapturedGraph": "graph", "Node": "graph", "NodeKind": "graph",
          "short_kernel_name": "graph"}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{where}"), name)


__all__ = ["Bundle", "CapturedGraph", "Node", "NodeKind", "short_kernel_name"]
