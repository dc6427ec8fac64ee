"""Read, write and validate bundles: a directory of versioned JSON files, written atomically.

Layout (every JSON file carries ``schema_version``)::

    manifest.json      versions, command line, model hash, files
    graph.json         graphs -> nodes (kernel, launch dims, annotation, op, shapes, source), edges
    annotations.json   {exec node id: [dict]}; annotations.pkl is the same map, PyTorch's pickle
    timeline.json      per-replay totals, a few replays as events
    durations.npy      per-node durations per replay (int64; column 0 is the exec node id)
    summary.json       module table and top kernels (what `graphscope report` prints)
    counters.json      optional: hardware counters per node (``capture --counters``)
    raw/<graph>.dot    the driver's verbose DOT (cudaGraphDebugDotPrint); graph names that are
                       not plain file names are sanitised (``CapturedGraph.dot_file``)
"""

# ~600 lines on purpose: every file of a bundle written, then read and validated, in one place.
from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import stat
import tempfile
from collections.abc import Mapping
from typing import Any, Optional

from ._errors import BundleError
from .model.graph import Bundle, CapturedGraph, Node, safe_file_stem

SCHEMA_VERSION = 1
DURATIONS_FILE = "durations.npy"
REQUIRED = ("manifest.json", "graph.json", "annotations.json")
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


MAX_DURATION_NS = 1 << 40  # 18 minutes: no graph node runs longer; sums of them cannot wrap
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


def _load_json(path: str, name: str) -> dict[str, Any]:
    p = os.path.join(path, name)
    try:
        with open(member(path, name), "rb") as f:
            data = _loads(f.read())
    except FileNotFoundError:
        raise BundleError(f"{path}: not a graphscope bundle ({name} is missing)") from None
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
    timeline: dict[str, Any] = {}
    if os.path.lexists(os.path.join(path, "timeline.json")):
        timeline = _load_json(path, "timeline.json")
    where = f"{path}/timeline.json"
    if timeline.get("durations_file") is not None:
        name = timeline["durations_file"]
        if name != DURATIONS_FILE:
            raise BundleError(f"{where}: durations_file must be {DURATIONS_FILE!r}, not {name!r}")
        try:
            durations = _read_durations(member(path, name, "durations_file"))
        except FileNotFoundError:
            raise BundleError(f"{path}: {name} is missing") from None
    else:  # bundles from before durations.npy
        raw = timeline.get("durations_ns", {})
        _expect(isinstance(raw, dict), where, "durations_ns", "an object")
        durations = {_id(k, where, "durations_ns key"):
                     _ints(v, where, "durations_ns", MAX_DURATION_NS) for k, v in raw.items()}
        if durations:
            import numpy as np

            w = max(len(v) for v in durations.values())
            _check_duration_range(np.array([list(v) + [0] * (w - len(v))
                                            for v in durations.values()], dtype=np.int64), where)
    width = max((len(v) for v in durations.values()), default=0)
    replays = _int(timeline.get("replays", 0), where, "replays")
    if replays > width:
        raise BundleError(f"{where}: replays is {replays} but the durations hold {width}")
    graphs = []
    seen: set[int] = set()
    gwhere = f"{path}/graph.json"
    try:
        glist = graph["graphs"]
        _expect(isinstance(glist, list), gwhere, "graphs", "a list")
        if not glist:
            raise BundleError(f"{gwhere}: the graph list is empty (no graph was recorded)")
        names: set[str] = set()
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
            graphs.append(
                CapturedGraph(
                    name=name,
                    template_graph_id=_int(g["template_graph_id"], gwhere, "template_graph_id"),
                    exec_id=_int(g["exec_id"], gwhere, "exec_id"),
                    nodes=tuple(nodes),
                    edges=tuple((_int(a, gwhere, "edge"), _int(b, gwhere, "edge"))
                                for a, b in edges),
                    info=dict(info),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{gwhere}: malformed ({type(exc).__name__}: {exc})") from None
    events = timeline.get("events", ())
    _expect(isinstance(events, list) or events == (), where, "events", "a list")
    for e in events:
        _expect(isinstance(e, dict), where, "events[]", "an object")
        for k in ("replay", "exec_node_id", "start_ns", "dur_ns"):
            _int(e.get(k), where, f"events[].{k}")
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
        events=tuple(events),
        unjoined_records=_int(timeline.get("unjoined_records", 0), where, "unjoined_records"),
        launches=launches,
    )


def _launches(v: Any, where: str) -> tuple[dict[str, Any], ...]:
    """timeline.json ``launches``: the host's cudaGraphLaunch call per traced replay (on the
    events' clock, so a launch before the first record is negative)."""
    _expect(isinstance(v, list), where, "launches", "a list")
    for x in v:
        _expect(isinstance(x, dict) and isinstance(x.get("graph"), str), where,
                "launches[]", "an object with a graph name")
        _int(x.get("replay"), where, "launches[].replay")
        for k in ("start_ns", "end_ns"):
            if isinstance(x.get(k), bool) or not isinstance(x.get(k), int) or not (
                    -MAX_ID <= x[k] <= MAX_ID):
                raise BundleError(f"{where}: launches[].{k} must be an integer, not "
                                  f"{x.get(k)!r:.60}")
        if x["end_ns"] < x["start_ns"]:
            raise BundleError(f"{where}: launches[]: end_ns {x['end_ns']} is before start_ns "
                              f"{x['start_ns']}")
    return tuple(v)


MAX_ID = (1 << 63) - 1
_STR_FIELDS = ("kernel", "demangled", "op", "shapes", "source", "type")


def _expect(ok: bool, where: str, field: str, what: str) -> None:
    if not ok:
        raise BundleError(f"{where}: {field} must be {what}")


def _int(v: Any, where: str, field: str, hi: int = MAX_ID) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= hi:
        raise BundleError(f"{where}: {field} must be an integer in [0, {hi}], not {v!r:.60}")
    return v


def _id(k: Any, where: str, field: str) -> int:
    try:
        v = int(k)
    except (TypeError, ValueError):
        raise BundleError(f"{where}: {field} {k!r:.60} is not an integer") from None
    return _int(v, where, field)


def _ints(v: Any, where: str, field: str, hi: int = MAX_ID) -> tuple[int, ...]:
    if not isinstance(v, (list, tuple)):
        raise BundleError(f"{where}: {field} must be a list of integers")
    for x in v:
        _int(x, where, field, hi)
    return tuple(v)


def _check_node(n: Any, where: str, graph: str) -> None:
    _expect(isinstance(n, dict), where, f"{graph}: nodes[]", "an object")
    _int(n.get("local_id"), where, f"{graph}: local_id", (1 << 32) - 1)
    _int(n.get("exec_node_id"), where, f"{graph}: exec_node_id")
    for k in _STR_FIELDS:
        v = n.get(k)
        if v is not None and not isinstance(v, str):
            raise BundleError(f"{where}: {graph}: node {n.get('local_id')} {k} must be a "
                              f"string, not {type(v).__name__}")
    _expect(isinstance(n.get("type"), str), where, f"{graph}: node type", "a string")
    ann = n.get("annotation", {})
    _expect(isinstance(ann, dict), where, f"{graph}: node {n.get('local_id')} annotation",
            "an object")
    for k in ("grid", "block"):
        if k in n:
            v = n[k]
            _expect(isinstance(v, list) and len(v) == 3 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in v), where,
                f"{graph}: node {n.get('local_id')} {k}", "three integers")
    for k in ("smem", "bytes"):
        if k in n:
            _int(n[k], where, f"{graph}: node {n.get('local_id')} {k}")
    for k in ("reads", "writes"):  # [[start, end), ...] byte ranges; absent: no op info
        if n.get(k) is not None:
            _ranges(n[k], where, f"{graph}: node {n.get('local_id')} {k}")


