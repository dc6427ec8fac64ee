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
    counters.json      optional: hardware counters per node (``capture --counters``)
    raw/<graph>.dot    the driver's verbose DOT (cudaGraphDebugDotPrint); graph names that are
                       not plain file names are sanitised (``CapturedGraph.dot_file``); under
                       ``graphscope run`` only a capture site's first graph and the graphs the
                       program kept (``keep_graph=True``) have one
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import re
import shutil
import stat
import tempfile
from collections.abc import Mapping
from typing import Any, Optional

from .._errors import BundleError
from .bundle import Bundle
from .bundle_check import (
    _SUMMARY_SPEC,
    MAX_DURATION_NS,
    _check_events,
    _check_info,
    _check_manifest,
    _check_node,
    _expect,
    _fits,
    _id,
    _int,
    _ints,
    _launches,
)
from .graph import CapturedGraph, Node, safe_file_stem

SCHEMA_VERSION = 1
DURATIONS_FILE = "durations.npy"
REQUIRED = ("manifest.json", "graph.json", "annotations.json")
# said of a file missing from a directory whose manifest is a bundle's
INCOMPLETE = " (the bundle was copied incompletely; copy or record it again)"
COUNTERS_FILE = "counters.json"
COUNTERS_VERSION = 1  # counters.json's own "version" (graphscope/analysis/counters.py)


def dumps(obj: Any, compact: bool = False) -> str:
    """Deterministic JSON: sorted keys, fixed separators. ``compact`` for the big files
    (graph, timeline, annotations): no indentation, which halves their size and parse time."""
    if compact:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str) + "\n"
    return json.dumps(obj, sort_keys=True, indent=1, separators=(",", ": "), default=str) + "\n"


def _versioned(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, **payload}


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


try:  # 5-10x faster on big bundles; optional so that a bare environment still reads them
    import orjson

    _loads: Any = orjson.loads
    _DecodeError: Any = (orjson.JSONDecodeError, json.JSONDecodeError)
except ImportError:  # pragma: no cover - exercised where orjson is absent
    _loads = json.loads
    _DecodeError = json.JSONDecodeError


