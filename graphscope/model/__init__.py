"""The Graph model: nodes, edges, annotations and timings of captured CUDA graphs."""

from .model import Bundle, CapturedGraph, Node, short_kernel_name

__all__ = ["Bundle", "CapturedGraph", "Node", "short_kernel_name"]
