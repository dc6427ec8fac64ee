"""The files of a bundle beside its nodes, read and checked without reading the nodes: the
JSON conventions every file follows (``schema_version``, deterministic ``dumps``, a path that
stays inside the bundle), ``summary.json`` and ``diagnosis.json`` (what `report` prints, kept
current by a digest of the files they came from), the manifest's mode, and the optional files:
``counters.json`` (``capture --counters``), ``eager.json`` (``capture --eager-baseline``),
``cudagraph_trees.json`` (``graphscope run`` of torch.compile programs) and the eager time of
the traced windows in timeline.json. Each optional file is absent in bundles that did not ask
for it (None / {}). Reading and writing the nodes is :mod:`graphscope.model.bundle_io`'s."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from .._errors import BundleError
from .bundle_check import (
    _AMOUNT,
    _COUNT,
    _INT,
    _NUM,
    _STR,
    _SUMMARY_SPEC,
    MAX_ID,
    _check_manifest,
    _fits,
    _scalar_fits,
    check_spec,
)

SCHEMA_VERSION = 1
REQUIRED = ("manifest.json", "graph.json", "annotations.json")
# said of a file missing from a directory whose manifest is a bundle's
INCOMPLETE = " (the bundle was copied incompletely; copy or record it again)"
DURATIONS_FILE = "durations.npy"
COUNTERS_FILE = "counters.json"
COUNTERS_VERSION = 1  # counters.json's own "version" (graphscope/analysis/counters.py)
SUMMARY_KEY = "bundle_sha256"  # summary.json: the digest of the files it was computed from
SUMMARY_FORMAT = b"summary-6\0"  # 2: unique kernel names, shared pools; 3: number order;
# 4: optimizer time apart from forward (opt_ns, opt_kernels); 5: module medians over the
# replays the nodes ran in; 6: top kernels rows of copy and memset nodes carry their "type"
_DIGESTED = ("graph.json", "timeline.json", DURATIONS_FILE)
DIAGNOSIS_FILE = "diagnosis.json"  # the report's diagnosis, made when the bundle was written
DIAGNOSIS_FORMAT = b"diagnosis-1\0"
_RANK_DIR = re.compile(r"^rank(\d+)$")


def dumps(obj: Any, compact: bool = False) -> str:
    """Deterministic JSON: sorted keys, fixed separators. ``compact`` for the big files
    (graph, timeline, annotations): no indentation, which halves their size and parse time."""
    if compact:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str) + "\n"
    return json.dumps(obj, sort_keys=True, indent=1, separators=(",", ": "), default=str) + "\n"


def _versioned(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, **payload}


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


def check_bundle_dir(path: str) -> None:
    """Refuse ``path`` unless it is a directory, saying what it is instead."""
    if os.path.isdir(path):
        return
    try:
        os.stat(path)
        what = "a file, not a bundle directory"
    except OSError as exc:
        what = ("a symlink loop (it leads back to itself), not a bundle directory"
                if exc.errno == errno.ELOOP else "no such bundle directory")
    raise BundleError(f"{path}: {what}")


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


# 4: optimizer time apart from forward (opt_ns, opt_kernels); 5: module medians over the
# replays the nodes ran in; 6: top kernels rows of copy and memset nodes carry their "type"


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
    check_bundle_dir(path)
    # validates that this is a bundle of our schema
    _check_manifest(_load_json(path, "manifest.json"), f"{path}/manifest.json")
    missing = [n for n in REQUIRED if not os.path.lexists(os.path.join(path, n))]
    if missing:
        raise BundleError(f"{path}: {missing[0]} is missing{INCOMPLETE}")
    if not os.path.lexists(os.path.join(path, "summary.json")):
        return None
    try:  # a summary that cannot be read is recomputed, as a stale one is
        data = _load_json(path, "summary.json")
    except BundleError:
        return None
    data.pop("schema_version", None)
    if data.pop(SUMMARY_KEY, None) != content_digest(path):
        return None
    # a digest anyone can compute: the fields are checked too, else it is recomputed
    return data if _fits(data, _SUMMARY_SPEC) else None


def diagnosis_digest(path: str, manifest: Mapping[str, Any], diagnosis: Any) -> str:
    """What a kept diagnosis was computed from, and the diagnosis itself: the summary's files,
    the manifest (the GPU, the mode), the graphscope that computed it (a later one may
    diagnose differently) and the diagnosis's own text (a file edited since is not it)."""
    import hashlib

    from .._version import __version__

    h = hashlib.sha256(DIAGNOSIS_FORMAT + __version__.encode() + b"\0")
    h.update(content_digest(path).encode())
    h.update(json.dumps({k: v for k, v in manifest.items() if k not in ("files", "schema_version")},
                        sort_keys=True, default=str).encode())
    h.update(json.dumps(diagnosis, sort_keys=True, default=str).encode())
    return h.hexdigest()


