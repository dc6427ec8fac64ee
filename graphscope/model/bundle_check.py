"""What a bundle's files must hold: the checks :mod:`graphscope.model.bundle_io` runs on every file
it
reads (manifest, graph info, nodes, launches) and the shape specs of the derived files
(``summary.json`` here; ``eager.json`` and the trees file in :mod:`graphscope.model.bundle_files`).
Every failure is a :class:`~graphscope._errors.BundleError` naming the file and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

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
MAX_DURATION_NS = 1 << 40  # 18 minutes: no graph node runs longer; sums of them cannot wrap
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
    module = ann.get("module_name")
    if module is not None:
        _check_module(module, where, f"{graph}: node {n.get('local_id')} annotation.module_name")
    for k in ("grid", "block"):
        if k in n:
            v = n[k]
            _expect(isinstance(v, list) and len(v) == 3 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in v), where,
                f"{graph}: node {n.get('local_id')} {k}", "three integers")
    for k in ("smem", "bytes"):
        if k in n:
            _int(n[k], where, f"{graph}: node {n.get('local_id')} {k}")
    if "registers" in n:  # per thread: at most 255 on every GPU graphscope supports
        _int(n["registers"], where, f"{graph}: node {n.get('local_id')} registers", 255)
    for k in ("reads", "writes"):  # [[start, end), ...] byte ranges; absent: no op info
        if n.get(k) is not None:
            _ranges(n[k], where, f"{graph}: node {n.get('local_id')} {k}")


MAX_MODULE_LEVELS = 256  # a module path's levels: nn.Module trees are tens deep
MAX_MODULE_CHARS = 4096  # as a graph name


def _check_module(v: Any, where: str, field: str) -> None:
    """A module path: a string of at most :data:`MAX_MODULE_LEVELS` levels and
    :data:`MAX_MODULE_CHARS` characters (every level is a row of the module table: a path of n
    levels is n prefixes, n * n characters; so bounded, the tables stay linear in the nodes)."""
    if not isinstance(v, str):
        raise BundleError(f"{where}: {field} must be a string, not {type(v).__name__}")
    levels = v.count(".") + 1
    if levels > MAX_MODULE_LEVELS:
        raise BundleError(f"{where}: {field} has {levels} levels (at most {MAX_MODULE_LEVELS})")
    if len(v) > MAX_MODULE_CHARS:
        raise BundleError(f"{where}: {field} has {len(v)} characters (at most "
                          f"{MAX_MODULE_CHARS})")


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
    if m.get("capture_s") is not None:  # one window timed for several graphs (callables)
        _seconds(m["capture_s"], where, "capture_s")
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


_INFO_INTS = ("ordinal", "replays", "traced_replays", "pool_bytes", "bucket",
              # the memory facts of a capture (capture/meter.py), added up by the reports
              "pool_allocated_bytes", "capture_alloc_bytes", "capture_live_bytes",
              "capture_peak_bytes", "capture_segment_bytes", "static_input_bytes",
              "static_output_bytes")
_INFO_SECONDS = ("capture_s", "instantiate_s")
_INFO_STRS = ("site", "kind", "shapes")
MAX_SECONDS = 1e9  # 31 years: no capture takes longer


def _seconds(v: Any, where: str, field: str) -> float:
    import math

    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
            math.isfinite(v) and 0 <= v <= MAX_SECONDS):
        raise BundleError(f"{where}: {field} must be a number of seconds in [0, "
                          f"{MAX_SECONDS:.0e}], not {v!r:.60}")
    return float(v)


def _check_info(info: Mapping[str, Any], where: str, graph: str) -> None:
    """Graph-level facts the reports print and add up: counts and bytes are integers >= 0,
    times seconds, names strings."""
    for k in _INFO_INTS:
        if info.get(k) is not None:
            _int(info[k], where, f"{graph}: info.{k}")
    for k in _INFO_SECONDS:
        if info.get(k) is not None:
            _seconds(info[k], where, f"{graph}: info.{k}")
    grew = info.get("capture_reserved_bytes")  # reserved memory can shrink during a capture
    if grew is not None and (isinstance(grew, bool) or not isinstance(grew, int)
                             or abs(grew) > MAX_ID):
        raise BundleError(f"{where}: {graph}: info.capture_reserved_bytes must be an integer, "
                          f"not {grew!r:.60}")
    _check_by_module(info, where, graph)
    if info.get("what_if_streams") is not None:
        _check_streams_tried(info["what_if_streams"], where, graph)
    for k in _INFO_STRS:
        if info.get(k) is not None and not isinstance(info[k], str):
            raise BundleError(f"{where}: {graph}: info.{k} must be a string, not "
                              f"{type(info[k]).__name__}")
    pool = info.get("pool_id")
    if pool is not None:
        _expect(isinstance(pool, list) and 0 < len(pool) <= 4 and all(
            isinstance(x, int) and not isinstance(x, bool) and abs(x) <= MAX_ID for x in pool),
            where, f"{graph}: info.pool_id", "a list of integers")


def _check_by_module(info: Mapping[str, Any], where: str, graph: str) -> None:
    """``memory_by_module`` ({module: [allocated, held] bytes}) and ``capture_by_module_s``
    ({module: seconds})."""
    mem = info.get("memory_by_module")
    if mem is not None:
        _expect(isinstance(mem, dict), where, f"{graph}: info.memory_by_module", "an object")
        for mod, v in mem.items():
            field = f"{graph}: info.memory_by_module[{mod!r:.60}]"
            _check_module(mod, where, field)
            _expect(isinstance(v, list) and len(v) == 2, where, field,
                    "[allocated, held] bytes")
            _int(v[0], where, field + "[0]")
            _int(v[1], where, field + "[1]")
    secs = info.get("capture_by_module_s")
    if secs is not None:
        _expect(isinstance(secs, dict), where, f"{graph}: info.capture_by_module_s",
                "an object")
        for mod, v in secs.items():
            _check_module(mod, where, f"{graph}: info.capture_by_module_s")
            _seconds(v, where, f"{graph}: info.capture_by_module_s[{mod!r:.60}]")


def _check_streams_tried(tried: Any, where: str, graph: str) -> None:
    """``what_if_streams`` (``capture --try-streams``): counts, spans of a replay in ns (finite,
    >= 0, within int64), each median within the spans it is the median of."""
    field = f"{graph}: info.what_if_streams"
    bad = _misfit(tried, _STREAMS_TRIED_SPEC)
    if bad is not None:
        key, must, got = bad
        raise BundleError(f"{where}: {field}{'.' + key if key else ''} must be {must}, not "
                          f"{got!r:.60}")
    for median, spans in (("median_ns", "span_ns"), ("median_one_stream_ns",
                                                      "one_stream_span_ns")):
        v, xs = tried.get(median), tried.get(spans)
        if v is not None and xs and not min(xs) <= v <= max(xs):
            raise BundleError(f"{where}: {field}.{median} {v!r:.30} is not the median of its "
                              f"{spans} (from {min(xs)} to {max(xs)})")


def check_acyclic(edges: Any, where: str, graph: str) -> None:
    """A CUDA graph is acyclic: edges (from local id, to local id) that close a cycle are
    refused, naming a node on it (Kahn's order: the nodes it never reaches)."""
    succ: dict[int, list[int]] = {}
    indeg: dict[int, int] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        indeg[b] = indeg.get(b, 0) + 1
        indeg.setdefault(a, 0)
    ready = [v for v, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for w in succ.get(v, ()):
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    if seen < len(indeg):
        on = min(v for v, d in indeg.items() if d > 0)
        raise BundleError(f"{where}: {graph}: the edges form a cycle (through node {on}): a "
                          "CUDA graph has none; record the bundle again")


def _check_events(events: Any, where: str) -> tuple[dict[str, Any], ...]:
    """timeline.json ``events``: a few replays' records. An event ends within int64 (start
    plus duration: a sum past it wrapped to a negative span) and lasts at most
    :data:`MAX_DURATION_NS` (as durations.npy: sums of them cannot wrap either)."""
    _expect(isinstance(events, list) or events == (), where, "events", "a list")
    for i, e in enumerate(events):
        _expect(isinstance(e, dict), where, "events[]", "an object")
        for k in ("replay", "exec_node_id", "start_ns"):
            _int(e.get(k), where, f"events[{i}].{k}")
        _int(e.get("dur_ns"), where, f"events[{i}].dur_ns", MAX_DURATION_NS)
        if e["start_ns"] + e["dur_ns"] > MAX_ID:
            raise BundleError(f"{where}: events[{i}] ends past the largest time: start_ns "
                              f"{e['start_ns']} + dur_ns {e['dur_ns']} > {MAX_ID}")
    return tuple(events)


_NUM, _INT, _STR, _ANY = "num", "int", "str", "any"
_SINT = "signed int"  # an integer within int64 either side of 0
_BOOL = "bool"
_COUNT = "count"  # an integer >= 1 (runs, replays)
_AMOUNT = "amount"  # a finite number of ns, bytes or seconds >= 0, at most MAX_ID
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
    "top_kernels": [{"kernel": _STR, "?type": _STR, **_TOP}], "top_ops": [{"op": _STR, **_TOP}],
    "?unjoined_records": _INT,
    "?by_graph": {"graphs": [_STR], "rows": [{"module": _STR, "level": _INT,
                                              "per_graph_ns": [_NUM_OR_NONE]}]},
    "?ddp": [{"bucket": _ANY, "modules": [_ANY], "?bucket_bytes": _INT, "nodes": _INT,
              "median_ns": _NUM, "comm_ns": _NUM, "?overlap_pct": _NUM}],
}


_STREAMS_TRIED_SPEC: dict[str, Any] = {
    "?max_streams": _COUNT, "?streams": _INT, "?ops": _INT, "?cross_stream_waits": _INT,
    "?replays": _INT, "?median_ns": _AMOUNT, "?median_one_stream_ns": _AMOUNT,
    "?span_ns": [_AMOUNT], "?one_stream_span_ns": [_AMOUNT], "?outputs_equal": _BOOL,
    "?within_tolerance": _BOOL, "?max_abs_diff": _NUM, "?max_tolerance_ratio": _NUM,
    "?error": _STR, "?compared": {"*": {"?own_max_abs_diff": _NUM, "?max_abs_diff": _NUM}},
}


def _fits(v: Any, spec: Any) -> bool:
    """``v`` has the shape ``spec`` describes (keys with ``?`` optional, ``*`` any key)."""
    return _misfit(v, spec) is None


_MUST = {_INT: f"an integer in [0, {MAX_ID}]", _COUNT: f"an integer in [1, {MAX_ID}]",
         _NUM: "a finite number", _AMOUNT: f"a number in [0, {MAX_ID}]", _STR: "a string",
         _SINT: f"an integer in [-{MAX_ID}, {MAX_ID}]", _BOOL: "true or false"}


def _scalar_fits(v: Any, spec: str) -> bool:
    import math

    if spec == _STR:
        return isinstance(v, str)
    if spec == _BOOL:
        return isinstance(v, bool)
    if isinstance(v, bool) or not isinstance(v, int if spec in (_INT, _COUNT, _SINT)
                                             else (int, float)):
        return False
    if spec == _SINT:
        return -MAX_ID <= v <= MAX_ID
    if spec == _NUM:
        return math.isfinite(v)
    return math.isfinite(v) and (1 if spec == _COUNT else 0) <= v <= MAX_ID


def _misfit(v: Any, spec: Any, key: str = "") -> Optional[tuple[str, str, Any]]:
    """Where ``v`` first departs from ``spec``: (the key's dotted path, what it must be, what
    it is), or None where it fits. A tuple of specs: a list of that many items, each of its
    own."""
    if isinstance(spec, tuple):
        if not isinstance(v, list) or len(v) != len(spec):
            return (key, f"a list of {len(spec)} items", v)
        return next((bad for i, (x, s) in enumerate(zip(v, spec))
                     if (bad := _misfit(x, s, f"{key}[{i}]")) is not None), None)
    if spec == _ANY or (spec == _NUM_OR_NONE and v is None):
        return None
    if isinstance(spec, str):
        kind = _NUM if spec == _NUM_OR_NONE else spec
        return None if _scalar_fits(v, kind) else (key, _MUST[kind], v)
    if isinstance(spec, list):
        if not isinstance(v, list):
            return (key, "a list", v)
        return next((bad for i, x in enumerate(v)
                     if (bad := _misfit(x, spec[0], f"{key}[{i}]")) is not None), None)
    if not isinstance(v, dict):
        return (key, "an object", v)
    if "*" in spec:
        return next((bad for k, x in v.items()
                     if (bad := _misfit(x, spec["*"], _dotted(key, str(k)))) is not None), None)
    for name, sub in spec.items():
        k = name.lstrip("?")
        if v.get(k) is None:
            if name.startswith("?"):
                continue
            return (_dotted(key, k), "present", None)
        bad = _misfit(v[k], sub, _dotted(key, k))
        if bad is not None:
            return bad
    return None


def _dotted(key: str, k: str) -> str:
    return f"{key}.{k}" if key else k


def check_spec(v: Any, spec: Any, where: str) -> None:
    """Refuse ``v`` unless it has the shape ``spec``: one line naming the file and the key."""
    bad = _misfit(v, spec)
    if bad is not None:
        key, must, got = bad
        if must == "present":
            raise BundleError(f"{where}: '{key}' is missing")
        raise BundleError(f"{where}: '{key}' must be {must}, not {got!r:.60}")
