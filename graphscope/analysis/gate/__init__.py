"""Regression gates: two bundles compared as distributions over their traced replays, with
a noise floor, a bootstrap interval and the changes that explain a regression
(docs/gates.md); ``build_comparison``: the one document ``diff`` and ``check --baseline``
print."""

from .changed import GraphChanges, Moved
from .compare import METRICS, Comparison, GraphComparison, Missing, compare, fails, gated
from .comparison import CompareOptions, Side, build_comparison
from .explain import Explanation, KernelRef, KernelSwap, Pair, ShareChange
from .stats import REGRESSION, SPEED_UP, WITHIN_NOISE, Change, Distribution

__all__ = ["METRICS", "REGRESSION", "SPEED_UP", "WITHIN_NOISE", "Change", "CompareOptions",
           "Comparison", "Distribution", "Explanation", "GraphChanges", "GraphComparison",
           "KernelRef", "KernelSwap", "Missing", "Moved", "Pair", "ShareChange", "Side",
           "build_comparison", "compare", "fails", "gated"]
