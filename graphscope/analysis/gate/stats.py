"""Two sets of per-replay values compared: medians, a bootstrap interval of the difference of
the medians, a noise floor from the replays' own spread, and the verdict they support.

Definitions (docs/gates.md says the same for users)

Distribution
    ``n`` values (one per traced replay), their median, quartiles, 10th and 90th percentile
    (numpy's linear interpolation) and range.
Noise floor
    The larger of: the two sides' interdecile range (90th - 10th percentile) of the per-replay
    values (how far replays of one process spread), ``PROCESS_NOISE_PCT`` % of A's median (how
    far the medians of separate processes of one program move, which the replays of one
    process cannot show), and ``floor_ns``. Measured on the H200 (fixtures of 2026-11-30 and
    2026-12-01, tests/data): replays of one process spread by 0.1-0.3% of the span, while
    mlp_step and mlp_step_eager (one model, two processes a day apart) differ by +1.7% in
    span and +1.5% in critical path, gpt_step and gpt_step_eager by +1.0% and +0.8%;
    tests/data/gates holds 20+ A/A pairs that check the figure.
Interval
    A percentile bootstrap of median(B) - median(A): ``RESAMPLES`` resamples of each side with
    replacement, drawn from a generator seeded with ``SEED`` (so the same two bundles always
    give the same interval), and the 2.5th and 97.5th percentile of the resampled differences
    (95%).
Verdict
    ``regression``: the difference is above the noise floor and the whole interval above 0;
    ``speed_up``: below minus the floor and the whole interval below 0; else ``within_noise``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

PROCESS_NOISE_PCT = 2.0
SEED = 20261203
RESAMPLES = 2000
CONFIDENCE = 0.95

REGRESSION = "regression"
SPEED_UP = "speed_up"
WITHIN_NOISE = "within_noise"

# the verdicts in words, for every view of a comparison and for check's results (one place)
VERDICT_WORDS = {REGRESSION: "regression", SPEED_UP: "speed-up",
                 WITHIN_NOISE: "no change beyond noise"}
UNDER_LIMIT_WORDS = "slower, under the limit"  # a regression no larger than the gate's limit


@dataclass(frozen=True)
class Distribution:
    """Per-replay values of one metric in one bundle (nanoseconds)."""

    n: int
    median_ns: float
    p10_ns: float
    q1_ns: float
    q3_ns: float
    p90_ns: float
    min_ns: float
    max_ns: float


@dataclass(frozen=True)
class Change:
    """One metric of one subject (a graph, or a module of a graph) from bundle A to B."""

    metric: str  # span | critical_path | work | module
    graph: str
    module: Optional[str]  # the module, for metric "module"
    a: Distribution
    b: Distribution
    delta_ns: float  # median(B) - median(A)
    delta_pct: Optional[float]  # of median(A); None where A's median is 0
    ci_low_ns: float
    ci_high_ns: float
    ci_low_pct: Optional[float]
    ci_high_pct: Optional[float]
    noise_ns: float  # the noise floor the verdict used
    verdict: str  # regression | speed_up | within_noise
    # a regression by no more than the gate's limit (slower, but under it): never a failure
    under_limit: bool = False


def distribution(values: Sequence[float]) -> Distribution:
    x = np.asarray(values, dtype=np.float64)
    p10, q1, med, q3, p90 = np.percentile(x, [10, 25, 50, 75, 90]).tolist()
    return Distribution(n=len(x), median_ns=med, p10_ns=p10, q1_ns=q1, q3_ns=q3, p90_ns=p90,
                        min_ns=float(x.min()), max_ns=float(x.max()))


def noise_floor(a: Distribution, b: Distribution, floor_ns: float = 0.0,
                process_pct: float = PROCESS_NOISE_PCT) -> float:
    """The larger interdecile range of the two sides, at least ``process_pct`` % of A's
    median and ``floor_ns`` (module docstring)."""
    return max(a.p90_ns - a.p10_ns, b.p90_ns - b.p10_ns, process_pct / 100.0 * a.median_ns,
               floor_ns)


def bootstrap_medians(rows: np.ndarray, rng: np.random.Generator,
                      resamples: int = RESAMPLES) -> np.ndarray:
    """(subjects x resamples) medians of resamples with replacement of each row of ``rows``
    (subjects x replays); every row is resampled with the same indices."""
    n = rows.shape[1]
    idx = rng.integers(0, n, size=(resamples, n))
    out = np.empty((rows.shape[0], resamples))
    step = max(1, 4_000_000 // max(resamples * n, 1))  # bounded memory for many modules
    for i in range(0, rows.shape[0], step):
        out[i:i + step] = np.median(rows[i:i + step][:, idx], axis=2)
    return out


Row = tuple[Distribution, Distribution, float, float, float, float, str]


def compare_rows(a: np.ndarray, b: np.ndarray, floor_ns: float = 0.0,
                 process_pct: float = PROCESS_NOISE_PCT, resamples: int = RESAMPLES
                 ) -> list[Row]:
    """Per subject (row): (A, B, delta, interval low, high, noise floor, verdict) of ``a``
    (subjects x A's replays) against ``b`` (subjects x B's replays). Seeded: the same rows
    give the same intervals, whatever else is compared."""
    rng = np.random.Generator(np.random.PCG64(SEED))
    ma = bootstrap_medians(a, rng, resamples)
    mb = bootstrap_medians(b, rng, resamples)
    tail = 100.0 * (1.0 - CONFIDENCE) / 2.0
    lo, hi = np.percentile(mb - ma, [tail, 100.0 - tail], axis=1)
    out = []
    for i in range(a.shape[0]):
        da, db = distribution(a[i]), distribution(b[i])
        delta = db.median_ns - da.median_ns
        noise = noise_floor(da, db, floor_ns, process_pct)
        out.append((da, db, delta, float(lo[i]), float(hi[i]), noise,
                    verdict(delta, float(lo[i]), float(hi[i]), noise)))
    return out


def verdict(delta_ns: float, low_ns: float, high_ns: float, noise_ns: float) -> str:
    if delta_ns > noise_ns and low_ns > 0:
        return REGRESSION
    if delta_ns < -noise_ns and high_ns < 0:
        return SPEED_UP
    return WITHIN_NOISE


def pct(x: float, base: float) -> Optional[float]:
    return 100.0 * x / base if base else None