def diagnosis_text(path: str, manifest: Mapping[str, Any], diagnosis: Any) -> str:
    """diagnosis.json's text for the bundle at ``path`` (its other files written, the manifest
    as written less its file list): the diagnosis and the key :func:`read_diagnosis` checks."""
    return dumps(_versioned({SUMMARY_KEY: diagnosis_digest(path, manifest, diagnosis),
                             "diagnosis": diagnosis}), compact=True)


def read_diagnosis(path: str) -> Optional[dict[str, Any]]:
    """The bundle's diagnosis.json (the report's diagnosis as JSON) where this graphscope made
    it from these very files, else None (the caller diagnoses the bundle). A digest anyone can
    compute: every field is checked too (:mod:`graphscope.model.bundle_diagnosis`: types,
    figures the bundle can hold, the summary's graphs)."""
    from .bundle_diagnosis import diagnosis_misfit

    try:
        data = _load_json(path, DIAGNOSIS_FILE)
        manifest = _load_json(path, "manifest.json")
        summary = (_load_json(path, "summary.json")
                   if os.path.lexists(os.path.join(path, "summary.json")) else None)
    except (BundleError, FileNotFoundError):
        return None
    diag = data.get("diagnosis")
    if not isinstance(diag, dict) or data.get(SUMMARY_KEY) != diagnosis_digest(
            path, manifest, diag):
        return None
    return diag if diagnosis_misfit(diag, summary) is None and _figures_fit(diag) else None


def _figures_fit(v: Any, key: str = "") -> bool:
    """Every ``*_ns`` and ``*_pct`` value a finite number (or null), the times not negative
    but a gain's (which a prediction or measurement can make negative)."""
    import math

    if isinstance(v, dict):
        return all(_figures_fit(x, str(k)) for k, x in v.items())
    if isinstance(v, list):
        return all(_figures_fit(x, key) for x in v)
    if not key.endswith(("_ns", "_pct")) or v is None:
        return True
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return False
    return v > -1e-3 or "gain" in key or key.endswith("_pct")  # (float rounding: -4e-12)


def read_manifest_mode(path: str) -> Optional[str]:
    """The manifest's ``mode`` (``step``, ``forward``, ``callables``, ``run``...), None where
    the manifest cannot be read (:func:`read_bundle` then says what is wrong with it)."""
    try:
        with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
            mode = json.load(f).get("mode")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return mode if isinstance(mode, str) else None

def read_counters(path: str) -> Optional[dict[str, Any]]:
    """The bundle's counters.json (``capture --counters``), validated; None when it has none."""
    if not os.path.lexists(os.path.join(path, COUNTERS_FILE)):
        return None
    data = _load_json(path, COUNTERS_FILE)
    data.pop("schema_version", None)
    try:
        return _check_counters(data, os.path.join(path, COUNTERS_FILE))
    except ValueError as exc:
        raise BundleError(str(exc)) from None


_COUNTERS_META: dict[str, Any] = {  # what the report reads of how the samples were taken
    "?method": _STR, "?replays": _COUNT, "?interval_ns": _INT, "?samples": _INT,
    "?samples_dropped": _INT, "?metrics": {"*": _STR}, "?missing_metrics": [_STR],
    "?peak_dram_GBps": _AMOUNT,
}