def _ranges(v: Any, where: str, field: str) -> None:
    _expect(isinstance(v, list), where, field, "a list of [start, end] byte ranges")
    for r in v:
        _expect(isinstance(r, list) and len(r) == 2, where, field,
                "a list of [start, end] byte ranges")
        s, e = _int(r[0], where, field), _int(r[1], where, field)
        if e < s:
            raise BundleError(f"{where}: {field}: range [{s}, {e}] ends before it starts")


_MANIFEST_STRS = ("mode", "created", "tool", "step", "entry")
_MANIFEST_INTS = ("replays", "warmup", "skip_replays", "buckets")


def _check_manifest(m: Mapping[str, Any], where: str) -> None:
    """The manifest fields commands read (diff: model; html: versions; ranks: rank)."""
    def strs(v: Any, field: str) -> None:
        _expect(isinstance(v, list) and all(isinstance(x, str) for x in v), where, field,
                "a list of strings")

    for k in _MANIFEST_STRS:
        if m.get(k) is not None and not isinstance(m[k], str):
            raise BundleError(f"{where}: {k} must be a string, not {type(m[k]).__name__}")
    for k in _MANIFEST_INTS:
        if m.get(k) is not None:
            _int(m[k], where, k)
    for k in ("command", "graphs", "files"):
        if m.get(k) is not None:
            strs(m[k], k)
    model = m.get("model")
    if model is not None:
        _expect(isinstance(model, dict), where, "model", "an object")
        for k in ("path", "sha256", "entry"):
            if model.get(k) is not None and not isinstance(model[k], str):
                raise BundleError(f"{where}: model.{k} must be a string, not "
                                  f"{type(model[k]).__name__}")
    versions = m.get("versions")
    if versions is not None:
        _expect(isinstance(versions, dict) and all(
            isinstance(v, (str, int, float)) and not isinstance(v, bool)
            for v in versions.values()), where, "versions", "an object of version strings")
    rank = m.get("rank")
    if rank is not None:
        _expect(isinstance(rank, dict), where, "rank", "an object")
        for k in ("rank", "world_size", "local_rank"):
            if k in rank:
                _int(rank[k], where, f"rank.{k}", 1 << 20)


