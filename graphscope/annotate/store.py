"""The exec-id annotation map: template-graph annotations keyed by exec node id, rekeyed at
every instantiate (each one mints a new exec id)."""

from __future__ import annotations

import os
import pickle
import warnings
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union

from .. import native
from . import state


@dataclass
class Template:
    """One template graph's annotated nodes: local id ``lids[i]`` has ``anns[index[i]]``."""

    lids: Any  # np.ndarray[uint64]
    index: Any  # np.ndarray[int32]
    anns: list[dict[str, Any]]  # one plain, non-empty dict per scope (shared: never mutated)

    @classmethod
    def from_mapping(cls, local: Mapping[int, Mapping[str, Any]]) -> Template:
        import numpy as np

        items = [(lid, dict(a)) for lid, a in local.items() if a]
        return cls(np.array([lid for lid, _ in items], dtype=np.uint64),
                   np.arange(len(items), dtype=np.int32), [a for _, a in items])

    def __len__(self) -> int:
        return len(self.lids)


class LiveAnnotations(Mapping[int, list[dict[str, Any]]]):
    """The live, read-only ``{exec node id: [annotation dict]}`` map.

    Publishing keys every exec node with its scope's dict, shared by the scope's nodes; a node's
    own ``[dict]`` (PyTorch's format: a list and dict per node, so changing one node's changes no
    other's) is made when it is first read, and then kept. A capture whose map is never read
    pays no per-node copies (thousands of dicts of up to a few dozen keys, at every capture).
    """

    __slots__ = ("_shared", "_own")

    def __init__(self, shared: dict[int, dict[str, Any]],
                 own: dict[int, list[dict[str, Any]]]) -> None:
        self._shared = shared
        self._own = own

    def __getitem__(self, key: int) -> list[dict[str, Any]]:
        v = self._own.get(key)
        if v is None:
            v = [dict(self._shared[key])]
            self._own[key] = v
        return v

    def __iter__(self) -> Iterator[int]:
        return iter(self._shared)

    def __len__(self) -> int:
        return len(self._shared)

    def __contains__(self, key: object) -> bool:
        return key in self._shared

    def __repr__(self) -> str:
        return f"LiveAnnotations({len(self._shared)} exec nodes)"


class AnnotationStore:
    """Template-graph annotations and their current exec-graph keys."""

    def __init__(self) -> None:
        self.by_template: dict[int, Template] = {}
        self.exec_of: dict[int, int] = {}  # template graph id -> exec id
        self.keyed: dict[int, list[int]] = {}  # template graph id -> its exec node keys in live
        self.live: dict[int, dict[str, Any]] = {}  # exec node id -> its scope's shared dict
        self.own: dict[int, list[dict[str, Any]]] = {}  # the nodes read so far: their [dict]
        self.view: Mapping[int, list[dict[str, Any]]] = LiveAnnotations(self.live, self.own)
        self.graph_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def add_template(self, gid: int, local: Union[Template, Mapping[int, Any]]) -> None:
        """Graph ``gid``'s annotated nodes (a :class:`Template` or ``{local id: dict}``)."""
        self.by_template[gid] = local if isinstance(local, Template) else (
            Template.from_mapping(local))

    def rekey(self, gid: int, exec_id: int, pairs: Any = None) -> int:
        """Key graph ``gid``'s annotations by ``exec_id`` (dropping the previous exec's keys).

        ``pairs`` is ``(exec node ids, template local ids)`` (arrays, :func:`clone_pairs`)
        where CUPTI reported the instantiate's clones;
        without it exec node ``exec_id << 32 | lid`` is template node ``lid``. Each exec node
        gets its own copy of its dict when it is first read (:class:`LiveAnnotations`)."""
        import numpy as np

        pop, pop_own = self.live.pop, self.own.pop
        for k in self.keyed.pop(gid, ()):  # the previous exec's keys
            pop(k, None)
            pop_own(k, None)
        self.exec_of[gid] = exec_id
        t = self.by_template.get(gid)
        if t is None or not len(t):
            return 0
        if pairs is None:
            nodes, index = t.lids | np.uint64(exec_id << 32), t.index
        else:
            cid, lid = (np.asarray(p, dtype=np.uint64) for p in pairs)
            top = int(t.lids.max())
            lut = np.full(top + 1, -1, dtype=np.int32)
            lut[t.lids.astype(np.int64)] = t.index
            at = np.full(len(lid), -1, dtype=np.int32)
            inside = lid <= top
            at[inside] = lut[lid[inside].astype(np.int64)]
            keep = at >= 0
            nodes, index = cid[keep], at[keep]
        keys = nodes.tolist()
        self.keyed[gid] = keys
        if self.own:  # a node read before and keyed again gets its new dict
            for k in keys:
                pop_own(k, None)
        return _annotate_live(self.live, nodes, index, t.anns)


