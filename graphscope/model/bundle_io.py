"""Read, write and validate bundles: a directory of versioned JSON files, written atomically
(what each file must hold is checked by :mod:`graphscope.model.bundle_check`).

Layout (every JSON file carries ``schema_version``)::

    manifest.json      versions, command line, model hash, files
    graph.json         graphs -> nodes (kernel, launch dims, annotation, op, shapes, source), edges
    annotations.json   "annotations": {exec node id: [dict]}; annotations.pkl is that map bare,
                       PyTorch's pickle
    timeline.json      per-replay totals, a few replays as events
    durations.npy      per-node durations per replay (int64; column 0 is the exec node id)
    summary.json       module table and top kernels (what `graphscope report` prints)
    diagnosis.json     the diagnosis `graphscope report` prints by default (model/bundle_files.py)
    counters.json      optional: hardware counters per node (``capture --counters``)
    raw/<graph>.dot    the driver's verbose DOT (cudaGraphDebugDotPrint); graph names that are
                       not plain file names are sanitised (``CapturedGraph.dot_file``); under
                       ``graphscope run`` only a capture site's first graph and the graphs the
                       program kept (``keep_graph=True``) have one
"""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any, Optional

from .._errors import BundleError
from .bundle import Bundle
from .bundle_check import (
    MAX_DURATION_NS,
    _check_events,
    _check_info,
    _check_manifest,
    _check_node,
    _expect,
    _id,
    _int,
    _ints,
    _launches,
    check_acyclic,
)
from .bundle_files import (  # the files beside the nodes; importers of bundle_io find them here
    COUNTERS_FILE,
    DIAGNOSIS_FILE,
    DURATIONS_FILE,
    INCOMPLETE,
    SUMMARY_KEY,
    _load_json,
    _versioned,
    check_bundle_dir,
    content_digest,
    diagnosis_text,
    dumps,
    member,
)
from .graph import CapturedGraph, Node, safe_file_stem


# Long on purpose: one keyword per file, written in one atomic sequence
def write_bundle(
    path: str,
    *,
    manifest: Mapping[str, Any],
    graphs: list[CapturedGraph],
    timeline: Optional[Mapping[str, Any]] = None,
    summary: Optional[Mapping[str, Any]] = None,
    raw_dot: Optional[Mapping[str, str]] = None,
    force: bool = False,
    counters: Optional[Mapping[str, Any]] = None,
    extra: Optional[Mapping[str, Mapping[str, Any]]] = None,
    diagnosis: Optional[Mapping[str, Any]] = None,
) -> str:
    """Write a bundle atomically: into a temp dir beside ``path``, then rename into place.

    Raises BundleError if ``path`` exists and ``force`` is false.
    """
    path = os.path.abspath(path)
    if os.path.exists(path) and not force:
        raise BundleError(f"{path} already exists: pass --force to replace it or choose -o PATH")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    try:
        tmp = tempfile.mkdtemp(prefix=".graphscope-", dir=parent)
    except OSError as exc:
        raise BundleError(f"{parent}: cannot write there ({exc.strerror or exc}): choose "
                          "another -o") from None
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
            summary = {**summary, SUMMARY_KEY: content_digest(tmp)}
            _write(tmp, "summary.json", dumps(_versioned(summary)))
            files.append("summary.json")
        if diagnosis is not None:  # keyed by the manifest as written below, less "files"
            _write(tmp, DIAGNOSIS_FILE, diagnosis_text(tmp, manifest, diagnosis))
            files.append(DIAGNOSIS_FILE)
        if counters is not None:
            _write(tmp, COUNTERS_FILE, dumps(_versioned(counters), compact=True))
            files.append(COUNTERS_FILE)
        for name, doc in sorted((extra or {}).items()):  # optional files (eager.json)
            _write(tmp, name, dumps(_versioned(doc)))
            files.append(name)
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
        size = os.path.getsize(path)
        arr = np.load(path, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError, EOFError) as exc:
        raise BundleError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    if arr.ndim != 2 or arr.dtype != np.int64 or arr.shape[1] < 1:
        raise BundleError(f"{path}: expected an int64 matrix (exec node id, durations...), got "
                          f"{arr.dtype} {arr.shape}")
    if arr.size * 8 > size:  # the header claims more than the file holds
        raise BundleError(f"{path}: truncated")
    arr = np.array(arr)
    ids = arr[:, 0]
    if len(np.unique(ids)) != len(ids):
        raise BundleError(f"{path}: duplicate exec node ids")
    if (ids < 0).any() or (arr[:, 1:] < 0).any():
        raise BundleError(f"{path}: negative exec node id or duration")
    _check_duration_range(arr[:, 1:], path)
    return {k: tuple(r) for k, r in zip(ids.tolist(), arr[:, 1:].tolist())}


