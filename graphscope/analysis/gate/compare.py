"""Bundle B against bundle A, graph by graph (graphs matched by name): span, critical path,
GPU work and GPU work per module as distributions over the traced replays (``stats.py``),
what changed inside each graph (``explain.py``), and the gate: a change fails it when it is
a regression (beyond the noise, ``stats.py``) by more than the limit on the gated metric.
A speed-up never fails."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ...model.bundle import Bundle
from ..diff import DiagnosisDeltas, EagerPair, ModuleWork
from ..stats import tree_key
from .changed import GraphChanges, what_changed
from .explain import Explanation, explain
from .samples import GraphSamples, graph_samples
from .stats import (
    CONFIDENCE,
    PROCESS_NOISE_PCT,
    REGRESSION,
    RESAMPLES,
    SEED,
    SPEED_UP,
    WITHIN_NOISE,
    Change,
    compare_rows,
    pct,
    verdict,
)

METRICS = ("span", "critical_path", "work", "module")
GRAPH_METRICS = METRICS[:3]
# a module's GPU work moving by less than this is noise whatever its spread (a 6 µs leaf
# module moves by 0.4 µs between two recordings of one model on the H200)
MODULE_FLOOR_NS = 1_000.0

FAIL = "fail"
NOT_COMPARED = "not_compared"


@dataclass(frozen=True)
class Missing:
    """A metric not compared for a graph, and why (``no_samples_a``/``no_samples_b``: that
    bundle has no per-replay values of it)."""

    metric: str
    reason: str


@dataclass(frozen=True)
class GraphComparison:
    graph: str
    span: Optional[Change]
    critical_path: Optional[Change]
    work: Optional[Change]
    modules: tuple[Change, ...]  # modules of the graph in both bundles, tree order
    modules_only_in_a: tuple[str, ...]
    modules_only_in_b: tuple[str, ...]
    missing: tuple[Missing, ...]
    explanation: Explanation
    # replays left out of A's and B's samples: a cold first replay (the diagnosis's selection)
    set_aside_a: tuple[int, ...] = ()
    set_aside_b: tuple[int, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """Everything ``diff`` and ``check --baseline`` say about B against A: the gate (built by
    :func:`compare`) and the sections below it (filled by ``comparison.build_comparison``);
    every view prints these fields and computes nothing."""

    a: str
    b: str
    on: str  # the gated metric
    limit_pct: Optional[float]  # None: no gate, only verdicts
    graphs: tuple[GraphComparison, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    failures: tuple[Change, ...]  # gated changes that fail, worst first
    verdict: str  # fail | regression | speed_up | within_noise | not_compared
    failed: bool  # a failure, or a gate (limit_pct) with nothing to compare
    noise_pct: float = PROCESS_NOISE_PCT  # the least noise, in % of A's median
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    seed: int = SEED
    named: Optional[Change] = None  # the gated change the verdict line names
    changed: tuple[GraphChanges, ...] = ()  # what changed, in the graphs worth explaining
    modules_work: Optional[ModuleWork] = None  # GPU work per module (diff's detail)
    diagnosis: Optional[DiagnosisDeltas] = None  # the diagnosis's figures A → B
    counters: tuple[Mapping[str, Any], ...] = ()  # per-module counter deltas, where both have
    eager: Optional[EagerPair] = None  # the eager baselines, where either has one


def _changes(metric: str, graph: str, names: Sequence[Optional[str]],
             xa: Sequence[Sequence[float]], xb: Sequence[Sequence[float]],
             floor_ns: float, noise_pct: float, limit_pct: Optional[float]) -> list[Change]:
    """One Change per subject: rows of equal length per side (one graph's replays); a
    regression no larger than ``limit_pct`` is marked ``under_limit``."""
    if not names:
        return []
    rows = compare_rows(np.asarray(xa, np.float64), np.asarray(xb, np.float64), floor_ns,
                        noise_pct)
    out = []
    for name, (da, db, delta, lo, hi, noise, v) in zip(names, rows):
        base = da.median_ns
        p = pct(delta, base)
        under = limit_pct is not None and v == REGRESSION and p is not None and p <= limit_pct
        out.append(Change(metric, graph, name, da, db, delta, p, lo, hi,
                          pct(lo, base), pct(hi, base), noise, v, under))
    return out


def _graph(name: str, sa: GraphSamples, sb: GraphSamples, ex: Explanation,
           module_floor_ns: float, noise_pct: float, limit_pct: Optional[float]
           ) -> GraphComparison:
    one: dict[str, Optional[Change]] = {}
    missing = []
    for metric in GRAPH_METRICS:
        xa, xb = getattr(sa, f"{metric}_ns"), getattr(sb, f"{metric}_ns")
        if not xa or not xb:
            one[metric] = None
            missing.append(Missing(metric, "no_samples_a" if not xa else "no_samples_b"))
            continue
        c = _changes(metric, name, [None], [xa], [xb], 0.0, noise_pct, limit_pct)[0]
        one[metric] = _as_figures(c, sa.figures.get(metric), sb.figures.get(metric),
                                  limit_pct)
    both = sorted((m for m in sa.modules if m in sb.modules), key=tree_key)
    mods = _changes("module", name, both, [sa.modules[m] for m in both],
                    [sb.modules[m] for m in both], module_floor_ns, noise_pct, limit_pct)
    return GraphComparison(
        graph=name, span=one["span"], critical_path=one["critical_path"], work=one["work"],
        modules=tuple(mods),
        modules_only_in_a=tuple(sorted((m for m in sa.modules if m not in sb.modules),
                                       key=tree_key)),
        modules_only_in_b=tuple(sorted((m for m in sb.modules if m not in sa.modules),
                                       key=tree_key)),
        missing=tuple(missing), explanation=ex, set_aside_a=sa.set_aside,
        set_aside_b=sb.set_aside)


def _as_figures(c: Change, fa: Optional[float], fb: Optional[float],
                limit_pct: Optional[float]) -> Change:
    """``c`` with A's and B's values the graphs' figures (their diagnoses': one value for one
    figure in every command); its interval the samples' (their spread) moved by the figures'
    difference less the samples', so that it holds the difference it is printed beside; the
    noise the samples'; the verdict judged again on the figures' difference."""
    if fa is None or fb is None:
        return c
    delta = fb - fa
    shift = delta - c.delta_ns
    lo, hi = c.ci_low_ns + shift, c.ci_high_ns + shift
    p = pct(delta, fa)
    v = verdict(delta, lo, hi, c.noise_ns)
    return dataclasses.replace(
        c, a=dataclasses.replace(c.a, median_ns=fa), b=dataclasses.replace(c.b, median_ns=fb),
        delta_ns=delta, delta_pct=p, ci_low_ns=lo, ci_high_ns=hi, ci_low_pct=pct(lo, fa),
        ci_high_pct=pct(hi, fa), verdict=v,
        under_limit=limit_pct is not None and v == REGRESSION and p is not None
        and p <= limit_pct)


def gated(graphs: Sequence[GraphComparison], on: str) -> list[Change]:
    """The changes the gate holds to its limit: each graph's ``on`` metric, or every module
    in both bundles for ``on="module"``."""
    if on == "module":
        return [c for g in graphs for c in g.modules]
    return [c for g in graphs if (c := getattr(g, on)) is not None]


def fails(c: Change, limit_pct: float) -> bool:
    """A regression beyond the noise and by more than ``limit_pct`` % (a speed-up never)."""
    return c.verdict == REGRESSION and c.delta_pct is not None and c.delta_pct > limit_pct


def overall(changes: Sequence[Change], failures: Sequence[Change]) -> str:
    if failures:
        return FAIL
    if not changes:
        return NOT_COMPARED
    for v in (REGRESSION, SPEED_UP):
        if any(c.verdict == v for c in changes):
            return v
    return WITHIN_NOISE


def compare(a: Bundle, b: Bundle, on: str = "span", limit_pct: Optional[float] = None,
            depth: Optional[int] = None, module_floor_ns: float = MODULE_FLOOR_NS,
            noise_pct: float = PROCESS_NOISE_PCT,
            diagnoses: Optional[tuple[Mapping[str, Any], Mapping[str, Any]]] = None
            ) -> Comparison:
    """B against A. ``on``: the gated metric (``METRICS``); ``limit_pct``: the gate's limit
    (None: verdicts only); ``depth``: module levels compared (None: all); ``module_floor_ns``
    and ``noise_pct``: the least noise of a module, and of any change in % of A's median
    (``stats.py``); ``diagnoses``:
    both bundles' :func:`~graphscope.analysis.diagnosis.diagnose`, where the caller has them."""
    if on not in METRICS:
        raise ValueError(f"on must be one of {', '.join(METRICS)}, not {on!r}")
    if diagnoses is None:
        from ..diagnosis import diagnose_json

        diagnoses = (diagnose_json(a), diagnose_json(b))
    dga = {o["graph"]: o for o in diagnoses[0]["graphs"]}
    dgb = {o["graph"]: o for o in diagnoses[1]["graphs"]}
    names_b = set(b.graph_names)
    graphs = []
    for g in a.graphs:
        if g.name not in names_b:
            continue
        h = b.graph(g.name)
        da, db = dga.get(g.name, {}), dgb.get(h.name, {})
        graphs.append(_graph(g.name, graph_samples(a, g, da, depth),
                             graph_samples(b, h, db, depth), explain(g, h, da, db),
                             module_floor_ns, noise_pct, limit_pct))
    changes = gated(graphs, on)
    failures = ([] if limit_pct is None else
                sorted((c for c in changes if fails(c, limit_pct)),
                       key=lambda c: -(c.delta_pct or 0.0)))
    return Comparison(
        a=a.path, b=b.path, on=on, limit_pct=limit_pct, graphs=tuple(graphs),
        only_in_a=tuple(n for n in a.graph_names if n not in names_b),
        only_in_b=tuple(n for n in b.graph_names if n not in set(a.graph_names)),
        failures=tuple(failures), verdict=overall(changes, failures),
        # a gate that compared nothing fails: a renamed graph must not pass it in silence
        failed=bool(failures) or (limit_pct is not None and not changes), noise_pct=noise_pct,
        named=named(changes, failures),
        changed=tuple(GraphChanges(g.graph, what_changed(g.explanation, g.modules,
                                                         module_floor_ns, noise_pct))
                      for g in explained(graphs, failures)))


def named(changes: Sequence[Change], failures: Sequence[Change]) -> Optional[Change]:
    """The gated change the verdict line names: the worst failure, else the largest
    regression, else the largest speed-up, else the largest move."""
    if failures:
        return failures[0]
    if not changes:
        return None
    for v, sign in ((REGRESSION, -1.0), (SPEED_UP, 1.0)):
        hits = [c for c in changes if c.verdict == v]
        if hits:
            return min(hits, key=lambda c: sign * (c.delta_pct or 0.0))
    return max(changes, key=lambda c: abs(c.delta_pct or 0.0))


def explained(graphs: Sequence[GraphComparison], failures: Sequence[Change]
              ) -> list[GraphComparison]:
    """The graphs worth explaining: a failure, or span or critical path beyond the noise."""
    failing = {c.graph for c in failures}
    return [g for g in graphs if g.graph in failing or any(
        c is not None and c.verdict != WITHIN_NOISE for c in (g.span, g.critical_path))]
