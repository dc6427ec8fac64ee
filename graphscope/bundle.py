"""Read, write and validate bundles: a directory of versioned JSON files, written atomically.

Layout (every JSON file carries ``schema_version``)::

    manifest.json      versions, command line, model hash, files
    graph.json         graphs -> nodes (kernel, launch dims, annotation, op, shapes, source), edges
    annotations.json   {exec node id: [dict]}; annotations.pkl is the same map, PyTorch's pickle
    timeline.json      per-replay totals, a few replays as events
    durations.npy      per-node durations per replay (int64; column 0 is the exec node id)
    summary.json       module table and top kernels (what `graphscope report` prints)
    raw/<graph>.dot    the driver's verbose DOT (cudaGraphDebugDotPrint); graph names that are
                       not plain file names are sanitised (``CapturedGraph.dot_file``)
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any, Optional

from ._errors import BundleError
from .graphs.model import Bundle, CapturedGraph, Node, safe_file_stem

SCHEMA_VERSION = 1
DURATIONS_FILE = "durations.npy"
REQUIRED = ("manifest.json", "graph.json", "annotations.json")


def dumps(obj: Any, compact: bool = False) -> str:
    """Deterministic JSON: sorted keys, fixed separators. ``compact`` for the big files
    (graph, timeline, annotations): no indentation, which halves their size and parse time."""
    if compact:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str) + "\n"
    return json.dumps(obj, sort_keys=True, indent=1, separators=(",", ": "), default=str) + "\n"


def _versioned(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, **payload}


def write_bundle(
    path: str,
    *,
    manifest: Mapping[str, Any],
    graphs: list[CapturedGraph],
    timeline: Optional[Mapping[str, Any]] = None,
    summary: Optional[Mapping[str, Any]] = None,
    raw_dot: Optional[Mapping[str, str]] = None,
    force: bool = False,
) -> str:
    """Write a bundle atomically: into a temp dir beside ``path``, then rename into place.

    Raises BundleError if ``path`` exists and ``force`` is false.
    """
    path = os.path.abspath(path)
    if os.path.exists(path) and not force:
        raise BundleError(f"{path} already exists: pass --force to replace it or choose -o PATH")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".graphscope-", dir=parent)
    try:
        files = ["manifest.json", "graph.json", "annotations.json", "annotations.pkl"]
        bundle = Bundle(path, manifest, tuple(graphs), 0)
        amap = bundle.annotation_map()
        _write(tmp, "graph.json",
               dumps(_versioned({"graphs": [g.to_json() for g in graphs]}), compact=True))
        _write(
            tmp,
            "annotations.json",
            dumps(_versioned({"annotations": {str(k): v for k, v in sorted(amap.items())}}),
                  compact=True),
        )
        with open(os.path.join(tmp, "annotations.pkl"), "wb") as f:
            pickle.dump(dict(sorted(amap.items())), f, protocol=4)
        if timeline is not None:
            timeline = dict(timeline)
            durations = timeline.pop("durations_ns", None)
            if durations is not None:
                _write_durations(os.path.join(tmp, DURATIONS_FILE), durations)
                timeline["durations_file"] = DURATIONS_FILE
                files.append(DURATIONS_FILE)
            _write(tmp, "timeline.json", dumps(_versioned(timeline), compact=True))
            files.append("timeline.json")
        if summary is not None:
            _write(tmp, "summary.json", dumps(_versioned(summary)))
            files.append("summary.json")
        for name, text in sorted((raw_dot or {}).items()):
            os.makedirs(os.path.join(tmp, "raw"), exist_ok=True)
            rel = f"raw/{safe_file_stem(name)}.dot"
            _write(tmp, rel, text)
            files.append(rel)
        _write(tmp, "manifest.json", dumps(_versioned({**manifest, "files": sorted(files)})))
        if os.path.exists(path):
            old = tempfile.mkdtemp(prefix=".graphscope-old-", dir=parent)
            os.replace(path, os.path.join(old, "b"))
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _write_durations(path: str, durations: Mapping[Any, Any]) -> None:
    """Per-node durations as one int64 ``.npy`` (column 0: exec node id; then one column per
    replay): a million numbers load in milliseconds instead of a second of JSON."""
    import numpy as np

    items = sorted((int(k), list(v)) for k, v in durations.items())
    width = max((len(v) for _, v in items), default=0)
    arr = np.zeros((len(items), 1 + width), dtype=np.int64)
    for i, (k, v) in enumerate(items):
        arr[i, 0] = k
        arr[i, 1 : 1 + len(v)] = v
    with open(path, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def _read_durations(path: str) -> dict[int, tuple[int, ...]]:
    import numpy as np

    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path}: unreadable ({exc})") from None
    if arr.ndim != 2 or arr.dtype != np.int64:
        raise BundleError(f"{path}: expected an int64 matrix, got {arr.dtype} {arr.shape}")
    ids = arr[:, 0].tolist()
    rows = arr[:, 1:].tolist()
    return {k: tuple(r) for k, r in zip(ids, rows)}


def _write(root: str, rel: str, text: str) -> None:
    with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
        f.write(text)


try:  # 5-10x faster on big bundles; optional so that a bare environment still reads them
    import orjson

    _loads: Any = orjson.loads
    _DecodeError: Any = (orjson.JSONDecodeError, json.JSONDecodeError)
except ImportError:  # pragma: no cover - exercised where orjson is absent
    _loads = json.loads
    _DecodeError = json.JSONDecodeError


def _load_json(path: str, name: str) -> dict[str, Any]:
    p = os.path.join(path, name)
    try:
        with open(p, "rb") as f:
            data = _loads(f.read())
    except FileNotFoundError:
        raise BundleError(f"{path}: not a graphscope bundle ({name} is missing)") from None
    except _DecodeError as exc:
        raise BundleError(f"{p}: invalid JSON ({exc})") from None
    v = data.get("schema_version") if isinstance(data, dict) else None
    if v != SCHEMA_VERSION:
        raise BundleError(
            f"{p}: schema version {v}, but this graphscope reads version {SCHEMA_VERSION}; "
            "re-record the bundle with this graphscope or use the graphscope that wrote it"
        )
    return data


def read_bundle(path: str) -> Bundle:
    """Load and validate a bundle directory."""
    # Millions of small objects are created and none is garbage: without this, the cyclic
    # collector rescans them over and over (measured: 2.5x the read time at 100,000 nodes).
    # Afterwards they are frozen out of later collections too: a bundle lives as long as the
    # command that read it.
    was = gc.isenabled()
    gc.disable()
    try:
        return _read_bundle(path)
    finally:
        gc.freeze()
        if was:
            gc.enable()


def _read_bundle(path: str) -> Bundle:
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise BundleError(f"{path}: no such bundle directory")
    manifest = _load_json(path, "manifest.json")
    graph = _load_json(path, "graph.json")
    timeline: dict[str, Any] = {}
    if os.path.exists(os.path.join(path, "timeline.json")):
        timeline = _load_json(path, "timeline.json")
    if timeline.get("durations_file"):
        durations = _read_durations(os.path.join(path, str(timeline["durations_file"])))
    else:  # bundles from before durations.npy
        durations = {int(k): tuple(v) for k, v in timeline.get("durations_ns", {}).items()}
    graphs = []
    try:
        for g in graph["graphs"]:
            nodes = tuple(
                Node.from_json(g["name"], n, durations.get(int(n["exec_node_id"]), ()))
                for n in g["nodes"]
            )
            graphs.append(
                CapturedGraph(
                    name=g["name"],
                    template_graph_id=int(g["template_graph_id"]),
                    exec_id=int(g["exec_id"]),
                    nodes=nodes,
                    edges=tuple((int(a), int(b)) for a, b in g["edges"]),
                    info=dict(g.get("info") or {}),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{path}/graph.json: malformed ({type(exc).__name__}: {exc})") from None
    return Bundle(
        path=path,
        manifest=manifest,
        graphs=tuple(graphs),
        replays=int(timeline.get("replays", 0)),
        replay_kernel_ns=tuple(timeline.get("replay_kernel_ns", ())),
        replay_span_ns=tuple(timeline.get("replay_span_ns", ())),
        events=tuple(timeline.get("events", ())),
        unjoined_records=int(timeline.get("unjoined_records", 0)),
    )


def read_summary(path: str) -> Optional[dict[str, Any]]:
    """The bundle's precomputed summary.json (what `report` prints), or None if it has none."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise BundleError(f"{path}: no such bundle directory")
    _load_json(path, "manifest.json")  # validates that this is a bundle of our schema
    if not os.path.exists(os.path.join(path, "summary.json")):
        return None
    data = _load_json(path, "summary.json")
    data.pop("schema_version", None)
    return data


def raw_dot(bundle: Bundle, graph: str) -> str:
    rel = f"raw/{safe_file_stem(graph)}.dot"
    p = os.path.join(bundle.path, rel)
    if not os.path.isfile(p) or os.path.islink(p):
        raise BundleError(f"{bundle.path}: no raw DOT for graph {graph!r} ({rel})")
    with open(p, encoding="utf-8") as f:
        return f.read()
