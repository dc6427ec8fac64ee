"""What a finished capture publishes: its template graphs' annotated nodes, keyed by exec node
id in the process's annotation store (:class:`~.store.AnnotationStore`, ``TABLES.store``), and
the public functions that read, save, rekey and clear it."""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Mapping
from typing import Any, Union

from .. import native
from .scopes import ScopeTable
from .store import Template, clone_pairs
from .tables import TABLES


def template_annotations(rec: native.CreatedNodes, exec_ids: set[int], scopes: ScopeTable
                         ) -> dict[int, Template]:
    """Per template graph id, its annotated nodes (MK2, MK14)."""
    import numpy as np

    gid = rec.graph_id
    sid = rec.scope
    template = ~np.isin(gid, np.fromiter(exec_ids, dtype=gid.dtype, count=len(exec_ids)))
    scoped = template & (sid >= 0)
    body_tagged = int((scoped & np.isin(rec.node_type, list(native.BODY_TYPES))).sum())
    work = scoped & np.isin(rec.node_type, list(native.ANNOTATED_TYPES))
    # one plain dict per scope with a non-empty annotation (the scope's own: shared, read-only)
    uniq, inv = np.unique(sid[work], return_inverse=True)
    dicts = [scopes.plain(s) for s in uniq.tolist()]
    keep = np.fromiter(map(bool, dicts), dtype=bool, count=len(dicts))
    renum = np.cumsum(keep, dtype=np.int32) - 1  # index among the kept dicts
    anns = [d for d in dicts if d]
    tagged = keep[inv]
    wg = gid[work][tagged]
    wl = rec.node_id[work][tagged] & np.uint64(0xFFFFFFFF)
    wi = renum[inv[tagged]].astype(np.int32)
    out: dict[int, Template] = {}
    for g in np.unique(gid[template]).tolist():
        m = wg == g
        out[g] = Template(wl[m], wi[m], anns)
    if body_tagged:
        warnings.warn(
            f"graphscope: {body_tagged} child-graph/conditional node(s) were captured inside "
            "annotated scopes; work in their bodies is tagged only where CUPTI's clone "
            "callbacks map it to exec nodes (MK14)",
            stacklevel=3,
        )
    return out


def publish(rec: native.CreatedNodes, cuda_graph: Any = None) -> list[int]:
    """Store a finished capture's annotations; rekey instantiated graphs. Returns template ids."""
    store = TABLES.store
    exec_ids = set(rec.exec_id.tolist())
    per_graph = template_annotations(rec, exec_ids, TABLES.scopes)
    for gid, local in per_graph.items():
        store.add_template(gid, local)
    for eid, gid in zip(rec.exec_id.tolist(), rec.exec_graph.tolist()):
        if gid in per_graph:  # exec node ids are the clones CUPTI reported, where it did
            store.rekey(gid, eid, clone_pairs(rec.clone_id, rec.clone_origin, eid, gid)
                        if len(rec.clone_id) else None)
    gids = sorted(per_graph)
    if cuda_graph is not None and len(gids) >= 1:
        store.graph_ids[cuda_graph] = gids[0]
    return gids


def get_kernel_annotations() -> Mapping[int, list[dict[str, Any]]]:
    """Live read-only ``{exec node id: [annotation dict]}``; ``dict(...)`` it to pickle.

    Each node's list and dict are its own (made when the node is first read)."""
    return TABLES.store.view


def save_kernel_annotations(path: Union[str, os.PathLike]) -> str:
    """Pickle ``dict(get_kernel_annotations())`` atomically, in PyTorch's format."""
    path = os.fspath(path)
    if os.path.isdir(path):  # (the temp file beside it would be named in the error)
        raise IsADirectoryError(f"{path}: is a directory; give a file name for the annotations")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        pickle.dump(TABLES.store.snapshot(), f, protocol=4)
    os.replace(tmp, path)
    return path


def remap_to_exec_graph(cuda_graph: Any) -> int:
    """Rekey ``cuda_graph``'s annotations to its current exec graph (each instantiate mints a
    new exec id). Returns the number of exec node ids keyed."""
    if not callable(getattr(cuda_graph, "raw_cuda_graph_exec", None)):
        raise TypeError(f"remap_to_exec_graph takes a torch.cuda.CUDAGraph, not "
                        f"{type(cuda_graph).__name__}")
    store = TABLES.store
    gid = store.graph_ids.get(cuda_graph)
    if gid is None:
        try:
            gid = native.graph_id(cuda_graph.raw_cuda_graph())
        except Exception:
            return 0
    eid = native.exec_id(cuda_graph.raw_cuda_graph_exec())
    return store.rekey(gid, eid)


def clear_kernel_annotations() -> None:
    """Forget every recorded annotation."""
    TABLES.store.clear()
