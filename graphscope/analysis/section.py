"""What every report section shares: a section that does not apply to a bundle says why.

A report field holds either its section object or :class:`Absent`. ``reason`` is a short
code a program can branch on; ``detail`` says, for a person, what would make it apply (the
renderers word it; they never guess it from a missing key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, Union

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
