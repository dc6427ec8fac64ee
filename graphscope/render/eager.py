"""Rich tables of the eager-vs-graph comparison and graph coverage (numbers from
analysis/eager.py). The terminal shows the (module, phase) rows with the largest |Δ| first, at
most ``EAGER_ROWS`` of them, and where some are left out, every row summed per module at the
module depth that fits (as the module table picks its levels)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Optional

from rich.console import Group
from rich.table import Table

from ..analysis.stats import module_at
from .fmt import Text, depth_that_fits, fmt_ns, keep_figures, output_width, signed_ns

MAX_CHANGES = 3  # kernel names shown per cell
EAGER_ROWS = 15  # (module, phase) rows the terminal shows by default (report --eager-rows)
PHASE = {"forward": "fwd", "backward": "bwd", "optimizer": "opt"}  # as the module table's
CHANGES_MIN_WIDTH = 24  # the kernel changes column, where the terminal leaves this much


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


def by_delta(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the largest |Δ| (graph - eager) first; ties in module and phase order."""
    return sorted(rows, key=lambda r: (-abs(r["delta_ns"]), r["module"], r["phase"]))


def _changes(r: dict[str, Any]) -> str:
    parts = []
    if r["added"]:
        parts.append("+ " + _names(r["added"]))
    if r["missing"]:
        parts.append("- " + _names(r["missing"]))
    if r["replaced"]:
        parts.append("; ".join(f"{p['eager']} → {p['graph']}" for p in r["replaced"][:2]))
    return " · ".join(parts)


def eager_table(cmp: dict[str, Any], rows: int = EAGER_ROWS, width: Optional[int] = None,
                changes: bool = True) -> Table:
    """The ``rows`` (module, phase) rows of largest |Δ| (0: every row), with the kernel changes
    column where ``changes`` and a row shown has a change (never an empty column)."""
    shown = by_delta(cmp["modules"])[: rows or None]
    cells = [_changes(r) for r in shown] if changes else []
    title = "Eager vs graph by module's own kernels (GPU time per step, largest |Δ| first)"
    t = Table(title=title, title_justify="left", min_width=len(title))  # a title on one line
    t.add_column("module", no_wrap=True, overflow="ellipsis")
    t.add_column("phase", no_wrap=True)
    for col in ("eager", "graph", "Δ", "kernels e/g"):
        t.add_column(col, justify="right")  # a figure keeps its width, a header may wrap
    if any(cells):
        t.add_column("added / missing / replaced in the graph", overflow="fold",
                     min_width=CHANGES_MIN_WIDTH, ratio=1)
    for k, r in enumerate(shown):
        t.add_row(Text(r["module"]), PHASE.get(r["phase"], r["phase"]),
                  fmt_ns(r["eager_ns"]), fmt_ns(r["graph_ns"]),
                  Text(signed_ns(r["delta_ns"]), style="red" if r["slower_in_graph"] else ""),
                  f"{r['eager_kernels']:g}/{r['graph_kernels']}",
                  *([Text(cells[k])] if any(cells) else []))
    return keep_figures(t, width)


def _changes_fit(cmp: dict[str, Any], rows: int, width: int) -> bool:
    """Whether ``width`` columns hold the table with a kernel changes column of at least
    ``CHANGES_MIN_WIDTH`` (narrower: the changes are lines under the table)."""
    from rich.console import Console

    bare = eager_table(cmp, rows, 10**4, changes=False)
    return Console(width=10**4).measure(bare).maximum + CHANGES_MIN_WIDTH + 3 <= width


def change_lines(cmp: dict[str, Any], rows: int = EAGER_ROWS) -> list[str]:
    """The kernel changes of the rows shown, one line each (where the table has no room)."""
    shown = by_delta(cmp["modules"])[: rows or None]
    lines = [f"  {r['module']} {PHASE.get(r['phase'], r['phase'])}: {_changes(r)}"
             for r in shown if _changes(r)]
    return ["added (+) / missing (-) / replaced (→) kernels in the graph:", *lines] if lines \
        else []


def hidden_line(cmp: dict[str, Any], rows: int = EAGER_ROWS, rolled: bool = False
                ) -> Optional[str]:
    """How many rows the table leaves out, how small their |Δ| is, and how to see them
    (``rolled``: the rows are at the --depth asked for already)."""
    hidden = by_delta(cmp["modules"])[rows:] if rows else []
    if not hidden:
        return None
    largest = max(abs(r["delta_ns"]) for r in hidden)
    return (f"{len(hidden)} more row{'s' if len(hidden) > 1 else ''} not shown (|Δ| at most "
            f"{fmt_ns(largest)} each): report --eager-rows 0 shows every row"
            + ("" if rolled else ", --depth N rolls modules up"))


