"""The report in the terminal: rich tables and lines, the view `graphscope report` prints. It
puts the renderers' parts together: render/table.py (the summary's tables), eager.py,
diagnosis.py, counters.py."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Console

from ..analysis import Absent, plain, present
from ..analysis.report import Report
from .fmt import Text, depth_that_fits

ANSWER_WIDTH = 80  # the answer fits one 80-column screen, whatever the tables' width


def summary_of(report: Report) -> dict[str, Any]:
    """The header and tables of ``report`` as the table renderers read them."""
    out: dict[str, Any] = {**plain(report.header), "graphs": plain(report.graphs)}
    for key in ("coverage", "modules", "top_kernels", "top_ops", "by_graph", "ddp", "memory",
                "ladder"):
        value = getattr(report, key)
        if present(value):
            out[key] = plain(value)
    return out


def print_report(report: Report, con: Console, eager_rows: Optional[int] = None) -> None:
    """Every section of ``report`` that applies, in the order a reader needs them
    (``eager_rows``: the Eager vs graph rows shown, 0 for all; None: the default)."""
    if not isinstance(report.answer, Absent):
        from .answer import answer_text

        for line in answer_text(report.answer, min(con.width, ANSWER_WIDTH)).splitlines():
            con.print(Text(line))
        con.print()
    s = summary_of(report)
    if present(report.diagnosis) and len(report.graphs) == 1:
        # one graph: the diagnosis gives its span, of the replays it says it uses
        s.pop("replay_span_median_ns", None)
    depth = report.options.depth
    if depth is None:  # a huge tree: show the levels that fit, and say so
        depth = depth_that_fits(s["modules"])
        if depth is not None:
            con.print(f"note: {len(s['modules'])} module rows; showing {depth + 1} level(s) "
                      "(pass --depth N for more)")
    groups = None if report.options.full or isinstance(report.answer, Absent) else (
        report.answer.groups)
    con.print(summary_group(s, depth, groups, report.options.ladder, con.width))
    if report.options.ladder and isinstance(report.ladder, Absent):
        con.print("Bucket ladder: not shown with --graph (it compares a site's graphs)"
                  if report.ladder.reason == "one_graph_view" else
                  "Bucket ladder: no capture site captured several graphs in this bundle")
    _print_eager(report, con, eager_rows)
    if present(report.diagnosis) and _grouped(groups):
        from .groups import print_grouped_diagnosis

        print_grouped_diagnosis(report.answer, con)
    elif not isinstance(report.diagnosis, Absent):
        from .diagnosis import print_diagnosis

        # a program's graphs say how often the program replayed each (a capture's: all alike)
        replays = {str(g["name"]): g.get("replays") for g in s["graphs"]}
        print_diagnosis(report.diagnosis, con, replays)
    elif isinstance(report.diagnosis, Absent) and report.diagnosis.reason == "too_large":
        con.print(f"Diagnosis left out: {report.diagnosis.detail}")
    if present(report.counters):
        from .counters import print_counters

        print_counters(plain(report.counters), con, depth if depth is not None else 2)


def _grouped(groups: Any) -> bool:
    from ..analysis.answer import GROUPED_FROM

    return groups is not None and any(len(g.names) >= GROUPED_FROM for g in groups)


def summary_group(summary: dict[str, Any], depth: Optional[int] = None,
                  groups: Any = None, ladder: bool = False, width: int = 100) -> Any:
    """The header and the tables of ``summary``: graphs, modules, what graphs cost, the bucket
    ladder, top kernels. ``groups`` (``analysis.answer.GraphGroup``): where a capture site
    has GROUPED_FROM graphs or more, its graphs as one row, capture cost in one line and the
    ladder only where ``ladder`` asks for it (None: every graph's row)."""
    from .memory import ladder_group, memory_group
    from .table import render

    grouped = _grouped(groups)
    graphs_part = None
    if grouped:
        from .groups import grouped_graphs_table

        graphs_part = grouped_graphs_table(groups, width)
    middle: list[Any] = []
    if summary.get("memory"):
        training = bool((summary.get("coverage") or {}).get("backward", {}).get("nodes"))
        middle.append(memory_group(summary["memory"], depth, training, grouped))
    if summary.get("ladder") and (ladder or not grouped):
        middle.append(ladder_group(summary["ladder"]))
    elif summary.get("ladder"):
        middle.append(Text(f"Bucket ladder: {len(summary['ladder'])} capture site(s); report "
                           "--ladder shows each bucket's replays, time per row, memory and "
                           "capture cost"))
    return render(summary, depth, graphs_part=graphs_part, middle=middle)


def _print_eager(report: Report, con: Console, rows: Optional[int]) -> None:
    if not any(map(present, (report.graph_coverage, report.cudagraph_trees, report.eager))):
        return
    from .eager import EAGER_ROWS, coverage_line, render_eager, tree_lines

    if present(report.graph_coverage):
        con.print(coverage_line(plain(report.graph_coverage)), highlight=False)
    if present(report.cudagraph_trees):
        for line in tree_lines(plain(report.cudagraph_trees)):
            con.print(line, highlight=False, markup=False)
    if present(report.eager):
        con.print(render_eager(plain(report.eager), EAGER_ROWS if rows is None else rows,
                               rolled=report.options.depth is not None, width=con.width))
