"""``diff``'s and ``check --baseline``'s one document: :func:`build_comparison` reads two
bundles once (each one's diagnosis: the kept ``diagnosis.json`` where current, else made once)
and fills every section of a :class:`~.compare.Comparison`: the gate, what changed, GPU work
per module, the diagnosis's figures, counters and eager baselines. Every view (terminal,
JSON, Markdown, JUnit) prints its fields.

One figure, one value: the span and critical path of the diagnosis section are the gate's
medians (every traced replay but a cold first one), not the diagnosis's own (the replays whose
events were kept; the critical path over median durations), so the headline and the diagnosis
table print the same value."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ...model.bundle import Bundle
from ..diff import Delta, EagerPair, delta, diagnosis_rows, module_work
from .compare import MODULE_FLOOR_NS, Comparison, compare
from .stats import PROCESS_NOISE_PCT


@dataclass(frozen=True)
class Side:
    """One bundle of a comparison and what was read beside it."""

    bundle: Bundle
    path: str  # as the user gave it (the views name the bundle by it)
    diagnosis: Optional[Mapping[str, Any]] = None  # its kept diagnosis.json, where current
    eager: Optional[Mapping[str, Any]] = None  # its eager.json (capture --eager-baseline)
    counters: Optional[Mapping[str, Any]] = None  # its counters.json


@dataclass(frozen=True)
class CompareOptions:
    on: str = "span"  # the gated metric
    limit_pct: Optional[float] = None  # --fail-above; None: verdicts only
    depth: Optional[int] = None  # module levels compared (None: all)
    noise_pct: float = PROCESS_NOISE_PCT
    module_floor_ns: float = MODULE_FLOOR_NS


def _diagnosis(side: Side) -> Mapping[str, Any]:
    if side.diagnosis is not None:
        return side.diagnosis
    from ..diagnosis import diagnose_json

    return diagnose_json(side.bundle)


def build_comparison(a: Side, b: Side, options: CompareOptions = CompareOptions()
                     ) -> Comparison:
    """Bundle ``b`` against ``a``: the one document ``diff`` and ``check --baseline`` print."""
    da, db = _diagnosis(a), _diagnosis(b)
    cmp = compare(a.bundle, b.bundle, on=options.on, limit_pct=options.limit_pct,
                  depth=options.depth, module_floor_ns=options.module_floor_ns,
                  noise_pct=options.noise_pct, diagnoses=(da, db))
    medians: dict[str, tuple[Delta, Delta]] = {}
    for g in cmp.graphs:
        cp, span = ((None, None) if c is None else (c.a.median_ns, c.b.median_ns)
                    for c in (g.critical_path, g.span))
        medians[g.graph] = (delta(*cp), delta(*span))
    return dataclasses.replace(
        cmp, a=a.path, b=b.path,
        modules_work=module_work(a.bundle, b.bundle, options.depth),
        diagnosis=diagnosis_rows(da, db, medians),
        counters=tuple(_counters(a, b)), eager=_eager(a, b, options.depth))


def _counters(a: Side, b: Side) -> list[dict[str, Any]]:
    """Per-module counter deltas where both bundles have counters (else [])."""
    if a.counters is None or b.counters is None:
        return []
    from ..counters import analyze, diff

    return diff(analyze(a.bundle, a.counters), analyze(b.bundle, b.counters))


def _eager(a: Side, b: Side, depth: Optional[int]) -> Optional[EagerPair]:
    """Both bundles' eager-vs-graph comparisons, or which side alone has a baseline."""
    if a.eager is None and b.eager is None:
        return None
    if a.eager is None or b.eager is None:  # said, not silently left out
        return EagerPair(only="a" if b.eager is None else "b")
    from ..eager import compare as eager_compare

    return EagerPair(a=eager_compare(a.bundle, a.eager, depth),
                     b=eager_compare(b.bundle, b.eager, depth))