def _check_counters(data: Any, where: str) -> dict[str, Any]:
    """counters.json as read: checked, or a one-line ValueError naming what is wrong. Times,
    shares and quantities are amounts (finite, >= 0, within int64: a time of 1e308 made the
    sums infinite), ``replays`` a count >= 1 (the figures are divided by it)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not a JSON object")
    if data.get("version") != COUNTERS_VERSION:
        raise ValueError(f"{where}: version {data.get('version')!r}, this graphscope reads "
                         f"{COUNTERS_VERSION}")
    try:
        check_spec(data, _COUNTERS_META, where)
    except BundleError as exc:
        raise ValueError(str(exc)) from None
    nodes = data.get("nodes")
    if not isinstance(nodes, dict) or not isinstance(nodes.get("exec_node_id"), list):
        raise ValueError(f"{where}: 'nodes.exec_node_id' missing")
    n = len(nodes["exec_node_id"])
    cols = [("time_ns", nodes.get("time_ns")), ("shared_ns", nodes.get("shared_ns")),
            ("concurrent_ns", nodes.get("concurrent_ns"))]
    q = nodes.get("quantity")
    if not isinstance(q, dict):
        raise ValueError(f"{where}: 'nodes.quantity' missing")
    cols += [(f"quantity.{k}", v) for k, v in q.items()]
    for name, col in cols:
        if not isinstance(col, list) or len(col) != n:
            raise ValueError(f"{where}: 'nodes.{name}' is not a list of {n} numbers")
        bad = next((i for i, x in enumerate(col) if not _scalar_fits(x, _AMOUNT)), None)
        if bad is not None:
            raise ValueError(f"{where}: 'nodes.{name}[{bad}]' must be a number in [0, "
                             f"{MAX_ID}], not {col[bad]!r:.60}")
    if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_ID
               for x in nodes["exec_node_id"]):
        raise ValueError(f"{where}: 'nodes.exec_node_id' holds a non-id")
    return data


EAGER_FILE = "eager.json"  # capture --eager-baseline (graphscope/capture/eager.py)
_EAGER_SPEC: dict[str, Any] = {
    "eager_version": _INT, "mode": _STR, "runs": _COUNT, "graphs": [_STR],
    "graph_wall_ns": [_INT], "eager_wall_ns": [_INT], "eager_gpu_ns": [_INT],
    "backward_attribution": _STR,
    "kernels": [{"graph": _STR, "module": _STR, "phase": _STR, "kernel": _STR, "count": _INT,
                 "ns": _INT}],
}


_EAGER_RUNS = ("graph_wall_ns", "eager_wall_ns", "eager_gpu_ns")


def read_eager(path: str) -> Optional[dict[str, Any]]:
    """The bundle's eager baseline (eager.json, optional: None when absent); a malformed one
    is refused naming the file."""
    if not os.path.lexists(os.path.join(path, EAGER_FILE)):
        return None
    data = _load_json(path, EAGER_FILE)
    data.pop("schema_version", None)
    if data.get("eager_version") != 1:
        raise BundleError(f"{path}/{EAGER_FILE}: eager_version {data.get('eager_version')!r}, "
                          "but this graphscope reads version 1; re-record the bundle")
    where = f"{path}/{EAGER_FILE}"
    check_spec(data, _EAGER_SPEC, where)
    for key in _EAGER_RUNS:  # one figure per run: none at all printed "eager 0 ns"
        if len(data[key]) != data["runs"]:
            raise BundleError(f"{where}: '{key}' has {len(data[key])} time(s) for runs "
                              f"{data['runs']}: one per run (re-record it with graphscope "
                              "capture --eager-baseline)")
    return data


def read_outside(path: str) -> dict[str, Any]:
    """timeline.json's eager work seen in the traced windows: ``outside_graph_records`` and
    ``outside_graph_ns`` (absent in bundles from before it; {} without a timeline)."""
    if not os.path.lexists(os.path.join(path, "timeline.json")):
        return {}
    t = _load_json(path, "timeline.json")
    return {k: t[k] for k in ("outside_graph_records", "outside_graph_ns") if k in t}


TREES_FILE = "cudagraph_trees.json"  # graphscope run (graphscope/capture/run/trees.py)
_TREES_SPEC: dict[str, Any] = {
    "trees_version": _INT, "dropped": _INT, "missing": [_STR],
    "events": [{"event": _STR, "t_s": _NUM, "?function": _STR, "?mode": _STR, "?shapes": _STR,
                "?reason": _STR}],
    "warmups": {"*": _INT}, "eager_runs": {"*": _INT}, "counters": {"*": _NUM},
}


def read_trees(path: str) -> Optional[dict[str, Any]]:
    """torch.compile's cudagraph-tree events of a ``graphscope run`` bundle (optional: None
    when absent); a malformed file is refused naming it."""
    if not os.path.lexists(os.path.join(path, TREES_FILE)):
        return None
    data = _load_json(path, TREES_FILE)
    data.pop("schema_version", None)
    if data.get("trees_version") != 1:
        raise BundleError(f"{path}/{TREES_FILE}: trees_version {data.get('trees_version')!r}, "
                          "but this graphscope reads version 1; re-record it with graphscope run")
    check_spec(data, _TREES_SPEC, f"{path}/{TREES_FILE}")
    return data


@dataclass(frozen=True)
class BundleExtras:
    """A bundle's optional files, read and checked: what a report adds beside its graphs."""

    eager: Optional[dict[str, Any]] = None  # eager.json
    outside: dict[str, Any] = field(default_factory=dict)  # timeline.json's eager work
    trees: Optional[dict[str, Any]] = None  # cudagraph_trees.json
    counters: Optional[dict[str, Any]] = None  # counters.json
    mode: Optional[str] = None  # the manifest's mode ("run": a program's graphs)


def read_extras(path: str, mode: Optional[str]) -> BundleExtras:
    """Every optional file of the bundle at ``path`` (``mode``: its manifest's); the eager
    work outside graphs and torch.compile's trees are a program's (``run``) question only."""
    run = mode == "run"
    return BundleExtras(eager=read_eager(path), outside=read_outside(path) if run else {},
                        trees=read_trees(path) if run else None,
                        counters=read_counters(path), mode=mode)



