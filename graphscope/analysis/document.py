"""The report as a JSON document (``report --json``, and the data the HTML page draws from).

Schema (docs/report-json.md): the header's fields at the top level, one key per section that
applies, ``absent`` naming each section that does not with its reason, and
``report_version``. Times are nanoseconds; where no replay was timed they are null, not 0.
"""

from __future__ import annotations

from typing import Any

from . import Absent, plain
from .report import Report
from .summary import untimed_as_null

REPORT_VERSION = 1
_SECTIONS = ("answer", "graphs", "coverage", "modules", "top_kernels", "top_ops", "by_graph", "ddp",
             "memory", "ladder", "diagnosis", "eager", "graph_coverage", "cudagraph_trees",
             "counters")


def report_json(report: Report) -> dict[str, Any]:
    """The JSON document of ``report``."""
    out: dict[str, Any] = {"report_version": REPORT_VERSION, **plain(report.header)}
    out["graphs"] = plain(report.graphs)  # the rows (the header counts them: "graphs" below)
    absent: dict[str, dict[str, str]] = {}
    for key in _SECTIONS:
        value = getattr(report, key)
        if isinstance(value, Absent):
            absent[key] = {"reason": value.reason, "detail": value.detail}
        elif key == "diagnosis":  # its own JSON form (fields left out while None)
            from .diagnosis import to_json

            out[key] = to_json(value)
        else:
            out[key] = plain(value)
    depth = report.options.depth
    if depth is not None:  # the module rows to that depth, as the tables show them
        out["modules"] = [r for r in out["modules"] if r["level"] <= depth]
        if "by_graph" in out:
            out["by_graph"] = {**out["by_graph"], "rows": [
                r for r in out["by_graph"]["rows"] if r["level"] <= depth]}
    out = untimed_as_null(out)
    out["absent"] = absent
    return out
