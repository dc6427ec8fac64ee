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

from ._errors import GraphscopeError
from ._version import __version__
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
from .cuda_graphs import Graph, graph, make_graphed_callables
from .profile import profile

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