_MAX_SUM_NS = 1 << 52  # 52 days per replay: exact in float64 and far from int64's end


def _check_duration_range(durations: Any, where: str) -> None:
    """Per-node durations must be plausible and their per-replay sums must fit in int64 (a
    sum that wraps reads as a negative time)."""
    import numpy as np

    if durations.size == 0:
        return
    top = int(durations.max())
    if top > MAX_DURATION_NS:
        raise BundleError(f"{where}: a duration of {top} ns is out of range (at most "
                          f"{MAX_DURATION_NS} ns per node)")
    if float(durations.sum(axis=0, dtype=np.float64).max()) >= _MAX_SUM_NS:
        raise BundleError(f"{where}: the durations of one replay add up past {_MAX_SUM_NS} ns")


def _write(root: str, rel: str, text: str) -> None:
    with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
        f.write(text)


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


# Long on purpose (~100 lines): every file of a bundle validated where it is read, in order.
def _read_bundle(path: str) -> Bundle:
    path = os.path.abspath(path)
    check_bundle_dir(path)
    manifest = _load_json(path, "manifest.json")
    _check_manifest(manifest, f"{path}/manifest.json")
    graph = _load_json(path, "graph.json")
    timeline = _read_timeline(path, manifest)
    where = f"{path}/timeline.json"
    durations = _durations(path, timeline, where)
    width = max((len(v) for v in durations.values()), default=0)
    replays = _int(timeline.get("replays", 0), where, "replays")
    if replays > width:
        raise BundleError(f"{where}: replays is {replays} but the durations hold {width}")
    gwhere = f"{path}/graph.json"
    try:
        graphs = _read_graphs(graph, durations, gwhere)
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{gwhere}: malformed ({type(exc).__name__}: {exc})") from None
    events = _check_events(timeline.get("events", ()), where)
    launches = _launches(timeline.get("launches", []), where)
    totals = {}
    for k in ("replay_kernel_ns", "replay_span_ns"):
        totals[k] = _ints(timeline.get(k, ()), where, k)
        if len(totals[k]) > max(replays, 0):
            raise BundleError(f"{where}: {k} has more entries than replays ({replays})")
    return Bundle(
        path=path,
        manifest=manifest,
        graphs=tuple(graphs),
        replays=replays,
        replay_kernel_ns=totals["replay_kernel_ns"],
        replay_span_ns=totals["replay_span_ns"],
        events=events,
        unjoined_records=_int(timeline.get("unjoined_records", 0), where, "unjoined_records"),
        launches=launches,
    )