_INFO_INTS = ("ordinal", "replays", "traced_replays", "pool_bytes", "bucket")
_INFO_STRS = ("site", "kind", "shapes")


def _check_info(info: Mapping[str, Any], where: str, graph: str) -> None:
    """Graph-level facts the reports print and add up: counts are integers, names strings."""
    for k in _INFO_INTS:
        if info.get(k) is not None:
            _int(info[k], where, f"{graph}: info.{k}")
    for k in _INFO_STRS:
        if info.get(k) is not None and not isinstance(info[k], str):
            raise BundleError(f"{where}: {graph}: info.{k} must be a string, not "
                              f"{type(info[k]).__name__}")
    pool = info.get("pool_id")
    if pool is not None:
        _expect(isinstance(pool, list) and 0 < len(pool) <= 4 and all(
            isinstance(x, int) and not isinstance(x, bool) and abs(x) <= MAX_ID for x in pool),
            where, f"{graph}: info.pool_id", "a list of integers")


SUMMARY_KEY = "bundle_sha256"  # summary.json: the digest of the files it was computed from
SUMMARY_FORMAT = b"summary-2\0"  # 2: kernel names unique per bundle, shared pools
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
        raise BundleError(f"{path}: not a graphscope bundle ({missing[0]} is missing)")
    if not os.path.lexists(os.path.join(path, "summary.json")):
        return None
    data = _load_json(path, "summary.json")
    data.pop("schema_version", None)
    if data.pop(SUMMARY_KEY, None) != content_digest(path):
        return None
    # a digest anyone can compute: the fields are checked too, else it is recomputed
    return data if _fits(data, _SUMMARY_SPEC) else None


_NUM, _INT, _STR, _ANY = "num", "int", "str", "any"
_ROW = {"module": _STR, "level": _INT, "kernels": _INT, "fwd_kernels": _INT,
        "bwd_kernels": _INT, "median_ns": _NUM, "fwd_ns": _NUM, "bwd_ns": _NUM, "pct": _NUM,
        "?acc_kernels": _INT, "?acc_ns": _NUM}
_TOP = {"count": _INT, "median_ns": _NUM, "pct": _NUM}
_SUMMARY_SPEC: dict[str, Any] = {
    "graphs": [{"name": _STR, "nodes": _INT, "work_nodes": _INT, "?attributed": _INT,
                "?median_ns": _NUM, "?replays": _INT, "?traced_replays": _INT,
                "?pool_bytes": _INT, "?site": _STR,
                "?pool_shared": {"pool": _INT, "graphs": _INT, "bytes": _INT, "first": _ANY}}],
    "replays": _INT, "replay_kernel_median_ns": _NUM, "replay_span_median_ns": _NUM,
    "work_nodes": _INT, "annotated_nodes": _INT,
    "coverage": {"*": {"nodes": _INT, "attributed": _INT, "pct": _NUM}},
    "modules": [_ROW],
    "top_kernels": [{"kernel": _STR, **_TOP}], "top_ops": [{"op": _STR, **_TOP}],
    "?unjoined_records": _INT,
    "?by_graph": {"graphs": [_STR], "rows": [{"module": _STR, "level": _INT,
                                              "per_graph_ns": [_NUM]}]},
    "?ddp": [{"bucket": _ANY, "modules": [_ANY], "?bucket_bytes": _INT, "nodes": _INT,
              "median_ns": _NUM, "comm_ns": _NUM, "?overlap_pct": _NUM}],
}


def _fits(v: Any, spec: Any) -> bool:
    """``v`` has the shape ``spec`` describes (keys with ``?`` optional, ``*`` any key)."""
    import math

    if spec == _ANY:
        return True
    if spec == _STR:
        return isinstance(v, str)
    if spec in (_INT, _NUM):
        if isinstance(v, bool) or not isinstance(v, (int, float) if spec == _NUM else int):
            return False
        return math.isfinite(v) and 0 <= v <= MAX_ID if spec == _INT else math.isfinite(v)
    if isinstance(spec, list):
        return isinstance(v, list) and all(_fits(x, spec[0]) for x in v)
    if not isinstance(v, dict):
        return False
    if "*" in spec:
        return all(isinstance(k, str) and _fits(x, spec["*"]) for k, x in v.items())
    for key, sub in spec.items():
        k = key.lstrip("?")
        if k not in v or v[k] is None:
            if key.startswith("?"):
                continue
            return False
        if not _fits(v[k], sub):
            return False
    return True


def raw_dot(bundle: Bundle, graph: str) -> str:
    rel = f"raw/{safe_file_stem(graph)}.dot"
    try:
        p = member(bundle.path, rel, "raw DOT")
    except FileNotFoundError:
        raise BundleError(f"{bundle.path}: no raw DOT for graph {graph!r} ({rel})") from None
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.read()
