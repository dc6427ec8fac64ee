"""The exec-id annotation map: template-graph annotations keyed by exec node id, rekeyed at
every instantiate (each one mints a new exec id). What a finished capture publishes into it,
and the public functions that read it, are in :mod:`.publish`."""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union

from .. import native


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

    def clear(self) -> None:
        """Forget every annotation."""
        self.by_template.clear()
        self.exec_of.clear()
        self.keyed.clear()
        self.live.clear()
        self.own.clear()

    def snapshot(self) -> dict[int, list[dict[str, Any]]]:
        """``{exec node id: [dict]}`` as PyTorch pickles it: the nodes read so far as they are
        now, the rest copied for the snapshot only."""
        own = self.own
        return {k: own.get(k) or [dict(d)] for k, d in self.live.items()}


def _annotate_live(live: dict[int, Any], nodes: Any, index: Any, anns: list[dict[str, Any]]
                   ) -> int:
    """live[nodes[i]] = anns[index[i]] (natively where the extension is built)."""
    import numpy as np

    nodes = np.ascontiguousarray(nodes, dtype=np.uint64)
    index = np.ascontiguousarray(index, dtype=np.int32)
    ext = native.maybe_extension()
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