def _read_timeline(path: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """timeline.json, or {} for a bundle that has none (``graphscope annotate``'s); a bundle
    whose manifest says it was timed but lost the file is refused."""
    if os.path.lexists(os.path.join(path, "timeline.json")):
        timeline: dict[str, Any] = _load_json(path, "timeline.json")
        return timeline
    if "timeline.json" in manifest["files"] or manifest.get("replays"):
        # the manifest says the replays were timed: a bundle that lost its timings is not
        # one that has none (`graphscope annotate` writes no timeline and says 0 replays)
        raise BundleError(f"{path}: timeline.json is missing (the manifest lists it: "
                          "the bundle was copied incompletely; copy or record it again)")
    return {}


def _durations(path: str, timeline: dict[str, Any], where: str) -> dict[int, tuple[int, ...]]:
    """{exec node id: its duration per replay}: from durations.npy, or from the timeline's
    ``durations_ns`` in bundles from before that file."""
    if timeline.get("durations_file") is not None:
        name = timeline["durations_file"]
        if name != DURATIONS_FILE:
            raise BundleError(f"{where}: durations_file must be {DURATIONS_FILE!r}, not {name!r}")
        try:
            return _read_durations(member(path, name, "durations_file"))
        except FileNotFoundError:
            raise BundleError(f"{path}: {name} is missing{INCOMPLETE}") from None
    raw = timeline.get("durations_ns", {})
    _expect(isinstance(raw, dict), where, "durations_ns", "an object")
    durations = {_id(k, where, "durations_ns key"):
                 _ints(v, where, "durations_ns", MAX_DURATION_NS) for k, v in raw.items()}
    if durations:
        import numpy as np

        w = max(len(v) for v in durations.values())
        _check_duration_range(np.array([list(v) + [0] * (w - len(v))
                                        for v in durations.values()], dtype=np.int64), where)
    return durations


def _read_graphs(graph: Any, durations: dict[int, tuple[int, ...]], gwhere: str
                 ) -> list[CapturedGraph]:
    """graph.json's graphs, each node checked and given its durations; unique graph names
    and exec node ids."""
    glist = graph["graphs"]
    _expect(isinstance(glist, list), gwhere, "graphs", "a list")
    if not glist:
        raise BundleError(f"{gwhere}: the graph list is empty (no graph was recorded)")
    graphs: list[CapturedGraph] = []
    names: set[str] = set()
    seen: set[int] = set()
    for g in glist:
        _expect(isinstance(g, dict), gwhere, "graphs[]", "an object")
        name = g["name"]
        _expect(isinstance(name, str) and 0 < len(name) <= 4096, gwhere, "graph name",
                "a non-empty string")
        if name in names:
            raise BundleError(f"{gwhere}: graph name {name!r:.100} appears twice (graph "
                              "names must be unique)")
        names.add(name)
        _expect(isinstance(g["nodes"], list), gwhere, f"{name}: nodes", "a list")
        nodes = []
        for n in g["nodes"]:
            _check_node(n, gwhere, name)
            eid = n["exec_node_id"]
            if eid in seen:
                raise BundleError(f"{gwhere}: exec node id {eid} appears twice")
            seen.add(eid)
            nodes.append(Node.from_json(name, n, durations.get(eid, ())))
        edges = g["edges"]
        _expect(isinstance(edges, list), gwhere, f"{name}: edges", "a list")
        pairs = tuple((_int(a, gwhere, "edge"), _int(b, gwhere, "edge")) for a, b in edges)
        check_acyclic(pairs, gwhere, name)
        info = g.get("info") or {}
        _expect(isinstance(info, dict), gwhere, f"{name}: info", "an object")
        _check_info(info, gwhere, name)
        graphs.append(CapturedGraph(
            name=name,
            template_graph_id=_int(g["template_graph_id"], gwhere, "template_graph_id"),
            exec_id=_int(g["exec_id"], gwhere, "exec_id"),
            nodes=tuple(nodes),
            edges=pairs,
            info=dict(info),
        ))
    return graphs


# ---------------------------------------------------------------- the driver's DOT (raw/)

RAW_DOT_WHICH = ("`graphscope run` keeps the driver's DOT of each capture site's first graph "
                 "and of every graph the program keeps (keep_graph=True)")


def _raw_dot_path(bundle: Bundle, graph: str) -> Optional[str]:
    """The file of the driver's DOT of ``graph`` in the bundle, None when it has none."""
    try:
        return member(bundle.path, f"raw/{safe_file_stem(graph)}.dot", "raw DOT")
    except FileNotFoundError:
        return None


def has_raw_dot(bundle: Bundle, graph: str) -> bool:
    """Whether the bundle holds the driver's DOT of ``graph``."""
    return _raw_dot_path(bundle, graph) is not None


def raw_dot(bundle: Bundle, graph: str) -> str:
    p = _raw_dot_path(bundle, graph)
    if p is None:
        info = next((g.info for g in bundle.graphs if g.name == graph), None) or {}
        why = f": {RAW_DOT_WHICH}" if "site" in info else ""
        raise BundleError(f"{bundle.path}: no raw DOT for graph {graph!r} "
                          f"(raw/{safe_file_stem(graph)}.dot){why}")
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.read()