def rollup_depth(cmp: dict[str, Any], max_rows: int = EAGER_ROWS) -> int:
    """The deepest module level (``--depth``) at which the rows' modules, as a tree, fit in
    ``max_rows`` rows: the module table's choice (:func:`~.fmt.depth_that_fits`); the
    deepest level where the whole tree fits, the root where nothing does."""
    tree: set[str] = set()
    for r in cmp["modules"]:
        parts = r["module"].split(".")
        tree.update([r["module"]] if r["module"].startswith("(") else
                    (".".join(parts[: k + 1]) for k in range(len(parts))))
    levels = [{"level": 0 if m.startswith("(") else m.count(".")} for m in tree]
    fits = depth_that_fits(levels, max_rows)
    if fits is not None:
        return fits
    deepest = max((r["level"] for r in levels), default=0)
    return deepest if len(levels) <= max_rows else 0


def rollup(cmp: dict[str, Any], depth: int) -> list[dict[str, Any]]:
    """Every row summed per module rolled up to ``depth`` (both phases together), largest
    |Δ| first: where the differences of many small rows add up."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "eager_ns": 0.0, "graph_ns": 0.0, "delta_ns": 0.0, "eager_kernels": 0.0,
        "graph_kernels": 0})
    for r in cmp["modules"]:
        row = out[module_at(r["module"], depth)]
        for key in row:
            row[key] += r[key]
    return by_delta([{"module": m, "phase": "", **v} for m, v in out.items()])


def rollup_table(rows: list[dict[str, Any]], depth: int, max_rows: int = EAGER_ROWS,
                 width: Optional[int] = None) -> Table:
    """The roll-up's first ``max_rows`` rows (all of them, but where even the root level has
    more modules: then the others are counted under it)."""
    title = f"Eager vs graph, every row summed per module at --depth {depth}"
    t = Table(title=title, title_justify="left", min_width=len(title))  # a title on one line
    t.add_column("module", no_wrap=True, overflow="ellipsis")
    for col in ("eager", "graph", "Δ", "kernels e/g"):
        t.add_column(col, justify="right")
    for r in rows[:max_rows]:
        t.add_row(Text(r["module"]), fmt_ns(r["eager_ns"]), fmt_ns(r["graph_ns"]),
                  signed_ns(r["delta_ns"]),
                  f"{round(r['eager_kernels'], 2):g}/{r['graph_kernels']}")
    rest = rows[max_rows:]
    if rest:
        t.caption = (f"{len(rest)} more module{'s' if len(rest) > 1 else ''} (|Δ| at most "
                     f"{fmt_ns(max(abs(r['delta_ns']) for r in rest))} each)")
        t.caption_justify = "left"
    return keep_figures(t, width)


def render_eager(cmp: dict[str, Any], rows: int = EAGER_ROWS, rolled: bool = False,
                 width: Optional[int] = None) -> Group:
    """The step's lines, the ``rows`` rows of largest |Δ| (0: all) and, where rows are left
    out, the roll-up (not where ``rolled``: the rows are already at the --depth asked for)."""
    width = width or output_width()
    lines = change_lines(cmp, rows)
    column = bool(lines) and _changes_fit(cmp, rows, width)
    parts: list[Any] = [Text(x) for x in step_lines(cmp)]
    parts.append(eager_table(cmp, rows, width, changes=column))
    parts.extend(Text(x) for x in ([] if column else lines))
    more = hidden_line(cmp, rows, rolled)
    if more:
        parts.append(Text(more))
        if not rolled:
            depth = rollup_depth(cmp, rows)
            parts.append(rollup_table(rollup(cmp, depth), depth, rows, width))
    return Group(*parts)


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
        return signed_ns(r["delta_ns"]), f"{r['eager_kernels']:g}/{r['graph_kernels']}"

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
    # torch's message runs over several lines (the source it was found at): one line each
    lines += [f"  skipped: {' '.join(str(s).split())}" for s in skips[:MAX_TREE_LINES]]
    more = max(len(rr) - MAX_TREE_LINES, 0) + max(len(skips) - MAX_TREE_LINES, 0)
    if more:
        lines.append(f"  ... {more} more (report --json lists them all)")
    if t["signals_missing"]:
        lines.append("  not observed on this torch: " + ", ".join(t["signals_missing"]))
    return lines
