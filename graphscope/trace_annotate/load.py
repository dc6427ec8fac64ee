"""Step 1: the annotations in — a bundle, graphscope's annotations.json or PyTorch's pickle —
and the table the rules and the splice read them from."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .model import UNCHANGED, TraceError

_MAX_PICKLE = 1 << 30


class _SafeUnpickler(pickle.Unpickler):
    """Admits plain containers and scalars only: a pickle naming any class or function is
    refused, so loading an annotation pickle cannot run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise TraceError(f"annotation pickle refers to {module}.{name}: only plain dicts, "
                         "lists, strings and numbers are accepted")


class _OverBudget(Exception):
    pass


def _normalise(entries: Any, budget: Optional[list[int]] = None) -> dict[str, Any]:
    """One node's annotation list (PyTorch shape, legacy shapes too) -> merged dict."""
    items = entries if isinstance(entries, (list, tuple)) else [entries]
    merged: dict[str, Any] = {}
    for ann in items:
        if isinstance(ann, Mapping):
            if budget is not None:
                budget[0] -= len(ann) + 1
                if budget[0] < 0:
                    raise _OverBudget
            for k, v in ann.items():
                if isinstance(v, (list, tuple, dict)) and budget is not None:
                    v = _bounded(v, budget)
                merged["name" if k == "str" else str(k)] = v
        else:
            merged["name"] = ann
    return merged


def _bounded(v: Any, budget: list[int], depth: int = 0) -> Any:
    """``v`` if walking it stays within the budget (nested values are stringified later)."""
    if depth > 64:
        raise _OverBudget
    items = v.values() if isinstance(v, dict) else v
    budget[0] -= len(items) + 1
    if budget[0] < 0:
        raise _OverBudget
    for x in items:
        if isinstance(x, (list, tuple, dict)):
            _bounded(x, budget, depth + 1)
    return v


def load_annotations(path: str) -> tuple[dict[int, dict[str, Any]], Any]:
    """Annotation map from a bundle dir, graphscope's annotations.json, or a PyTorch pickle.

    Returns ``({exec node id: merged dict}, bundle or None)``.
    """
    if os.path.isdir(path):
        from ..bundle import read_bundle

        b = read_bundle(path)
        amap = {n.exec_node_id: dict(n.annotation) for n in b.work_nodes() if n.annotation}
        return amap, b
    import io

    try:
        if os.path.getsize(path) > _MAX_PICKLE:
            raise TraceError(f"{path}: larger than {_MAX_PICKLE >> 30} GiB: not an annotation "
                             "file")
        with open(path, "rb") as f:
            # Read first, unpickle from memory: a length field in the pickle can then never
            # make the reader allocate more than the file holds.
            raw = f.read(_MAX_PICKLE)
        if raw[:1] in (b"{", b"[", b" ", b"\n"):
            data = json.loads(raw)
            if isinstance(data, dict) and "annotations" in data:
                data = data["annotations"]
        else:
            data = _SafeUnpickler(io.BytesIO(raw)).load()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such annotation file") from None
    except (pickle.UnpicklingError, EOFError, ValueError, RecursionError, MemoryError,
            OverflowError) as exc:
        raise TraceError(f"{path}: not an annotation pickle or JSON ({exc})") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}: expected {{exec node id: [annotation dict]}}, "
                         f"got {type(data).__name__}")
    # Shared references (pickle memo) can make a small file a huge tree: walk a bounded
    # number of items, linear in the file's size.
    budget = [64 * len(raw) + 4096]
    try:
        return {int(k): _normalise(v, budget) for k, v in data.items()}, None
    except (TypeError, ValueError, OverflowError) as exc:
        raise TraceError(f"{path}: keys must be exec node ids ({exc})") from None
    except _OverBudget:
        raise TraceError(f"{path}: expands to far more annotations than its size allows "
                         "(shared references): not an annotation file graphscope reads"
                         ) from None


@dataclass
class AnnotationTable:
    """The annotations as columns, sorted by exec node id: what the join looks up."""

    keys: np.ndarray  # uint64 exec node ids, ascending
    streams: np.ndarray  # int64 annotated stream per key, UNCHANGED where none
    fragments: list[str]  # per key, the JSON members spliced into an event's args
    modules: list[Any]  # per key, its module_name (None where none)

    @classmethod
    def build(cls, amap: dict[int, dict[str, Any]], bundle: Any) -> AnnotationTable:
        """The table of ``amap``; a bundle adds each node's op, shapes and source."""
        nodes = {n.exec_node_id: n for n in bundle.work_nodes()} if bundle is not None else {}
        keys = np.array(sorted(amap), dtype=np.uint64)
        streams = np.array([int(amap[int(k)]["stream"]) if _is_int(amap[int(k)].get("stream"))
                            else UNCHANGED for k in keys.tolist()], dtype=np.int64)
        fragments = [fragment(amap[k], _extras(nodes.get(k))) for k in keys.tolist()]
        modules = [amap[k].get("module_name") for k in keys.tolist()]
        return cls(keys, streams, fragments, modules)


def fragment(ann: Mapping[str, Any], extra: Optional[Mapping[str, Any]] = None) -> str:
    parts = [f"{json.dumps(str(k))}: {json.dumps(str(v))}" for k, v in ann.items()
             if k != "stream"]
    for k, v in (extra or {}).items():
        if v and k not in ann:
            parts.append(f"{json.dumps(k)}: {json.dumps(v, default=str, allow_nan=False)}")
    return ", ".join(parts)


def _extras(node: Any) -> Optional[dict[str, Any]]:
    if node is None:
        return None
    return {"op": node.op, "shapes": node.shapes, "source": node.source}


def _is_int(v: Any) -> bool:
    try:
        int(v)
        return v is not None
    except (TypeError, ValueError):
        return False
