"""Budgets for CI smoke runs: load a budgets YAML and check a bundle against it (the JUnit XML
of the results is render/junit.py; every key is documented in docs/gates.md).

budgets.yaml::

    capture:                      # optional: options of the capture `check` runs
      mode: step
      replays: 20
    min_coverage:                 # % of kernel/memcpy/memset nodes attributed to a module
      forward: 100
      backward: 99.5
    total:
      max_time_us: 800            # median graph work per replay
      max_kernels: 300
    graphs:                       # shell globs on graph names (or a name as written, its
                                  # bucket's "[96]" no character class); every match must pass
      "*":
        max_span_us: 600            # replay span: first node start -> last node end (median)
        max_critical_path_us: 500   # critical path through the DAG (median durations)
        max_idle_pct: 20            # time inside the span with no node running
        max_launch_latency_us: 40   # cudaGraphLaunch call -> first node (when recorded)
        max_kernels: 300            # kernel, memcpy and memset nodes
        max_pool_bytes: 536870912   # the graph's memory pool, reserved at the end of capture
        max_capture_ms: 50          # the capture's wall time
    modules:                      # globs on module paths: "L.blocks.*" the children of
                                  # L.blocks, "L.blocks.**" all its descendants (docs/gates.md)
      "L.blocks.*":
        max_time_us: 250            # GPU work per replay (median, sub-modules included)
        max_kernels: 60
        max_critical_path_us: 120   # time on the graphs' critical paths
        max_pool_bytes: 1048576     # bytes its allocations still hold in the pool
        max_capture_ms: 5           # capture time spent in its scope
    regression:                   # against --baseline BUNDLE: the gate of `diff --fail-above`
      max_pct: 5                  # worse by more than this and more than the noise: fail
      on: span                    # span | critical_path | work | module
      noise_pct: 2                # the least noise: medians of two processes move this much
      min_us: 1                   # on: module: increases under this are noise (1)
      depth: 2                    # on: module: modules this deep below the root (all)
    eager:                        # needs capture: {eager_baseline: true} (analysis/eager.py)
      min_speedup: 1.2            # eager step wall time / graph replay wall time
      min_gpu_speedup: 0.95       # eager GPU kernel time / graph GPU kernel time
    graph_coverage:               # GPU time inside graphs in the traced windows
      min_pct: 99
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from .._errors import ConfigError
from ..model.bundle import Bundle
from ..model.yamlfile import read_yaml
from .gate.checks import (
    GRAPH_LIMITS,
    MODULE_LIMITS,
    CheckResult,
    graph_budgets,
    module_budgets,
    regression_results,
)
from .gate.compare import METRICS
from .summary import coverage, module_rows, summarize

__all__ = ["Budgets", "CheckResult", "evaluate", "load_budgets"]

_LIMITS: dict[str, type] = {"max_time_us": float, "max_kernels": int}
_INT_LIMITS = ("max_kernels", "max_pool_bytes")
_PATTERN_LIMITS: dict[str, dict[str, type]] = {
    "modules": {k: int if k in _INT_LIMITS else float for k in MODULE_LIMITS},
    "graphs": {k: int if k in _INT_LIMITS else float for k in GRAPH_LIMITS}}
_SCHEMA: dict[str, Any] = {
    "capture": {"mode": str, "replays": int, "warmup": int, "depth": int, "entry": str,
                "eager_baseline": bool},
    "min_coverage": {"forward": float, "backward": float},
    "total": _LIMITS,
    "modules": "patterns",
    "regression": {"max_pct": float, "on": str, "noise_pct": float, "min_us": float,
                   "depth": int},
    "graphs": "patterns",
    "eager": {"min_speedup": float, "min_gpu_speedup": float},
    "graph_coverage": {"min_pct": float},
}


@dataclass(frozen=True)
class Budgets:
    path: str
    capture: dict[str, Any] = field(default_factory=dict)
    capture_lines: dict[str, int] = field(default_factory=dict)  # each capture option's line
    min_coverage: dict[str, float] = field(default_factory=dict)
    total: dict[str, float] = field(default_factory=dict)
    modules: dict[str, dict[str, float]] = field(default_factory=dict)
    regression: dict[str, Any] = field(default_factory=dict)
    graphs: dict[str, dict[str, float]] = field(default_factory=dict)
    eager: dict[str, float] = field(default_factory=dict)
    graph_coverage: dict[str, float] = field(default_factory=dict)


def _type_ok(value: Any, t: type) -> bool:
    if t is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, t)


_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _coerce(value: Any, t: type, where: str, name: str) -> Any:
    """A limit's value: YAML 1.1 reads ``1e3`` as a string, so numeric text is a number;
    numbers must be finite and >= 0 (coverage at most 100)."""
    if t in (int, float) and isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
        value = float(value)
    if t is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not _type_ok(value, t):
        raise ConfigError(f"{where}: '{name}' must be {'a number' if t is float else t.__name__}"
                          f", not {type(value).__name__}")
    if t in (int, float):
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{where}: '{name}' must be a finite number >= 0, not {value}")
        if name.startswith(("min_coverage.", "graph_coverage.")) and value > 100:
            raise ConfigError(f"{where}: '{name}' is a percentage: at most 100, not {value}")
    if name == "regression.on" and value not in METRICS:
        raise ConfigError(f"{where}: '{name}' must be one of {', '.join(METRICS)}, not "
                          f"{value!r}")
    return value


def load_budgets(path: str) -> Budgets:
    """Parse and validate; errors name the file, line and key."""
    import yaml

    root, data = read_yaml(path, "budgets")
    if root is None:
        raise ConfigError(f"{path}: empty budgets file")
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{path}:1: the top level must be a mapping")
    lines = {k.value: (k.start_mark.line + 1, v) for k, v in root.value}
    capture_lines: dict[str, int] = {}

    def where(node: Any) -> str:
        return f"{path}:{node.start_mark.line + 1}"

    for key, (line, node) in lines.items():
        if key not in _SCHEMA:
            raise ConfigError(f"{path}:{line}: unknown key {key!r} "
                              f"(known: {', '.join(sorted(_SCHEMA))})")
        spec = _SCHEMA[key]
        if not isinstance(node, yaml.MappingNode):
            raise ConfigError(f"{path}:{line}: {key!r} must be a mapping")
        entries = [(k, v) for k, v in node.value]
        if spec == "patterns":
            for pk, _ in entries:
                if pk.tag != "tag:yaml.org,2002:str":  # 1: or null: reads as a number / None
                    raise ConfigError(f"{where(pk)}: {key.rstrip('s')} pattern {pk.value!r} "
                                      "must be text: quote it")
            allowed = _PATTERN_LIMITS[key]
            for pk, pv in entries:
                if not isinstance(pv, yaml.MappingNode):
                    raise ConfigError(f"{where(pk)}: {key}.{pk.value!r} must be a mapping")
                for lk, _ in pv.value:
                    if lk.value not in allowed:
                        raise ConfigError(f"{where(lk)}: unknown key "
                                          f"'{key}.{pk.value}.{lk.value}' (known: "
                                          f"{', '.join(sorted(allowed))})")
                limits = data[key][pk.value]
                for lk, lv in limits.items():
                    limits[lk] = _coerce(lv, allowed[lk], where(pk), f"{key}.{pk.value}.{lk}")
            continue
        for k, _ in entries:
            if k.value not in spec:
                raise ConfigError(f"{where(k)}: unknown key '{key}.{k.value}' "
                                  f"(known: {', '.join(sorted(spec))})")
        # keys as written: YAML 1.1 reads a bare ``on`` (regression.on) as true
        data[key] = {k.value: v for (k, _), v in zip(entries, data[key].values())}
        for k, v in data[key].items():
            data[key][k] = _coerce(v, spec[k], f"{path}:{line}", f"{key}.{k}")
        if key == "capture":  # each option's line, for the capture's own check of its value
            capture_lines.update({k.value: k.start_mark.line + 1 for k, _ in entries})
    return Budgets(capture_lines=capture_lines, path=path, **{k: dict(v) for k, v in data.items()})


def evaluate(bundle: Bundle, budgets: Budgets, baseline: Optional[Bundle] = None,
             eager: Optional[dict[str, Any]] = None,
             outside: Optional[dict[str, Any]] = None,
             memory: Optional[dict[str, Any]] = None,
             compared: Optional[Any] = None) -> list[CheckResult]:
    """Every budget as a pass/fail result (capture success is the caller's first result).
    ``eager``: the bundle's eager.json; ``outside``: its timeline's outside-graph fields;
    ``memory``: its ``memory_summary`` (made here when None); ``compared``: the regression
    budget's comparison with ``baseline``, where the caller made it."""
    out: list[CheckResult] = []
    cov = coverage(bundle)
    for phase, minimum in sorted(budgets.min_coverage.items()):
        if not cov[phase]["nodes"]:  # nothing to cover: the budget cannot hold (a lost backward)
            out.append(CheckResult(f"coverage.{phase}", False, None, minimum,
                                   f"no {phase} nodes in the bundle: {phase} coverage cannot "
                                   f"be checked (min {minimum}%; drop the budget for a bundle "
                                   f"without {phase})"))
            continue
        got = cov[phase]["pct"]
        out.append(CheckResult(f"coverage.{phase}", got >= minimum, got, minimum,
                               f"{phase} module coverage {got:.2f}% (min {minimum}%)"))
    s = summarize(bundle)
    # a bundle of several graphs: one replay of each traced graph, summed (the report's header)
    traced = len(bundle.graphs) - s.get("untraced_graphs", 0)
    per = ("per replay" if len(bundle.graphs) <= 1 else
           f"per replay of each of the {traced} traced graphs, summed")
    if budgets.total:
        out += _limits("total", s["replay_kernel_median_ns"], s["work_nodes"], budgets.total,
                       bundle.has_timings, per)
    diag: Optional[dict[str, Any]] = None
    if budgets.graphs or budgets.modules:
        from .diagnosis import diagnose_json

        diag = diagnose_json(bundle)
    if budgets.modules:
        assert diag is not None
        if memory is None:
            from .memory import memory_summary

            memory = memory_summary(bundle)
        out += module_budgets(module_rows(bundle), budgets.modules, diag, memory,
                              bundle.has_timings, per)
    if budgets.graphs:
        assert diag is not None
        out += graph_budgets(bundle, budgets.graphs, diag)
    if baseline is None and "max_pct" in budgets.regression:
        out.append(CheckResult("regression", False, None, budgets.regression["max_pct"],
                               "no baseline to compare with: pass --baseline BUNDLE"))
    if baseline is not None and ("max_pct" in budgets.regression or compared is not None):
        out += regression_results(baseline, bundle, budgets.regression, compared)
    out += eager_budgets(bundle, budgets, eager, outside or {})
    return out


def _limits(name: str, time_ns: float, kernels: int, limits: dict[str, float], timed: bool,
            per: str = "per replay") -> list[CheckResult]:
    out = []
    if "max_time_us" in limits:
        lim = limits["max_time_us"]
        if not timed:
            out.append(CheckResult(f"{name}.time", False, None, lim, "bundle has no replays"))
        else:
            us = time_ns / 1000.0
            out.append(CheckResult(f"{name}.time", us <= lim, us, lim,
                                   f"{name}: {us:.1f} µs {per} (max {lim} µs)"))
    if "max_kernels" in limits:
        lim = limits["max_kernels"]
        out.append(CheckResult(f"{name}.kernels", kernels <= lim, kernels, lim,
                               f"{name}: {kernels} kernels (max {int(lim)})"))
    return out


def eager_budgets(bundle: Bundle, budgets: Budgets, eager: Optional[dict[str, Any]],
                  outside: dict[str, Any]) -> list[CheckResult]:
    """``eager`` (speed-up graphing bought) and ``graph_coverage`` budgets."""
    from .eager import compare, graph_coverage

    out: list[CheckResult] = []
    if budgets.eager:
        step = compare(bundle, eager)["step"] if eager is not None else None
        for key, what in (("min_speedup", "speedup"), ("min_gpu_speedup", "gpu_speedup")):
            if key not in budgets.eager:
                continue
            lim = budgets.eager[key]
            v = step[what] if step is not None else None
            if v is None:
                why = ("no eager baseline in the bundle (record one with graphscope capture "
                       "--eager-baseline, or check the model file, not its bundle, with "
                       "capture: {eager_baseline: true} in the budgets file)"
                       if step is None else "no graph time to compare with")
                out.append(CheckResult(f"eager.{what}", False, None, lim, why))
                continue
            label = "wall-time" if what == "speedup" else "GPU-time"
            out.append(CheckResult(f"eager.{what}", v >= lim, v, lim,
                                   f"graph vs eager {label} speed-up {v:.2f}x (min {lim}x)"))
    if "min_pct" in budgets.graph_coverage:
        lim = budgets.graph_coverage["min_pct"]
        cov = graph_coverage(bundle, outside)
        if cov is None:
            out.append(CheckResult("graph_coverage", False, None, lim,
                                   "not measured: the bundle predates the record of GPU time "
                                   "outside graphs (capture it again)"))
        else:
            out.append(CheckResult("graph_coverage", cov["pct"] >= lim, cov["pct"], lim,
                                   f"{cov['pct']:.2f}% of traced GPU time in graphs "
                                   f"(min {lim}%)"))
    return out
