"""`graphscope diff`'s tables: GPU work per module in two bundles and its change, and the
diagnosis A → B (critical path, span, idle, launch). Formatting only: the numbers come from
graphscope/analysis/diff.py."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from .fmt import Text, fmt_ns, keep_figures, signed_ns


def _pct(v: float) -> str:
    colour = "red" if v > 0.5 else "green" if v < -0.5 else "white"
    return f"[{colour}]{v:+.1f}%[/{colour}]"


def diff_table(d: dict[str, Any]) -> Table:
    """`graphscope diff`: ``d`` is :func:`graphscope.analysis.diff.diff_summary` of bundles
    A and B (named in the headline table's title); times are GPU work (kernel time summed, median per replay), not spans."""
    t = Table(title="GPU work by module, A → B (median per replay)", title_justify="left")
    for col, just in (("module", "left"), ("A", "right"), ("B", "right"), ("Δ", "right"),
                      ("Δ%", "right"), ("kernels A→B", "right")):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    tot = d["total"]
    t.add_row(Text("total GPU work", style="bold"), fmt_ns(tot["a_ns"]), fmt_ns(tot["b_ns"]),
              signed_ns(tot["delta_ns"]),
              _pct(tot["delta_pct"]), f"{tot['a_kernels']}→{tot['b_kernels']}")
    for r in d["modules"]:
        name = ("  " * r["level"]) + r["module"].rsplit(".", 1)[-1] if r["level"] else r["module"]
        if r["only_in"]:
            name += f" (only in {r['only_in'].upper()})"
        dn = r["delta_ns"]
        t.add_row(Text(name), fmt_ns(r["a_ns"]), fmt_ns(r["b_ns"]),
                  signed_ns(dn),
                  _pct(r["delta_pct"]) if r["delta_pct"] is not None
                  else ("new" if r["only_in"] == "b" else "gone"),
                  f"{r['a_kernels']}→{r['b_kernels']}")
    return keep_figures(t)


def diagnosis_diff_table(diag: dict[str, Any]) -> Table:
    """``diff``'s diagnosis rows: critical path, span, idle and launch latency A → B."""
    t = Table(title="Diagnosis A → B (median per replay)", title_justify="left")
    t.add_column("graph", overflow="fold", ratio=1)
    tried = any(r.get("tried_ns", {}).get(k) is not None for r in diag["graphs"]
                for k in ("a", "b"))
    for col in ("critical path", "span", "idle", "launch", *(["tried"] if tried else [])):
        t.add_column(col, justify="right")

    def cell(p: dict[str, Any], pct: bool = False) -> str:
        f = (lambda v: f"{v:.0f}%") if pct else fmt_ns
        if p["a"] is None and p["b"] is None:
            return "-"
        s = f"{f(p['a'])} → {f(p['b'])}"
        if p["delta"] is not None:
            dv = p["delta"]
            # a change of a share is in percentage points, not a percent of it
            mag = f"{abs(dv):.0f} pp" if pct else fmt_ns(abs(dv))
            zero = mag in ("0 pp", "0 ns")  # no sign on what rounds to nothing
            s += f" ({'±' if zero else '+' if dv > 0 else '-'}{mag})"
        return s

    for r in diag["graphs"]:
        t.add_row(Text(r["graph"]), cell(r["critical_path_ns"]), cell(r["span_ns"]),
                  cell(r["idle_pct"], pct=True), cell(r["launch_latency_ns"]),
                  *([cell(r["tried_ns"])] if tried else []))
    g = diag.get("between_replays_gap_ns") or {}
    if g.get("a") is not None or g.get("b") is not None:
        t.add_row(Text("between replays (gap)"), "", cell(g), "", "", *([""] if tried else []))
    return keep_figures(t)
