"""The driver and CUPTI functions the probes time through ctypes (graphscope's extension makes
the same calls from C): libcuda's and torch's own libcupti's, with their argument types."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

from graphscope import native


def driver_calls() -> SimpleNamespace:
    """``cu`` (libcuda), ``capture_info`` (cuStreamGetCaptureInfo_v3), ``graph_nodes``
    (cuGraphGetNodes) and ``node_id`` (cuptiGetGraphNodeId), libcupti being the copy graphscope
    loaded."""
    native.ensure_loaded()
    cu = ctypes.CDLL("libcuda.so.1")
    cupti = ctypes.CDLL(native.loaded_cupti_paths()[0])
    graph_nodes = cu.cuGraphGetNodes
    graph_nodes.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    node_id = cupti.cuptiGetGraphNodeId
    node_id.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    return SimpleNamespace(cu=cu, capture_info=cu.cuStreamGetCaptureInfo_v3,
                           graph_nodes=graph_nodes, node_id=node_id)
