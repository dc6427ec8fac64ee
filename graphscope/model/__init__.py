"""The data: the Graph model (nodes, edges, annotations, timings of captured CUDA graphs),
built from raw capture records (build.py) and joined with replay records (join.py); the loaded
bundle (bundle.py), read and written by bundle_io.py."""

from .bundle import Bundle
from .graph import CapturedGraph, Node, NodeKind
from .names import short_kernel_name

__all__ = ["Bundle", "CapturedGraph", "Node", "NodeKind", "short_kernel_name"]
