"""The budgets of one bundle's graphs and modules, and the regression budget against a
baseline, as pass/fail results (``analysis/budgets.py`` reads the file; docs/gates.md lists
every limit).

Module patterns are globs on the dotted module path, one path part per ``*``: ``L.blocks.*``
matches ``L.blocks.0`` but not ``L.blocks.0.attn``; ``**`` matches one or more whole parts
(``L.blocks.**``: every descendant of ``L.blocks``, not ``L.blocks`` itself); ``?`` and
``[...]`` as in a shell, within one part. A pattern that names a module exactly picks that
module. Graph patterns are shell globs on the whole name (``*`` crosses anything), or the
name as written (a program's graph names hold ``[96]``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ...model.bundle import Bundle
from .compare import METRICS, Comparison, compare, fails, gated
from .comparison import CompareOptions
from .stats import PROCESS_NOISE_PCT, UNDER_LIMIT_WORDS, VERDICT_WORDS, Change


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    measured: Optional[float]
    limit: Optional[float]
    message: str
    skipped: bool = False  # nothing to hold to the budget (a bucket never replayed): passes


@functools.lru_cache(maxsize=256)
def module_glob(pattern: str) -> re.Pattern[str]:
    """The regex of a module pattern (module docstring)."""
    return re.compile(r"\.".join(r"[^.]+(?:\.[^.]+)*" if part == "**" else _part(part)
                                 for part in pattern.split(".")) + r"\Z")


def _part(part: str) -> str:
    """One path part of a pattern: ``*`` and ``?`` stay inside the part, ``[...]`` is a
    character class (``[!...]`` negated), anything else is itself."""
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        close = part.find("]", i + 2) if ch == "[" else -1
        if ch == "*":
            out.append("[^.]*")
        elif ch == "?":
            out.append("[^.]")
        elif close > 0:
            body = part[i + 1:close]
            neg = body.startswith("!")
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def match_modules(names: Sequence[str], pattern: str) -> list[str]:
    if pattern in names:
        return [pattern]
    rx = module_glob(pattern)
    return [n for n in names if rx.match(n)]


def match_graphs(names: Sequence[str], pattern: str) -> list[str]:
    """The names a graph pattern picks: the one it spells exactly, else every name it matches
    as a shell glob (``[[]`` for a literal ``[``)."""
    if pattern in names:
        return [pattern]
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


# limit key -> (what, unit shown, scale from the measured unit to the limit's)
GRAPH_LIMITS: dict[str, tuple[str, str, float]] = {
    "max_span_us": ("span", "µs", 1e-3),
    "max_critical_path_us": ("critical path", "µs", 1e-3),
    "max_idle_pct": ("idle", "% of the span", 1.0),
    "max_launch_latency_us": ("launch latency", "µs", 1e-3),
    "max_kernels": ("kernels", "", 1.0),
    "max_pool_bytes": ("pool", "bytes", 1.0),
    "max_capture_ms": ("capture", "ms", 1e3),
}
MODULE_LIMITS: dict[str, tuple[str, str, float]] = {
    "max_time_us": ("GPU work", "µs per replay", 1e-3),
    "max_kernels": ("kernels", "", 1.0),
    "max_critical_path_us": ("on the critical path", "µs", 1e-3),
    "max_pool_bytes": ("held in the pool", "bytes", 1.0),
    "max_capture_ms": ("capture", "ms", 1e3),
}


def _graph_values(bundle: Bundle, o: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """limit key -> (measured value in ns / % / count / bytes / s, why missing)."""
    g = bundle.graph(o["graph"])
    info = g.info or {}
    cap = info.get("capture_s")
    if cap is None and len(bundle.graphs) == 1:  # callables: one timed window (manifest)
        cap = bundle.manifest.get("capture_s")
    return {
        "max_span_us": (o.get("span_ns"), "no replay with events"),
        "max_critical_path_us": ((o.get("critical_path") or {}).get("length_ns"),
                                 "no critical path (no timed replays)"),
        "max_idle_pct": (o.get("idle_pct"), "no replay with events"),
        "max_launch_latency_us": (o.get("launch_latency_ns"), "launch latency not recorded"),
        "max_kernels": (o.get("work_nodes"), ""),
        "max_pool_bytes": (info.get("pool_bytes"), "pool memory not recorded (capture the "
                           "bundle again with this graphscope)"),
        "max_capture_ms": (cap, "capture time not recorded (capture the bundle again with "
                           "this graphscope)"),
    }


def _result(name: str, subject: str, key: str, value: Any, missing: str, lim: float,
            table: Mapping[str, tuple[str, str, float]]) -> CheckResult:
    what, unit, scale = table[key]
    if value is None:
        return CheckResult(name, False, None, lim, f"{subject}: {missing}")
    x = float(value) * scale
    if unit == "bytes":  # as the report shows memory: "34.0 MiB"
        from ...render.fmt import fmt_bytes

        return CheckResult(name, x <= lim, x, lim,
                           f"{subject}: {what} {fmt_bytes(x)} (max {fmt_bytes(lim)})")
    shown = f"{x:.0f}" if not unit else f"{x:.1f}"
    unit_s = f" {unit}" if unit else ""
    return CheckResult(name, x <= lim, x, lim,
                       f"{subject}: {what} {shown}{unit_s} (max {lim:g}{unit_s})")


def graph_budgets(bundle: Bundle, patterns: Mapping[str, Mapping[str, float]],
                  diag: Mapping[str, Any]) -> list[CheckResult]:
    """The ``graphs`` budgets: each graph a pattern matches, against its diagnosis, info and
    node count. ``diag``: the bundle's ``diagnose``."""
    per = {o["graph"]: o for o in diag["graphs"]}
    matches = {p: match_graphs(list(per), p) for p in patterns}
    times = Counter(g for m in matches.values() for g in m)

    def label(g: str, pattern: str) -> str:
        """``graphs[<graph>]``; a graph several patterns match is named with each glob
        (``graphs[<glob>][<graph>]``): no two results share a name (JUnit's key)."""
        return f"graphs[{g}]" if times[g] == 1 or g == pattern else f"graphs[{pattern}][{g}]"

    timed_keys = {"max_span_us", "max_critical_path_us", "max_idle_pct",
                  "max_launch_latency_us"}
    out: list[CheckResult] = []
    for pattern, limits in patterns.items():
        matched = matches[pattern]
        if not matched:
            out.append(CheckResult(f"graphs[{pattern}]", False, None, None,
                                   f"no graph matches {pattern!r}"))
            continue
        needs_time = any(k in timed_keys for k in limits)
        if needs_time and not any(per[g].get("timed") for g in matched):
            out.append(CheckResult(f"graphs[{pattern}]", False, None, None,
                                   f"no graph matching {pattern!r} was replayed while traced"))
            continue
        for g in matched:
            values = _graph_values(bundle, per[g])
            keys = sorted(limits)
            if not per[g].get("timed") and needs_time:  # a ladder's bucket never replayed
                out.append(CheckResult(label(g, pattern), True, None, None,
                                       f"{g}: never replayed while traced: not checked",
                                       skipped=True))
                keys = [k for k in keys if k not in timed_keys]
            for key in keys:
                lim = limits[key]
                name = f"{label(g, pattern)}.{_short(key)}"
                value, missing = values[key]
                out.append(_result(name, g, key, value, missing, lim, GRAPH_LIMITS))
    return out


def _short(key: str) -> str:
    """A result's name for a limit: ``max_critical_path_us`` -> ``critical_path``."""
    return key.removeprefix("max_").removesuffix("_us")


def module_budgets(rows: Sequence[Mapping[str, Any]], patterns: Mapping[str, Mapping[str, float]],
                   diag: Mapping[str, Any], memory: Optional[Mapping[str, Any]],
                   timed: bool, per: str) -> list[CheckResult]:
    """The ``modules`` budgets: ``rows``: ``module_rows`` of the bundle; ``memory``: its
    ``memory_summary`` (None: not recorded)."""
    names = [r["module"] for r in rows]
    by = {r["module"]: r for r in rows}
    mem = {m["module"]: m for m in (memory or {}).get("by_module", ())}
    out: list[CheckResult] = []
    for pattern, limits in patterns.items():
        picked = match_modules(names, pattern)
        if not picked:
            out.append(CheckResult(f"modules[{pattern}]", False, None, None,
                                   f"no module matches {pattern!r}"))
        for m in picked:
            r = by[m]
            values: dict[str, tuple[Any, str]] = {
                "max_time_us": (r["median_ns"] if timed else None, "bundle has no replays"),
                "max_kernels": (r["kernels"], ""),
                "max_critical_path_us": (_on_path(diag, m) if timed else None,
                                         "bundle has no replays"),
                "max_pool_bytes": (mem[m]["held_bytes"] if m in mem else None,
                                   "memory by module not recorded"),
                "max_capture_ms": (mem[m]["capture_s"] if m in mem else None,
                                   "capture time by module not recorded"),
            }
            for key, lim in sorted(limits.items()):
                value, missing = values[key]
                res = _result(f"modules[{m}].{_short(key)}", m, key,
                              value, missing, lim, MODULE_LIMITS)
                if key == "max_time_us" and value is not None:
                    res = CheckResult(res.name, res.passed, res.measured, res.limit,
                                      f"modules[{m}]: {float(value) / 1e3:.1f} µs {per} "
                                      f"(max {lim:g} µs)")
                out.append(res)
    return out


def _on_path(diag: Mapping[str, Any], module: str) -> float:
    """``module``'s (and its sub-modules') time on the critical paths of the graphs."""
    return sum(float(m.get("ns", 0.0)) for o in diag["graphs"] if o.get("timed")
               for m in (o.get("critical_path") or {}).get("modules", ())
               if m["module"] == module or m["module"].startswith(f"{module}."))


def regression_results(baseline: Bundle, bundle: Bundle, budget: Mapping[str, Any],
                       compared: Optional[Comparison] = None) -> list[CheckResult]:
    """The ``regression`` budget: ``diff baseline bundle --fail-above max_pct --on on``
    (``on``: span by default) as one result per gated change; a change fails exactly when
    that ``diff`` does. ``compared``: that comparison, where the caller made it."""
    cmp = compared or comparison_for(baseline, bundle, budget)
    limit = cmp.limit_pct
    out = []
    for c in gated(cmp.graphs, cmp.on):
        bad = limit is not None and fails(c, limit)
        name = (f"regression[{c.graph}].{c.metric}" if c.module is None
                else f"regression[{c.graph}][{c.module}]")
        out.append(CheckResult(name, not bad, c.delta_pct, limit, change_message(c, limit)))
    if not out:  # with a limit, a gate that compared nothing fails (as diff's does)
        out.append(CheckResult("regression", limit is None, None, limit,
                               f"nothing to compare: no graph has {cmp.on} figures in both "
                               "the bundle and the baseline"))
    return out


def comparison_for(baseline: Bundle, bundle: Bundle, budget: Mapping[str, Any]) -> Comparison:
    """The comparison the ``regression`` budget holds (:func:`regression_options`)."""
    o = regression_options(budget)
    return compare(baseline, bundle, on=o.on, limit_pct=o.limit_pct, depth=o.depth,
                   module_floor_ns=o.module_floor_ns, noise_pct=o.noise_pct)


def regression_options(budget: Mapping[str, Any]) -> CompareOptions:
    """The ``regression`` budget (``max_pct``, ``on``, ``depth``, ``min_us``, ``noise_pct``)
    as the options of ``diff``'s comparison."""
    from .compare import MODULE_FLOOR_NS

    on = str(budget.get("on", "span"))
    if on not in METRICS:
        raise ValueError(on)
    depth = budget.get("depth")
    return CompareOptions(on=on, limit_pct=budget.get("max_pct"),
                          depth=None if depth is None else int(depth),
                          module_floor_ns=1e3 * float(budget.get("min_us",
                                                                 MODULE_FLOOR_NS / 1e3)),
                          noise_pct=float(budget.get("noise_pct", PROCESS_NOISE_PCT)))


def change_message(c: Change, limit: Optional[float]) -> str:
    """``forward: span +5.2% vs baseline (95% interval +4.8% … +5.6%, noise 1.2 µs; max
    +3%): regression``; a regression within the limit reads ``slower, under the limit``."""
    what = {"span": "span", "critical_path": "critical path", "work": "GPU work",
            "module": f"GPU work of {c.module}"}[c.metric]
    if c.delta_pct is None:
        change, lo, hi = (f"{c.delta_ns / 1e3:+.1f} µs", f"{c.ci_low_ns / 1e3:+.1f} µs",
                          f"{c.ci_high_ns / 1e3:+.1f} µs")
    else:
        change, lo, hi = (f"{c.delta_pct:+.1f}%", f"{c.ci_low_pct or 0.0:+.1f}%",
                          f"{c.ci_high_pct or 0.0:+.1f}%")
    lim = "" if limit is None else f"; max +{limit:g}%"
    verdict = UNDER_LIMIT_WORDS if c.under_limit else VERDICT_WORDS[c.verdict]
    return (f"{c.graph}: {what} {change} vs baseline (95% interval {lo} … {hi}, noise "
            f"{c.noise_ns / 1e3:.1f} µs{lim}): {verdict}")
