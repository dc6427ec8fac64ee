"""What a bundle's files must hold: the checks :mod:`graphscope.model.bundle_io` runs on every file
it
reads (manifest, graph info, nodes, launches) and the shape specs of the derived files
(``summary.json`` here; ``eager.json`` and the trees file in :mod:`graphscope.model.bundle_files`).
Every failure is a :class:`~graphscope._errors.BundleError` naming the file and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import BundleError


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
    clock = m.get("clock")
    if clock is not None:
        _expect(isinstance(clock, dict), where, "clock", "an object")
        _int(clock.get("origin_ns"), where, "clock.origin_ns", 1 << 63)
        _expect(isinstance(clock.get("host"), str), where, "clock.host", "a string")
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


_NUM, _INT, _STR, _ANY = "num", "int", "str", "any"
_NUM_OR_NONE = "num or none"  # a figure that may be absent (a graph never timed)
_ROW = {"module": _STR, "level": _INT, "kernels": _INT, "fwd_kernels": _INT,
        "bwd_kernels": _INT, "median_ns": _NUM, "fwd_ns": _NUM, "bwd_ns": _NUM, "pct": _NUM,
        "?acc_kernels": _INT, "?acc_ns": _NUM}
_TOP = {"count": _INT, "median_ns": _NUM, "pct": _NUM}
_SUMMARY_SPEC: dict[str, Any] = {
    "graphs": [{"name": _STR, "nodes": _INT, "work_nodes": _INT, "?attributed": _INT,
                "?median_ns": _NUM, "?replays": _INT, "?traced_replays": _INT,
                "?pool_bytes": _INT, "?site": _STR,
                "?pool_shared": {"pool": _INT, "graphs": _INT, "bytes": _INT, "first": _ANY}}],
    "replays": _INT, "?untraced_graphs": _INT,
    "replay_kernel_median_ns": _NUM, "replay_span_median_ns": _NUM,
    "work_nodes": _INT, "annotated_nodes": _INT,
    "coverage": {"*": {"nodes": _INT, "attributed": _INT, "pct": _NUM}},
    "modules": [_ROW],
    "top_kernels": [{"kernel": _STR, **_TOP}], "top_ops": [{"op": _STR, **_TOP}],
    "?unjoined_records": _INT,
    "?by_graph": {"graphs": [_STR], "rows": [{"module": _STR, "level": _INT,
                                              "per_graph_ns": [_NUM_OR_NONE]}]},
    "?ddp": [{"bucket": _ANY, "modules": [_ANY], "?bucket_bytes": _INT, "nodes": _INT,
              "median_ns": _NUM, "comm_ns": _NUM, "?overlap_pct": _NUM}],
}


def _fits(v: Any, spec: Any) -> bool:
    """``v`` has the shape ``spec`` describes (keys with ``?`` optional, ``*`` any key)."""
    import math

    if spec == _ANY:
        return True
    if spec == _NUM_OR_NONE:
        return v is None or _fits(v, _NUM)
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
