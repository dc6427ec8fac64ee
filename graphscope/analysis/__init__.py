"""Numbers computed from a loaded bundle: pure functions of the Graph model (no torch, no
extension, no output formatting). report.py (the report of a bundle, built once), summary.py
(module tree, top kernels, coverage, graphs), ddp.py (collectives, DDP buckets), ranks.py (the
cross-rank merge), diff.py, budgets.py, diagnosis/ (critical path, gaps, stream-order
serialization, the what-if, findings).

Here, what every report section shares (it imports nothing of graphscope, so any module of the
package can use it): a section that does not apply to a bundle says why. A report field holds
either its section object or :class:`Absent`. ``reason`` is a short code a program can branch
on; ``detail`` says, for a person, what would make it apply (the renderers word it; they never
guess it from a missing key).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar, Union

T = TypeVar("T")


@dataclass(frozen=True)
class Absent:
    """A section that does not apply to this bundle (or was not asked for), and why."""

    reason: str
    detail: str = ""


# A report field: the section, or why it is not there.
Maybe = Union[T, Absent]


def present(section: object) -> bool:
    """Whether a report field holds a section (not :class:`Absent`)."""
    return not isinstance(section, Absent)


def plain(value: Any) -> Any:
    """``value`` as JSON holds it: dataclasses become dicts and tuples lists, down to the
    rows, which sections keep as JSON's own dicts and lists already (returned as they are, not
    copied: a 100,000-graph report is walked once per view)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if not isinstance(value, (dict, list)) and hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    return value
