"""The data: the Graph model (nodes, edges, annotations, timings of captured CUDA graphs),
built from raw capture records (build.py) and joined with replay records (join.py)."""

from .graph import Bundle, CapturedGraph, Node, NodeKind, short_kernel_name

__all__ = ["Bundle", "CapturedGraph", "Node", "NodeKind", "short_kernel_name"]
