"""Step 1: the annotations in — a bundle, graphscope's annotations.json or PyTorch's pickle —
and the table the rules and the splice read them from."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .model import MAX_STREAM, UNCHANGED, TraceError

_MAX_PICKLE = 1 << 30


class _SafeUnpickler(pickle.Unpickler):
    """Admits plain containers and scalars only: a pickle naming any class or function is
    refused, so loading an annotation pickle cannot run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise TraceError(f"annotation pickle refers to {module}.{name}: only plain dicts, "
                         "lists, strings and numbers are accepted")


class _OverBudget(Exception):
    pass


class _TooDeep(Exception):
    pass


_MAX_DEPTH = 64  # nesting of one annotation value; real ones are 1 or 2 deep
_CONTAINERS = (list, tuple, dict, set, frozenset)
_JSON_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*")  # a UTF-8 BOM, JSON whitespace


def load_annotations(path: str) -> tuple[dict[int, dict[str, Any]], Any]:
    """Annotation map from a bundle dir, graphscope's annotations.json, or a PyTorch pickle.

    Returns ``({exec node id: merged dict}, bundle or None)``. Keys are exec node ids
    (0..2^64-1); an annotated ``stream`` that is an integer must be a stream id
    (0..2^53-1): anything else is one :class:`TraceError` naming the file.
    """
    if os.path.isdir(path):
        from ..model.bundle_io import read_bundle

        b = read_bundle(path)
        amap = {n.exec_node_id: dict(n.annotation) for n in b.work_nodes() if n.annotation}
        _check_streams(amap, path)
        return amap, b
    raw = _read(path)
    amap = _normalised(_parse(raw, path), len(raw), path)
    _check_streams(amap, path)
    return amap, None


def _read(path: str) -> bytes:
    try:
        if os.path.getsize(path) > _MAX_PICKLE:
            raise TraceError(f"{path}: larger than {_MAX_PICKLE >> 30} GiB: not an annotation "
                             "file")
        with open(path, "rb") as f:
            # Read first, unpickle from memory: a length field in the pickle can then never
            # make the reader allocate more than the file holds.
            return f.read(_MAX_PICKLE)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such annotation file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _parse(raw: bytes, path: str) -> Any:
    """JSON when the first byte after a UTF-8 BOM and whitespace opens an object or array
    (no pickle starts so), else a pickle through the restricted unpickler."""
    m = _JSON_START.match(raw)
    first = raw[m.end():m.end() + 1] if m else raw[:1]
    try:
        if first in (b"{", b"["):
            data = json.loads(raw)  # bytes: json takes the BOM (utf-8-sig) itself
            if isinstance(data, dict) and "annotations" in data:
                data = data["annotations"]
            return data
        return _SafeUnpickler(io.BytesIO(raw)).load()
    except TraceError as exc:
        raise TraceError(f"{path}: {exc}") from None
    except RecursionError:
        raise TraceError(f"{path}: nested too deeply to be annotations") from None
    except MemoryError:
        raise TraceError(f"{path}: too large to load as annotations") from None
    except Exception as exc:
        # Any opcode sequence makes a pickle: the C unpickler then raises whatever the
        # operation it was told to do raises (an unhashable key: TypeError; APPEND onto a
        # dict: AttributeError; SETITEM on a list: IndexError). None of it is a bug here.
        raise TraceError(f"{path}: not an annotation pickle or JSON ({type(exc).__name__}: "
                         f"{exc})") from None


def _normalised(data: Any, size: int, path: str) -> dict[int, dict[str, Any]]:
    """{exec node id: merged annotation dict} of the loaded ``data``."""
    if not isinstance(data, dict):
        raise TraceError(f"{path}: expected {{exec node id: [annotation dict]}}, "
                         f"got {type(data).__name__}")
    # Shared references (pickle memo) can make a small file a huge tree: walk a bounded
    # number of items, linear in the file's size.
    budget = [64 * size + 4096]
    out: dict[int, dict[str, Any]] = {}
    try:
        for k, v in data.items():
            key = int(k)
            if not 0 <= key < 1 << 64:
                raise TraceError(f"{path}: annotation key {key} is out of range: an exec node "
                                 "id is 0..2^64-1")
            out[key] = _normalise(v, budget)
    except (TypeError, ValueError, OverflowError) as exc:
        first = next(iter(data), None)
        if isinstance(first, str) and not first.strip().lstrip("-").isdigit():
            # a bundle's graph.json or manifest.json, a trace: named by what it is not
            raise TraceError(f"{path}: not an annotation file (its first key is {first!r}, "
                             "not an exec node id): pass a bundle directory, its "
                             "annotations.json or annotations.pkl") from None
        raise TraceError(f"{path}: keys must be exec node ids ({exc})") from None
    except _OverBudget:
        raise TraceError(f"{path}: expands to far more annotations than its size allows "
                         "(shared references): not an annotation file graphscope reads"
                         ) from None
    except _TooDeep:
        raise TraceError(f"{path}: an annotation nested more than {_MAX_DEPTH} levels deep: "
                         "not an annotation file graphscope reads") from None
    return out


def _normalise(entries: Any, budget: list[int]) -> dict[str, Any]:
    """One node's annotation list (PyTorch shape, legacy shapes too) -> merged dict."""
    items = entries if isinstance(entries, (list, tuple)) else [entries]
    merged: dict[str, Any] = {}
    for ann in items:
        if isinstance(ann, Mapping):
            budget[0] -= len(ann) + 1
            if budget[0] < 0:
                raise _OverBudget
            for k, v in ann.items():
                if isinstance(v, _CONTAINERS):
                    v = _bounded(v, budget)
                merged["name" if k == "str" else str(k)] = v
        else:
            merged["name"] = _bounded(ann, budget) if isinstance(ann, _CONTAINERS) else ann
    return merged


def _bounded(v: Any, budget: list[int], depth: int = 0) -> Any:
    """``v`` if walking it stays within the budget and nesting limit (nested values are
    stringified later, and ``str()`` of a 200,000-deep list ends in RecursionError)."""
    if depth > _MAX_DEPTH:
        raise _TooDeep
    items = v.values() if isinstance(v, dict) else v
    budget[0] -= len(items) + 1
    if budget[0] < 0:
        raise _OverBudget
    for x in items:
        if isinstance(x, _CONTAINERS):
            _bounded(x, budget, depth + 1)
    return v


def _check_streams(amap: dict[int, dict[str, Any]], path: str) -> None:
    """An annotated ``stream`` becomes an event's lane: one that reads as an integer must be
    a stream id (not-integer values are left alone, as before: the event keeps its lane)."""
    for key, ann in amap.items():
        v = ann.get("stream")
        if v is None:
            continue
        try:
            s = int(v)
        except (TypeError, ValueError):
            continue
        except OverflowError:  # inf
            s = -1
        if not 0 <= s <= MAX_STREAM:
            raise TraceError(f"{path}: annotation of {key}: stream {v!r} is out of range: a "
                             f"stream id is 0..{MAX_STREAM}")


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
