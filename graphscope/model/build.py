"""Raw capture records -> the Graph model. No torch, no extension: CPU tests reach it.

Inputs are columns: the template graph's inspection (creation order, launch dims, names,
edges) and the recorder's GRAPHNODE_CREATED rows (node id -> scope id, op id). Scope and op ids
are resolved through the callables the caller passes (the annotate tables in a live capture).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Optional

from .graph import WORK_KINDS, CapturedGraph, Node, NodeKind


def build_graph(
    name: str,
    inspection: Any,
    records: Any,
    exec_id: int,
    annotation_of: Callable[[int], Mapping[str, Any]],
    op_of: Callable[[int], Optional[Any]],
    info: Optional[Mapping[str, Any]] = None,
    place: Optional[Callable[[Node], Optional[Mapping[str, Any]]]] = None,
) -> CapturedGraph:
    """One captured graph from its inspection and the recorder's rows.

    Args:
        inspection: ``native.GraphInspection`` (or anything with its columns).
        records: ``native.CreatedNodes`` of the window the graph was captured in.
        exec_id: the exec graph's id; ``exec_node_id = exec_id << 32 | local id``.
        annotation_of: scope id -> merged annotation (``{}`` for -1).
        op_of: op id -> an object with ``op``, ``shapes``, ``source`` (None for -1).
        info: graph-level metadata (capture site, replays, pool memory, ...).
        place: for work nodes no scope tagged, a second chance (e.g. inductor provenance):
            returns the annotation to give the node, or None.
    """
    by_id = {
        int(n): (int(s), int(o))
        for n, s, o in zip(records.node_id.tolist(), records.scope.tolist(),
                           records.op.tolist())
    }
    nodes = []
    types = inspection.node_type.tolist()
    names_idx = inspection.name_idx.tolist()
    for i, nid in enumerate(inspection.node_id.tolist()):
        ntype = NodeKind.name_of(int(types[i]))
        sid, oid = by_id.get(nid, (-1, -1))
        work = ntype in WORK_KINDS
        annotation = dict(annotation_of(sid)) if work and sid >= 0 else {}
        node = _node(name, inspection, i, nid, exec_id, ntype, int(names_idx[i]), annotation,
                     op_of(oid) if oid >= 0 else None)
        if work and place is not None and "module_name" not in annotation:
            extra = place(node)
            if extra:
                node.annotation = {**annotation, **extra}
        nodes.append(node)
    nodes.sort(key=lambda n: n.local_id)
    edges = tuple(
        sorted(
            (int(a) & 0xFFFFFFFF, int(b) & 0xFFFFFFFF)
            for a, b in zip(inspection.edge_from.tolist(), inspection.edge_to.tolist())
        )
    )
    return CapturedGraph(name, int(inspection.graph_id), exec_id, tuple(nodes), edges,
                         dict(info or {}))


def _node(graph: str, inspection: Any, i: int, nid: int, exec_id: int, ntype: str,
          k: int, annotation: dict[str, Any], op: Optional[Any]) -> Node:
    """Row ``i`` of the inspection (node id ``nid``, name index ``k``) as a :class:`Node`."""
    work = ntype in WORK_KINDS
    local = nid & 0xFFFFFFFF
    return Node(
        graph=graph,
        local_id=local,
        exec_node_id=(exec_id << 32) | local,
        type=ntype,
        kernel=inspection.names[k] if k >= 0 else None,
        demangled=inspection.demangled[k] if k >= 0 else None,
        grid=tuple(int(v) for v in inspection.grid[i]),  # type: ignore[arg-type]
        block=tuple(int(v) for v in inspection.block[i]),  # type: ignore[arg-type]
        smem=int(inspection.smem[i]),
        registers=_registers(inspection, i),
        bytes=int(inspection.bytes[i]),
        annotation=annotation,
        # AccumulateGrad adding into an existing .grad: the op is the accumulation itself
        op="accumulate_grad" if annotation.get("accumulate_grad") else (op.op if op else None),
        shapes=op.shapes if op else None,
        source=op.source if op else None,
        reads=getattr(op, "reads", None) if work else None,
        writes=getattr(op, "writes", None) if work else None,
    )


def _registers(inspection: Any, i: int) -> Optional[int]:
    """Node ``i``'s registers per thread, where the inspection has them (a kernel whose
    function the driver described)."""
    regs = getattr(inspection, "registers", None)
    if regs is None or i >= len(regs) or int(regs[i]) < 0:
        return None
    return int(regs[i])