COMPILE_FILE = "compile.json"  # capture --try-compile (graphscope/capture/compile.py)
COMPILE_VERSION = 1
_BOOL, _OPT = "bool", "num or none"
_KERNELS: dict[str, Any] = {"kernel": _STR, "count": _INT, "ns": _NUM}
_MODULE_VERSION: dict[str, Any] = {"kernels": _INT, "nodes": _INT, "busy_ns": _OPT,
                                   "span_ns": _OPT, "top_kernels": [_KERNELS]}
_GRAPH_VERSION: dict[str, Any] = {"kernels": _INT, "nodes": _INT, "span_ns": [_INT],
                                  "median_span_ns": _OPT}
_COMPARED: dict[str, Any] = {"tensors": _INT, "bitwise_equal": _BOOL, "max_abs_diff": _OPT,
                             "nonfinite": _INT, "within_tolerance": _BOOL,
                             "max_tolerance_ratio": _OPT, "mismatched": [_STR],
                             "?structure": _STR, "?own_max_abs_diff": _OPT}
_COMPILE_GRAPH: dict[str, Any] = {
    "graph": _STR, "replays": _INT, "eager": _GRAPH_VERSION, "compiled": _GRAPH_VERSION,
    "gain_pct": _OPT,
    "modules": [{"module": _STR, "eager": _MODULE_VERSION, "compiled": _MODULE_VERSION}],
    "outputs_equal": _BOOL, "within_tolerance": _BOOL, "max_abs_diff": _OPT,
    "max_tolerance_ratio": _OPT,
    "tolerance": {"kind": _STR, "rule": _STR, "atol_rtol": {"*": [_NUM]}},
    "compared": {"*": _COMPARED}, "warmup_s": {"eager": _NUM, "compiled": _NUM},
    "?same_kernels": _BOOL,
}
_COMPILE_SPEC: dict[str, Any] = {
    "compile_version": _INT, "glob": _STR, "backend": _STR, "options": {"*": _BOOL},
    "dynamic": _BOOL, "modules": [{"module": _STR, "class": _STR}], "nested": [_STR],
    "torch": _STR, "graphs": [{"graph": _STR, "?error": _STR}],
}


def _misfit(v: Any, spec: Any, at: str) -> Optional[str]:
    """The first place where ``v`` does not have the shape ``spec`` describes (``_fits``'s
    language plus booleans and figures that may be null), or None."""
    if spec == _BOOL:
        return None if isinstance(v, bool) else at
    if spec == _OPT:
        return None if v is None or _fits(v, _NUM) else at
    if isinstance(spec, list):
        if not isinstance(v, list):
            return at
        return next((m for i, x in enumerate(v) if (m := _misfit(x, spec[0], f"{at}[{i}]"))),
                    None)
    if not isinstance(spec, dict):
        return None if _fits(v, spec) else at
    if not isinstance(v, dict):
        return at
    if "*" in spec:
        return next((m for k, x in v.items() if (m := _misfit(x, spec["*"], f"{at}.{k}"))),
                    None)
    for key, sub in spec.items():
        k = key.lstrip("?")
        if k not in v:
            if key.startswith("?"):
                continue
            return f"{at}.{k}"
        m = _misfit(v[k], sub, f"{at}.{k}")
        if m:
            return m
    return None


def check_compile(data: Any, where: str) -> dict[str, Any]:
    """compile.json as read: checked, or a BundleError naming the file and the first field
    that is missing or of the wrong type. A graph entry is either an ``error`` or the full
    measurement."""
    if not isinstance(data, dict):
        raise BundleError(f"{where}: not a JSON object")
    if data.get("compile_version") != COMPILE_VERSION:
        raise BundleError(f"{where}: compile_version {data.get('compile_version')!r}, but "
                          f"this graphscope reads version {COMPILE_VERSION}; re-record it "
                          "with graphscope capture --try-compile")
    bad = _misfit(data, _COMPILE_SPEC, "")
    for i, g in enumerate(data.get("graphs", []) if not bad else []):
        bad = bad or (None if "error" in g else _misfit(g, _COMPILE_GRAPH, f".graphs[{i}]"))
    if bad:
        raise BundleError(f"{where}: {bad.lstrip('.')} is missing or malformed (re-record it "
                          "with graphscope capture --try-compile)")
    return data


def read_compile(path: str) -> Optional[dict[str, Any]]:
    """The bundle's ``capture --try-compile`` measurement (compile.json, optional: None when
    absent), validated."""
    if not os.path.lexists(os.path.join(path, COMPILE_FILE)):
        return None
    data = _load_json(path, COMPILE_FILE)
    data.pop("schema_version", None)
    return check_compile(data, os.path.join(path, COMPILE_FILE))
