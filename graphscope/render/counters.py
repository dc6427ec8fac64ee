"""The Counters section (PM sampling per module and phase: DRAM, SM, tensor pipe, warps and
a roofline verdict) and `graphscope diff`'s counter deltas. Formatting only: the numbers come
from graphscope/analysis/counters.py."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Console
from rich.table import Table

from .fmt import Text, fmt_ns, keep_figures


def _cpct(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.0f}%"


def counters_table(c: dict[str, Any], depth: Optional[int] = 2) -> Table:
    """The Counters section: ``c`` is :func:`graphscope.analysis.counters.analyze`'s result.
    Roofline position of a row: DRAM % of peak against SM active %."""
    n = c.get("replays")
    t = Table(title=Text("Counters (PM sampling over {} dedicated replay{}, {} µs samples)".format(
        n, "" if n == 1 else "s", (c.get("interval_ns") or 0) // 1000)), title_justify="left")
    for col, just in (("module / phase", "left"), ("time", "right"), ("DRAM", "right"),
                      ("GB/s", "right"), ("SM", "right"), ("tensor", "right"),
                      ("warps", "right"), ("verdict", "left")):
        t.add_column(col, justify=just, no_wrap=col != "module / phase")  # type: ignore[arg-type]

    def row(name: str, r: dict[str, Any]) -> None:
        mark = " ~" if r.get("approximate") else ""
        gbps = r.get("dram_GBps")
        t.add_row(Text(name), fmt_ns(r["time_ns"]), _cpct(r.get("dram_pct")),
                  "-" if gbps is None else f"{gbps:,.0f}", _cpct(r.get("sm_active_pct")),
                  _cpct(r.get("tensor_pct")), _cpct(r.get("warps_active_pct")),
                  Text(r["verdict"] + mark))

    for r in c.get("phases", []):
        row(f"[{r['name']}]", r)
    for r in c.get("modules", []):
        if depth is not None and r["level"] > depth:
            continue
        lv = r["level"]
        row(("  " * lv) + r["name"].rsplit(".", 1)[-1] if lv else r["name"], r)
    return keep_figures(t)


def counters_notes(c: dict[str, Any]) -> list[str]:
    """One-line facts under the Counters table."""
    th = c.get("thresholds", {})
    out = ["DRAM and SM (active cycles) in % of peak, tensor pipe and warps (occupancy) in % "
           "of active cycles, over each row's sampled node time",
           f"verdict: memory bound at DRAM >= {th.get('memory_bound_dram_pct', 60):.0f}% of "
           f"peak, else compute bound at SM active or tensor pipe >= "
           f"{th.get('compute_bound_pct', 60):.0f}%, else latency bound; ~ = approximate "
           "(nodes ran concurrently)"]
    if c.get("peak_dram_GBps"):
        out.append(f"DRAM peak {c['peak_dram_GBps']:,.0f} GB/s (from the device's memory clock "
                   "and bus width)")
    if c.get("missing_metrics"):
        out.append("not collected on this GPU: " + ", ".join(c["missing_metrics"]))
    if c.get("unmatched_nodes"):
        out.append(f"{c['unmatched_nodes']} sampled node(s) not in this bundle's graphs")
    return out


def print_counters(c: dict[str, Any], console: Optional[Console] = None,
                   depth: Optional[int] = 2) -> None:
    con = console or Console()
    con.print(counters_table(c, depth))
    for line in counters_notes(c):
        con.print(Text(line))


def counters_diff_table(rows: list[dict[str, Any]]) -> Table:
    """`graphscope diff`: per-module counter deltas (B - A, percentage points)."""
    t = Table(title=Text("Counters A → B (percentage points)"), title_justify="left")
    for col, just in (("module", "left"), ("DRAM", "right"), ("SM active", "right"),
                      ("tensor", "right"), ("warps", "right"), ("verdict A → B", "left")):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]

    def d(r: dict[str, Any], k: str) -> str:
        v = r.get("d_" + k)
        return "-" if v is None else f"{r[k + '_a']:.0f}→{r[k + '_b']:.0f} ({v:+.0f})"

    for r in rows:
        lv = r.get("level", 0)
        name = ("  " * lv) + r["module"].rsplit(".", 1)[-1] if lv else r["module"]
        v = r["verdict_a"] if r["verdict_a"] == r["verdict_b"] else (
            f"{r['verdict_a']} → {r['verdict_b']}")
        t.add_row(Text(name), d(r, "dram_pct"), d(r, "sm_active_pct"), d(r, "tensor_pct"),
                  d(r, "warps_active_pct"), Text(v))
    return keep_figures(t)
