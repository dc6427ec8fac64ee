"""The formatting every output shares: durations, byte sizes, names made safe for a terminal.
Plain functions of numbers and strings (no rich, no model): capture's messages use them too."""

from __future__ import annotations

import re
from typing import Optional

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe(s: object) -> str:
    """A name from a bundle, made harmless for a terminal: control characters (escape
    sequences included) shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(s))


def fmt_ns(ns: Optional[float]) -> str:
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def svg_key(rank: Optional[int], graph: str) -> str:
    """The key of one graph's drawings in the HTML report (``render.dot.graph_svgs`` draws
    them, ``render.html`` refers to them)."""
    import json

    return json.dumps([rank, graph])