def _annotate_live(live: dict[int, Any], nodes: Any, index: Any, anns: list[dict[str, Any]]
                   ) -> int:
    """live[nodes[i]] = anns[index[i]] (natively where the extension is built)."""
    import numpy as np

    nodes = np.ascontiguousarray(nodes, dtype=np.uint64)
    index = np.ascontiguousarray(index, dtype=np.int32)
    ext = native._ext
    if ext is not None and hasattr(ext, "annotate_live"):
        return int(ext.annotate_live(live, nodes.tobytes(), index.tobytes(), anns))
    live.update(zip(nodes.tolist(), (anns[i] for i in index.tolist())))
    return len(nodes)


def clone_pairs(clone_id: Any, clone_origin: Any, exec_id: int, gid: int) -> tuple[Any, Any]:
    """(exec node ids, template local ids) of the clones of graph ``gid`` into exec
    ``exec_id`` (columns of the recorder's GRAPHNODE_CLONED rows), as uint64 arrays."""
    import numpy as np

    cid = np.asarray(clone_id, dtype=np.uint64)
    corg = np.asarray(clone_origin, dtype=np.uint64)
    m = ((cid >> np.uint64(32)) == exec_id) & ((corg >> np.uint64(32)) == gid)
    return cid[m], corg[m] & np.uint64(0xFFFFFFFF)



def template_annotations(rec: native.CreatedNodes, exec_ids: set[int]) -> dict[int, Template]:
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
    scopes = state.ATTRIBUTION.scopes
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
    store = state.ATTRIBUTION.store
    exec_ids = set(rec.exec_id.tolist())
    per_graph = template_annotations(rec, exec_ids)
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
    return state.ATTRIBUTION.store.view


def save_kernel_annotations(path: Union[str, os.PathLike]) -> str:
    """Pickle ``dict(get_kernel_annotations())`` atomically, in PyTorch's format."""
    path = os.fspath(path)
    if os.path.isdir(path):  # (the temp file beside it would be named in the error)
        raise IsADirectoryError(f"{path}: is a directory; give a file name for the annotations")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        store = state.ATTRIBUTION.store
        own = store.own  # nodes read so far as they are now; the rest copied for the file only
        pickle.dump({k: own.get(k) or [dict(d)] for k, d in store.live.items()}, f, protocol=4)
    os.replace(tmp, path)
    return path


def remap_to_exec_graph(cuda_graph: Any) -> int:
    """Rekey ``cuda_graph``'s annotations to its current exec graph (each instantiate mints a
    new exec id). Returns the number of exec node ids keyed."""
    if not callable(getattr(cuda_graph, "raw_cuda_graph_exec", None)):
        raise TypeError(f"remap_to_exec_graph takes a torch.cuda.CUDAGraph, not "
                        f"{type(cuda_graph).__name__}")
    store = state.ATTRIBUTION.store
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
    store = state.ATTRIBUTION.store
    store.by_template.clear()
    store.exec_of.clear()
    store.keyed.clear()
    store.live.clear()
    store.own.clear()
