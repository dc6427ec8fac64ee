"""Regression gates: two bundles compared as distributions over their traced replays, with
a noise floor, a bootstrap interval and the changes that explain a regression
(docs/gates.md)."""

from .compare import METRICS, Comparison, GraphComparison, Missing, compare, fails, gated
from .explain import Explanation, KernelRef, KernelSwap, Pair, ShareChange
from .stats import REGRESSION, SPEED_UP, WITHIN_NOISE, Change, Distribution

__all__ = ["METRICS", "REGRESSION", "SPEED_UP", "WITHIN_NOISE", "Change", "Comparison",
           "Distribution", "Explanation", "GraphComparison", "KernelRef", "KernelSwap",
           "Missing", "Pair", "ShareChange", "compare", "fails", "gated"]
