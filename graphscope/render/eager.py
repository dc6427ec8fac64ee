"""Rich tables of the eager-vs-graph comparison and graph coverage (numbers from
analysis/eager.py)."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Group
from rich.table import Table
from rich.text import Text as _RichText

from .fmt import fmt_ns, keep_figures, safe

MAX_CHANGES = 3  # kernel names shown per cell


def Text(s: object = "", **kw: Any) -> _RichText:  # noqa: N802 - rich's name, made safe
    """rich's Text (never markup) of ``s`` with control characters escaped."""
    return _RichText(safe(s), **kw)


def _x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}×"


def _names(items: list[dict[str, Any]]) -> str:
    out = [f"{c['kernel']}×{c['count']}" if c["count"] != 1 else c["kernel"]
           for c in items[:MAX_CHANGES]]
    if len(items) > MAX_CHANGES:
        out.append(f"+{len(items) - MAX_CHANGES}")
    return ", ".join(out)


def step_lines(cmp: dict[str, Any]) -> list[str]:
    """The step's verdict: wall time with and without graphing, GPU time, kernels."""
    s = cmp["step"]
    sp = s["speedup"]
    verdict = ("graphing saved " + fmt_ns(s["saved_ns"]) + " per step") if s["saved_ns"] >= 0 \
        else ("graphing COST " + fmt_ns(-s["saved_ns"]) + " per step")
    lines = [
        f"step wall time (host launch cost included, median of {s['runs']}): eager "
        f"{fmt_ns(s['eager_wall_ns'])} vs graph replay {fmt_ns(s['graph_wall_ns'])}: "
        f"{_x(sp)} speed-up, {verdict}",
        f"GPU kernel time: eager {fmt_ns(s['eager_gpu_ns'])} vs graph {fmt_ns(s['graph_gpu_ns'])} "
        f"({_x(s['gpu_speedup'])}); kernels per step: eager {s['eager_kernels']:g} vs graph "
        f"{s['graph_kernels']}",
    ]
    if cmp["kernel_set_changed"]:
        lines.append("graphing changed the kernel set (see added / missing / replaced)")
    if cmp["slower_in_graph"]:
        lines.append("slower in the graph than eager: " + ", ".join(cmp["slower_in_graph"][:8])
                     + (f" (+{len(cmp['slower_in_graph']) - 8})"
                        if len(cmp["slower_in_graph"]) > 8 else ""))
    return lines


def eager_table(cmp: dict[str, Any]) -> Table:
    t = Table(title="Eager vs graph by module (GPU time per step)", title_justify="left")
    t.add_column("module", no_wrap=True, overflow="ellipsis")
    t.add_column("phase", no_wrap=True)
    for col in ("eager", "graph", "Δ", "kernels e/g"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("added / missing / replaced in the graph", overflow="fold")
    for r in cmp["modules"]:
        parts = []
        if r["added"]:
            parts.append("+ " + _names(r["added"]))
        if r["missing"]:
            parts.append("- " + _names(r["missing"]))
        if r["replaced"]:
            parts.append("; ".join(f"{p['eager']} → {p['graph']}" for p in r["replaced"][:2]))
        d = r["delta_ns"]
        t.add_row(Text(r["module"]), r["phase"], fmt_ns(r["eager_ns"]), fmt_ns(r["graph_ns"]),
                  Text(("+" if d > 0 else "-" if d < 0 else "") + fmt_ns(abs(d)),
                       style="red" if r["slower_in_graph"] else ""),
                  f"{r['eager_kernels']:g}/{r['graph_kernels']}", Text(" · ".join(parts)))
    return keep_figures(t)


def render_eager(cmp: dict[str, Any]) -> Group:
    return Group(*(Text(x) for x in step_lines(cmp)), eager_table(cmp))


def coverage_line(cov: dict[str, Any]) -> str:
    return (f"graph coverage of the traced windows (each traced replay and its synchronize): "
            f"{cov['pct']:.1f}% of their GPU time in graphs ({fmt_ns(cov['graph_ns'])} in "
            f"graphs, {fmt_ns(cov['outside_ns'])} eager in {cov['outside_records']} records)")


def eager_diff_table(a: dict[str, Any], b: dict[str, Any]) -> Table:
    """The step's speed-up and times in two bundles' comparisons."""
    t = Table(title="Eager vs graph (A → B)", title_justify="left")
    for col in ("", "A", "B"):
        t.add_column(col, justify="right" if col else "left", no_wrap=True)
    sa, sb = a["step"], b["step"]
    t.add_row("speed-up (wall)", _x(sa["speedup"]), _x(sb["speedup"]))
    t.add_row("eager wall", fmt_ns(sa["eager_wall_ns"]), fmt_ns(sb["eager_wall_ns"]))
    t.add_row("graph wall", fmt_ns(sa["graph_wall_ns"]), fmt_ns(sb["graph_wall_ns"]))
    t.add_row("GPU speed-up", _x(sa["gpu_speedup"]), _x(sb["gpu_speedup"]))
    t.add_row("kernel set changed", str(a["kernel_set_changed"]).lower(),
              str(b["kernel_set_changed"]).lower())
    return keep_figures(t)


def eager_module_diff_table(a: dict[str, Any], b: dict[str, Any]) -> Table:
    """Per module and phase: graph minus eager GPU time, and the kernel counts, in A and B."""
    t = Table(title="Eager vs graph by module (graph - eager, A → B)", title_justify="left")
    t.add_column("module", overflow="fold", ratio=1)
    t.add_column("phase", no_wrap=True)
    for col in ("Δ A", "Δ B", "kernels e/g A", "kernels e/g B"):
        t.add_column(col, justify="right", no_wrap=True)
    ra = {(r["module"], r["phase"]): r for r in a["modules"]}
    rb = {(r["module"], r["phase"]): r for r in b["modules"]}

    def cells(r: Optional[dict[str, Any]]) -> tuple[str, str]:
        if r is None:
            return "-", "-"
        d = r["delta_ns"]
        return (("+" if d > 0 else "-" if d < 0 else "") + fmt_ns(abs(d)),
                f"{r['eager_kernels']:g}/{r['graph_kernels']}")

    for key in sorted(set(ra) | set(rb)):
        (da, ka), (db, kb) = cells(ra.get(key)), cells(rb.get(key))
        t.add_row(Text(key[0]), key[1], da, db, ka, kb)
    return keep_figures(t)


MAX_TREE_LINES = 10


def tree_lines(t: dict[str, Any]) -> list[str]:
    """torch.compile cudagraph trees: what was recorded, re-recorded and skipped, and why."""
    rr, skips = t["re_recordings"], t["skips"]
    lines = [f"torch.compile cudagraph trees: {t['recordings']} recording(s), {len(rr)} "
             f"re-recording(s), {len(skips)} skipped region(s), {t['warmup_runs']} warm-up "
             f"run(s), {t['eager_runs']} eager run(s) of warmed-up functions"]
    lines += [f"  re-recorded {r['function']} ({r['shapes']}): {r['reason']}"
              for r in rr[:MAX_TREE_LINES]]
    lines += [f"  skipped: {s}" for s in skips[:MAX_TREE_LINES]]
    more = max(len(rr) - MAX_TREE_LINES, 0) + max(len(skips) - MAX_TREE_LINES, 0)
    if more:
        lines.append(f"  ... {more} more (report --json lists them all)")
    if t["signals_missing"]:
        lines.append("  not observed on this torch: " + ", ".join(t["signals_missing"]))
    return lines
