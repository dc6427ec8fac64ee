"""graphscope: profile and inspect PyTorch CUDA graphs.

Library API (reference semantics in SPEC.md: MK*, AG*, CG*)::

    import graphscope
    g = torch.cuda.CUDAGraph()
    with graphscope.graph(g, enable_annotations=True):
        with graphscope.mark_kernels("attention"):
            y = model(x)
    graphscope.get_kernel_annotations()   # {exec node id: [{"name": "attention"}]}

Importing graphscope never imports torch nor needs a GPU.
"""

from typing import TYPE_CHECKING, Any

from ._errors import GraphscopeError
from ._version import __version__

if TYPE_CHECKING:
    from .annotate import (
        clear_kernel_annotations,
        get_kernel_annotations,
        is_available,
        mark_kernels,
        mark_stream,
        register_module_annotations,
        remap_to_exec_graph,
        save_kernel_annotations,
    )
    from .capture.cuda_graphs import Graph, graph, make_graphed_callables
    from .capture.run.profile import profile

# Imported on first use: the command line (`graphscope report`, `--help`) never loads the
# extension or the annotation machinery it does not use.
_LAZY = {
    **dict.fromkeys(("clear_kernel_annotations", "get_kernel_annotations", "is_available",
                     "mark_kernels", "mark_stream", "register_module_annotations",
                     "remap_to_exec_graph", "save_kernel_annotations"), "annotate"),
    **dict.fromkeys(("Graph", "graph", "make_graphed_callables"), "capture.cuda_graphs"),
    "profile": "capture.run.profile",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graphscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Graph",
    "GraphscopeError",
    "__version__",
    "clear_kernel_annotations",
    "get_kernel_annotations",
    "graph",
    "is_available",
    "make_graphed_callables",
    "mark_kernels",
    "mark_stream",
    "profile",
    "register_module_annotations",
    "remap_to_exec_graph",
    "save_kernel_annotations",
]
