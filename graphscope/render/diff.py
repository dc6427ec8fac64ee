"""`graphscope diff`'s tables: GPU work per module in two bundles and its change, and the
diagnosis A → B (critical path, span, idle, launch). Formatting only: the rows are sections of
the comparison (``analysis/diff.py``, ``analysis/gate/comparison.py``)."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Group
from rich.table import Table

from ..analysis.diff import DiagnosisDeltas, ModuleRow, ModuleWork
from .fmt import MAX_ROWS, Text, fmt_ns, keep_figures, signed_ns


def _pct(v: float) -> str:
    colour = "red" if v > 0.5 else "green" if v < -0.5 else "white"
    return f"[{colour}]{v:+.1f}%[/{colour}]"


def shown_depth(rows: tuple[ModuleRow, ...], max_rows: int = MAX_ROWS) -> Optional[int]:
    """The deepest module level whose rows fit in ``max_rows``, where the whole tree does
    not; None where it does (or nothing fits)."""
    levels = sorted({r.level for r in rows})
    fits = [lv for lv in levels if sum(1 for r in rows if r.level <= lv) <= max_rows]
    return fits[-1] if fits and fits[-1] < levels[-1] else None


def module_section(work: ModuleWork, depth_given: bool) -> Group:
    """The module table; without ``--depth`` (``depth_given`` False) a huge tree shows the
    levels that fit, as ``report`` does, and says so."""
    parts: list[Any] = []
    rows = work.modules
    shown = None if depth_given else shown_depth(rows)
    if shown is not None:
        parts.append(Text(f"note: {len(rows)} module rows; showing {shown + 1} level(s) (pass "
                          "--depth N for more; --on module gates every module)"))
        rows = tuple(r for r in rows if r.level <= shown)
    parts.append(diff_table(work, rows))
    return Group(*parts)


def diff_table(work: ModuleWork, rows: Optional[tuple[ModuleRow, ...]] = None) -> Table:
    """GPU work per module of bundles A and B (named in the headline table's title): kernel
    time summed, median per replay, not spans; ``rows``: the modules shown (default: all)."""
    t = Table(title="GPU work by module, A → B (median per replay)", title_justify="left")
    t.add_column("module", overflow="fold")
    for col in ("A", "B", "Δ", "Δ%", "kernels"):
        t.add_column(col, justify="right", no_wrap=True)
    tot = work.total
    t.add_row(Text("total GPU work", style="bold"), fmt_ns(tot.a_ns), fmt_ns(tot.b_ns),
              signed_ns(tot.delta_ns), _pct(tot.delta_pct), f"{tot.a_kernels}→{tot.b_kernels}")
    for r in work.modules if rows is None else rows:
        name = ("  " * r.level) + r.module.rsplit(".", 1)[-1] if r.level else r.module
        if r.only_in:
            name += f" (only in {r.only_in.upper()})"
        t.add_row(Text(name), fmt_ns(r.a_ns), fmt_ns(r.b_ns), signed_ns(r.delta_ns),
                  _pct(r.delta_pct) if r.delta_pct is not None
                  else ("new" if r.only_in == "b" else "gone"),
                  f"{r.a_kernels}→{r.b_kernels}")
    return keep_figures(t)


def _cell(a: Optional[float], b: Optional[float], d: Optional[float], pct: bool = False
          ) -> str:
    """``2.1 µs → 2.2 µs (+128 ns)``; a share's change in percentage points."""
    f = (lambda v: "-" if v is None else f"{v:.0f}%") if pct else fmt_ns
    if a is None and b is None:
        return "-"
    s = f"{f(a)} → {f(b)}"
    if d is not None:
        mag = f"{abs(d):.0f} pp" if pct else fmt_ns(abs(d))
        zero = mag in ("0 pp", "0 ns")  # no sign on what rounds to nothing
        s += f" ({'±' if zero else '+' if d > 0 else '-'}{mag})"
    return s


def diagnosis_diff_table(diag: DiagnosisDeltas) -> Table:
    """``diff``'s diagnosis rows, one figure a row (each cell ``A → B (change)``, never split):
    critical path and span (the headline's medians), idle, launch latency, the span measured
    over more streams where a side has one, and the gap between replays."""
    t = Table(title="Diagnosis A → B (median per replay)", title_justify="left")
    t.add_column("graph", overflow="fold")
    t.add_column("figure", no_wrap=True)
    t.add_column("A → B (change)", justify="right", no_wrap=True)
    for r in diag.graphs:
        figures = [("critical path", r.critical_path_ns, False), ("span", r.span_ns, False),
                   ("idle", r.idle_pct, True), ("launch", r.launch_latency_ns, False)]
        if r.tried_ns.a is not None or r.tried_ns.b is not None:
            figures.append(("tried", r.tried_ns, False))
        for i, (what, p, pct) in enumerate(figures):
            t.add_row(Text(r.graph if i == 0 else ""), what, _cell(p.a, p.b, p.delta, pct))
    g = diag.between_replays_gap_ns
    if g.a is not None or g.b is not None:
        t.add_row(Text("between replays"), "gap", _cell(g.a, g.b, g.delta))
    return keep_figures(t)
