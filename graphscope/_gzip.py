"""Which gzip implementation annotate-trace uses (and `graphscope doctor` reports)."""

from __future__ import annotations

import os
from typing import Any


def igzip() -> Any:
    """python-isal's igzip where it is installed (a dependency on the platforms it has wheels
    for): the same gzip format through Intel's ISA-L, ~4x zlib's speed at level 1 and faster
    to inflate. None without it, or with GRAPHSCOPE_ZLIB=1."""
    if os.environ.get("GRAPHSCOPE_ZLIB") == "1":
        return None
    try:
        from isal import igzip
    except ImportError:
        return None
    return igzip
