"""The exec-id annotation map: template-graph annotations keyed by exec node id, rekeyed at
every instantiate (each one mints a new exec id)."""

from __future__ import annotations

import os
import pickle
import warnings
import weakref
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Optional, Union

from .. import native
from .scopes import SCOPES


class _AnnotationStore:
    """Template-graph annotations and their current exec-graph keys."""

    def __init__(self) -> None:
        self.by_template: dict[int, dict[int, Any]] = {}
        self.exec_of: dict[int, int] = {}  # template graph id -> exec id
        self.live: dict[int, list[dict[str, Any]]] = {}
        self.view: Mapping[int, list[dict[str, Any]]] = MappingProxyType(self.live)
        self.graph_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def add_template(self, gid: int, local: dict[int, Any]) -> None:
        self.by_template[gid] = local

    def rekey(self, gid: int, exec_id: int, pairs: Optional[Mapping[int, int]] = None) -> int:
        """Key graph ``gid``'s annotations by ``exec_id`` (dropping the previous exec's keys).

        ``pairs`` is ``{exec node id: template local id}`` where CUPTI reported the instantiate's
        clones (:func:`clone_pairs`); without it exec node ``exec_id << 32 | lid`` is template
        node ``lid``."""
        old = self.exec_of.get(gid)
        if old is not None:
            for k in [k for k in self.live if k >> 32 == old]:
                del self.live[k]
        self.exec_of[gid] = exec_id
        local = self.by_template.get(gid, {})
        if pairs is None:
            pairs = {(exec_id << 32) | lid: lid for lid in local}
        new = {node: [local[lid].copy()] for node, lid in pairs.items()
               if lid in local and local[lid]}  # .copy(): each node its own plain dict
        self.live.update(new)
        return len(new)


def clone_pairs(clone_id: Any, clone_origin: Any, exec_id: int, gid: int) -> dict[int, int]:
    """{exec node id: template local id} of the clones of graph ``gid`` into exec ``exec_id``
    (columns of the recorder's GRAPHNODE_CLONED rows)."""
    import numpy as np

    cid = np.asarray(clone_id, dtype=np.uint64)
    corg = np.asarray(clone_origin, dtype=np.uint64)
    m = ((cid >> 32) == exec_id) & ((corg >> 32) == gid)
    return dict(zip(cid[m].tolist(), (corg[m] & 0xFFFFFFFF).tolist()))


STORE = _AnnotationStore()


def template_annotations(
    rec: native.CreatedNodes, exec_ids: set[int]
) -> dict[int, dict[int, Any]]:
    """Per template graph id: {local id: merged annotation} of annotated nodes (MK2, MK14)."""
    import numpy as np

    gid = rec.graph_id
    sid = rec.scope
    template = ~np.isin(gid, np.fromiter(exec_ids, dtype=gid.dtype, count=len(exec_ids)))
    out: dict[int, dict[int, Any]] = {
        g: {} for g in np.unique(gid[template]).tolist()}
    scoped = template & (sid >= 0)
    body_tagged = int((scoped & np.isin(rec.node_type, list(native.BODY_TYPES))).sum())
    work = scoped & np.isin(rec.node_type, list(native.ANNOTATED_TYPES))
    anns: dict[int, Any] = {}
    for g, lid, s in zip(gid[work].tolist(), (rec.node_id[work] & 0xFFFFFFFF).tolist(),
                         sid[work].tolist()):
        ann = anns.get(s)
        if ann is None:
            ann = anns[s] = SCOPES.annotation(s)
        if ann:
            out[g][lid] = ann  # rekey gives each exec node its own copy
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
    exec_ids = set(rec.exec_id.tolist())
    per_graph = template_annotations(rec, exec_ids)
    for gid, local in per_graph.items():
        STORE.add_template(gid, local)
    for eid, gid in zip(rec.exec_id.tolist(), rec.exec_graph.tolist()):
        if gid in per_graph:  # exec node ids are the clones CUPTI reported, where it did
            STORE.rekey(gid, eid, clone_pairs(rec.clone_id, rec.clone_origin, eid, gid)
                        if len(rec.clone_id) else None)
    gids = sorted(per_graph)
    if cuda_graph is not None and len(gids) >= 1:
        STORE.graph_ids[cuda_graph] = gids[0]
    return gids


def get_kernel_annotations() -> Mapping[int, list[dict[str, Any]]]:
    """Live read-only ``{exec node id: [annotation dict]}``; ``dict(...)`` it to pickle."""
    return STORE.view


def save_kernel_annotations(path: Union[str, os.PathLike]) -> str:
    """Pickle ``dict(get_kernel_annotations())`` atomically, in PyTorch's format."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        pickle.dump(dict(STORE.live), f, protocol=4)
    os.replace(tmp, path)
    return path


def remap_to_exec_graph(cuda_graph: Any) -> int:
    """Rekey ``cuda_graph``'s annotations to its current exec graph (each instantiate mints a
    new exec id). Returns the number of exec node ids keyed."""
    gid = STORE.graph_ids.get(cuda_graph)
    if gid is None:
        try:
            gid = native.graph_id(cuda_graph.raw_cuda_graph())
        except Exception:
            return 0
    eid = native.exec_id(cuda_graph.raw_cuda_graph_exec())
    return STORE.rekey(gid, eid)


def clear_kernel_annotations() -> None:
    """Forget every recorded annotation."""
    STORE.by_template.clear()
    STORE.exec_of.clear()
    STORE.live.clear()
