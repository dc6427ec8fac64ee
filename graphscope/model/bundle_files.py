"""The optional files of a bundle, read and checked: ``counters.json`` (``capture
--counters``), ``eager.json`` (``capture --eager-baseline``), ``cudagraph_trees.json``
(``graphscope run`` of torch.compile programs) and the eager time of the traced windows in
timeline.json. Each is absent in bundles that did not ask for it (None / {})."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from .._errors import BundleError
from .bundle import Bundle
from .bundle_check import (
    _AMOUNT,
    _COUNT,
    _INT,
    _NUM,
    _STR,
    MAX_ID,
    _fits,
    _scalar_fits,
    check_spec,
)
from .bundle_io import COUNTERS_FILE, COUNTERS_VERSION, _load_json, member
from .graph import safe_file_stem


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