def member(path: str, rel: str, what: str = "file") -> str:
    """The bundle file ``rel``: it must resolve inside the bundle, to a regular file (a bundle
    is untrusted data: no symlink out of it, no ``..``, no device or FIFO)."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or "\x00" in rel:
        raise BundleError(f"{path}: {what} {rel!r} is not a path inside the bundle")
    root = os.path.realpath(path)
    p = os.path.realpath(os.path.join(root, rel))
    if os.path.commonpath([root, p]) != root:
        raise BundleError(f"{path}: {what} {rel!r} points outside the bundle")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise FileNotFoundError(p) from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read {rel} ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise BundleError(f"{path}: {rel} is not a regular file")
    return p


_RANK_DIR = re.compile(r"^rank(\d+)$")


def rank_dirs(path: str) -> list[tuple[int, str]]:
    """The ``rank<r>`` entries of ``path`` (directories or not: read_ranks refuses a file):
    ``capture --nproc`` writes one bundle per rank there."""
    if not os.path.isdir(path):
        return []
    out = []
    for name in os.listdir(path):
        m = _RANK_DIR.match(name)
        if m:
            out.append((int(m.group(1)), os.path.join(path, name)))
    return sorted(out)


def _load_json(path: str, name: str) -> dict[str, Any]:
    p = os.path.join(path, name)
    try:
        with open(member(path, name), "rb") as f:
            data = _loads(f.read())
    except FileNotFoundError:
        if name == "manifest.json":
            ranks = rank_dirs(path)
            if ranks:  # capture --nproc's directory of rank<r>/ bundles
                raise BundleError(
                    f"{path}: a multi-rank bundle ({len(ranks)} ranks): pass one rank's "
                    f"bundle ({path.rstrip('/')}/rank{ranks[0][0]} ...); graphscope report "
                    "reads them all") from None
            raise BundleError(f"{path}: not a graphscope bundle ({name} is missing)") from None
        raise BundleError(f"{path}: {name} is missing{INCOMPLETE}") from None
    except _DecodeError as exc:
        raise BundleError(f"{p}: invalid JSON ({exc})") from None
    except (RecursionError, UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"{p}: invalid JSON ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        raise BundleError(f"{p}: cannot read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise BundleError(f"{p}: expected a JSON object, not {type(data).__name__}")
    v = data.get("schema_version")
    if v != SCHEMA_VERSION or isinstance(v, bool):
        raise BundleError(
            f"{p}: schema version {v!r}, but this graphscope reads version {SCHEMA_VERSION}; "
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


# Long on purpose (~100 lines): every file of a bundle validated where it is read, in order.
def _read_bundle(path: str) -> Bundle:
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise BundleError(f"{path}: " + ("a file, not a bundle directory"
                                         if os.path.exists(path) else "no such bundle directory"))
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
        info = g.get("info") or {}
        _expect(isinstance(info, dict), gwhere, f"{name}: info", "an object")
        _check_info(info, gwhere, name)
        graphs.append(CapturedGraph(
            name=name,
            template_graph_id=_int(g["template_graph_id"], gwhere, "template_graph_id"),
            exec_id=_int(g["exec_id"], gwhere, "exec_id"),
            nodes=tuple(nodes),
            edges=tuple((_int(a, gwhere, "edge"), _int(b, gwhere, "edge")) for a, b in edges),
            info=dict(info),
        ))
    return graphs


SUMMARY_KEY = "bundle_sha256"  # summary.json: the digest of the files it was computed from
SUMMARY_FORMAT = b"summary-5\0"  # 2: unique kernel names, shared pools; 3: number order;
# 4: optimizer time apart from forward (opt_ns, opt_kernels); 5: module medians over the
# replays the nodes ran in
_DIGESTED = ("graph.json", "timeline.json", DURATIONS_FILE)


def content_digest(path: str) -> str:
    """sha256 over the files a summary is computed from (hashing is far cheaper than
    parsing them)."""
    import hashlib

    h = hashlib.sha256(SUMMARY_FORMAT)  # a summary of an older format is recomputed
    for name in _DIGESTED:
        try:
            p = member(path, name)
        except FileNotFoundError:
            h.update(b"-")
            continue
        h.update(name.encode() + b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def read_summary(path: str) -> Optional[dict[str, Any]]:
    """The bundle's precomputed summary.json (what `report` prints), or None when it has none
    or it was not computed from this bundle's files (then the caller recomputes it)."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise BundleError(f"{path}: " + ("a file, not a bundle directory"
                                         if os.path.exists(path) else "no such bundle directory"))
    # validates that this is a bundle of our schema
    _check_manifest(_load_json(path, "manifest.json"), f"{path}/manifest.json")
    missing = [n for n in REQUIRED if not os.path.lexists(os.path.join(path, n))]
    if missing:
        raise BundleError(f"{path}: {missing[0]} is missing{INCOMPLETE}")
    if not os.path.lexists(os.path.join(path, "summary.json")):
        return None
    data = _load_json(path, "summary.json")
    data.pop("schema_version", None)
    if data.pop(SUMMARY_KEY, None) != content_digest(path):
        return None
    # a digest anyone can compute: the fields are checked too, else it is recomputed
    return data if _fits(data, _SUMMARY_SPEC) else None


def read_manifest_mode(path: str) -> Optional[str]:
    """The manifest's ``mode`` (``step``, ``forward``, ``callables``, ``run``...), None where
    the manifest cannot be read (:func:`read_bundle` then says what is wrong with it)."""
    try:
        with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
            mode = json.load(f).get("mode")
    except (OSError, ValueError, AttributeError):
        return None
    return mode if isinstance(mode, str) else None
