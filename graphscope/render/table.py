"""Rich tables of a bundle's summary (what summary.json holds): the header, graphs, GPU time by
module and per graph, DDP's buckets, top kernels and ops. What graphs cost is drawn by
render/memory.py, counters by render/counters.py, `diff`'s module table by render/diff.py.
Formatting only: numbers come from analysis/."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Optional

from rich.console import Group
from rich.table import Table
from rich.text import Text as _RichText

from .fmt import (
    MAX_GRAPH_ROWS,
    Text,
    fmt_bytes,
    fmt_ns,
    keep_figures,
    safe,
)


def _module_title(summary: dict[str, Any], timed: bool) -> tuple[str, str]:
    """The module table's title and caption, saying what its figures are: a graph's median
    replay; with several graphs, one median replay of each traced graph added up (kernel counts
    cover every graph, replayed or not); without timed replays, kernels only."""
    graphs = summary.get("graphs") or []
    if not timed:
        return "Kernels by module", ""
    if len(graphs) <= 1:
        return "GPU time by module (median per replay)", ""
    traced = len(graphs) - int(summary.get("untraced_graphs") or 0)
    kernels = (f"kernels: all {len(graphs)} graphs, {len(graphs) - traced} of them not traced"
               if traced < len(graphs) else "")
    if uneven_replays(graphs):  # no replay holds one of each graph: say what the figures are
        return ("GPU time by module (median of the traced replays' totals)",
                "; ".join(x for x in (uneven_words(graphs), kernels) if x))
    return f"GPU time by module ({traced} graphs' median replays, added)", kernels


def uneven_replays(graphs: list[dict[str, Any]]) -> list[int]:
    """The traced replays of each traced graph of a program, where they differ (a graph the
    program replayed less often is missing from some replays' totals); else []."""
    counts = [int(g["traced_replays"]) for g in graphs if g.get("traced_replays")]
    return counts if len(set(counts)) > 1 else []


def uneven_words(graphs: list[dict[str, Any]]) -> str:
    counts = uneven_replays(graphs)
    shown = ", ".join(map(str, counts[:8])) + (" ..." if len(counts) > 8 else "")
    return (f"not every graph ran in every traced replay (traced {shown} times): each "
            "graph's own median is in the per-graph table")


def module_table(summary: dict[str, Any], depth: Optional[int] = None) -> Table:
    timed = summary.get("replays", 0) > 0
    # the autograd engine's gradient-accumulation adds, inside bwd: shown when there are any
    acc = any(r.get("acc_kernels") for r in summary["modules"])
    title, caption = _module_title(summary, timed)
    if acc:  # a column beside bwd reads as more time: it is part of it
        caption = "; ".join(x for x in (caption, "acc: the gradient-accumulation adds, part "
                                        "of bwd") if x)
    t = Table(title=title, title_justify="left", caption=caption or None,
              caption_justify="left", min_width=len(title))  # a title on one line
    widest = max((len(r["module"].rsplit(".", 1)[-1]) + 2 * r["level"]
                  for r in summary["modules"]), default=6)
    t.add_column("module", no_wrap=True, overflow="ellipsis", min_width=min(widest, 24))
    # "acc": of bwd, the gradient-accumulation adds (time when timed, else kernels)
    # a forward-only bundle (inference, --mode forward): no fwd/bwd split to show
    split = any(r.get("bwd_kernels") for r in summary["modules"])
    # an optimizer step in the graph: its time is neither forward nor backward
    opt = split and any(r.get("opt_kernels") for r in summary["modules"])
    cols = (["time", "%"] + (["fwd", "bwd"] if split else []) + (["opt"] if opt else [])
            + (["acc"] if acc else [])) if timed else []
    cols += (["kernels"] + (["fwd/bwd/opt" if opt else "fwd/bwd"] if split else [])
             + (["acc"] if acc and not timed else []))
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for row in summary["modules"]:
        if depth is not None and row["level"] > depth:
            continue
        name = row["module"]
        label = ("  " * row["level"]) + (name.rsplit(".", 1)[-1] if row["level"] else name)
        cells = [label]
        if timed:
            cells += [fmt_ns(row["median_ns"]), f"{row['pct']:.1f}"]
            if split:  # a phase the row has no kernels of is blank, as opt and acc are
                cells += [fmt_ns(row[f"{p}_ns"]) if row.get(f"{p}_kernels") else ""
                          for p in ("fwd", "bwd")]
            if opt:
                cells.append(fmt_ns(row.get("opt_ns")) if row.get("opt_kernels") else "")
            if acc:
                cells.append(fmt_ns(row.get("acc_ns")) if row.get("acc_kernels") else "")
        cells += [str(row["kernels"])]
        if split:
            cells.append(f"{row['fwd_kernels']}/{row['bwd_kernels']}"
                         + (f"/{row.get('opt_kernels', 0)}" if opt else ""))
        if acc and not timed:
            cells.append(str(row.get("acc_kernels") or ""))
        t.add_row(Text(cells[0]), *cells[1:])
    return keep_figures(t)


def kernel_table(summary: dict[str, Any], key: str = "kernel") -> Table:
    rows = summary["top_kernels"] if key == "kernel" else summary["top_ops"]
    timed = summary.get("replays", 0) > 0
    title = "Top kernels" if key == "kernel" else "Top aten ops"
    memory = key == "kernel" and any(r.get("type") for r in rows)  # copy and memset nodes
    t = Table(title=title + (" by time" if timed else " by count"), title_justify="left",
              caption=("memcpy and memset rows are the graph's copy and memset nodes, not "
                       "kernels") if memory else None, caption_justify="left")
    # the width there is; a name longer than that wraps rather than being cut, so that two
    # kernels never read alike (their names are unique: model.graph.unique_short_names)
    t.add_column(key, overflow="fold", ratio=1)
    t.add_column("count", justify="right", no_wrap=True)
    if timed:
        t.add_column("time", justify="right", no_wrap=True)
        t.add_column("%", justify="right", no_wrap=True)
    for r in rows:
        cells: list[Any] = [Text(r[key]), str(r["count"])]  # names are data, never markup
        if timed:
            cells += [fmt_ns(r["median_ns"]), f"{r['pct']:.1f}"]
        t.add_row(*cells)
    return keep_figures(t)


def pool_cell(g: dict[str, Any]) -> str:
    """A graph's pool memory; a pool several graphs share is shown once, at its first graph
    (never the same bytes once per graph: that sum does not exist)."""
    shared = g.get("pool_shared")
    if not shared:
        return fmt_bytes(g.get("pool_bytes"))
    if shared["first"]:
        return (f"{fmt_bytes(shared['bytes'])} shared pool {shared['pool']} "
                f"({shared['graphs']} graphs)")
    return f"shared pool {shared['pool']}"


def graphs_table(summary: dict[str, Any], max_rows: int = MAX_GRAPH_ROWS) -> Table:
    """The graphs of a bundle: capture site, size, replays over the run, pool memory."""
    graphs = summary["graphs"]
    t = Table(title="Graphs", title_justify="left")
    t.add_column("graph", overflow="fold", ratio=1)
    for col in ("nodes", "tagged", "replays", "traced", "time/replay"):
        t.add_column(col, justify="right", no_wrap=True)
    # wraps, so that a narrow terminal narrows it before the graph names
    t.add_column("pool", justify="right", overflow="fold")
    # a capture bundle's graphs are each replayed (and traced) in every replay
    every = summary.get("replays") or "-"
    for g in graphs[:max_rows]:
        t.add_row(
            Text(str(g["name"])), str(g["nodes"]),
            f"{g.get('attributed', 0)}/{g['work_nodes']}",
            str(g.get("replays", every)), str(g.get("traced_replays", every)),
            fmt_ns(g.get("median_ns")) if g.get("median_ns") else "-",
            Text(pool_cell(g)),
        )
    if len(graphs) > max_rows:
        t.caption = (f"{max_rows} of {len(graphs)} graphs shown: report --graph NAME for one, "
                     "--json or --html for all")
        t.caption_justify = "left"
    return keep_figures(t)


def coverage_text(cov: dict[str, Any]) -> str:
    """``fwd 100.0% bwd 93.1%``: only the phases that have nodes (a forward-only bundle has no
    backward to cover)."""
    short = {"forward": "fwd", "backward": "bwd", "optimizer": "opt"}
    order = list(short)  # a summary.json's keys come sorted (bwd first): the step's order
    phases = sorted(cov, key=lambda p: (order.index(p) if p in order else len(order), p))
    parts = [f"{short.get(p, p)} {cov[p]['pct']:.1f}%" for p in phases if cov[p].get("nodes")]
    return " ".join(parts) or "-"


def untraced_words(graphs: list[dict[str, Any]], untraced: int) -> str:
    """``untraced`` graphs of a program, none of the traced replays ran, in words: those the
    program never replayed at all, and those it replayed only while not traced."""
    never = sum(g.get("replays") == 0 for g in graphs)
    replayed = sum(bool(g.get("replays")) and g.get("traced_replays") == 0 for g in graphs)
    counts = {"captured but never replayed": never, "replayed but never traced": replayed,
              "never traced": untraced - never - replayed}
    return ", ".join(f"{n} {why}" for why, n in counts.items() if n > 0)


def header(summary: dict[str, Any]) -> _RichText:
    if len(summary["graphs"]) > 3:
        graphs = f"{len(summary['graphs'])} graphs"
    else:
        graphs = ", ".join(f"{g['name']} ({g['work_nodes']} work nodes)"
                           for g in summary["graphs"])
    line = (
        f"graphs: {graphs}; annotated {summary['annotated_nodes']}/{summary['work_nodes']}; "
        f"module coverage {coverage_text(summary['coverage'])}"
    )
    lines = [line]
    if summary.get("replays"):
        # A program's graphs replay apart from each other: one span over them means nothing,
        # and their work is one replay of each, summed
        apart = any("site" in g for g in summary["graphs"])
        # a program replays its graphs as often as it likes: the header counts the traced ones
        count = (f"traced replays: {summary['replays']}" if apart
                 else f"replays: {summary['replays']}")
        if apart and len(summary["graphs"]) > 1:
            never = summary.get("untraced_graphs") or 0
            of = (f"the {len(summary['graphs']) - never} traced graphs "
                  f"({untraced_words(summary['graphs'], never)})" if never
                  else f"the {len(summary['graphs'])} graphs")
            work = fmt_ns(summary["replay_kernel_median_ns"])
            line = (f"{count}, graph work {work} per traced replay (the median of the "
                    f"replays' totals; {uneven_words(summary['graphs'])})"
                    if uneven_replays(summary["graphs"]) else
                    f"{count}, graph work {work} for one replay of each of {of}")
        else:
            line = f"{count}, graph work {fmt_ns(summary['replay_kernel_median_ns'])} per replay"
        if not apart and summary.get("replay_span_median_ns"):  # none recorded: not "0 ns"
            line += f", span {fmt_ns(summary['replay_span_median_ns'])}"
            if len(summary["graphs"]) > 1:  # several graphs replayed one after the other
                line += (f" (from the first node of its {len(summary['graphs'])} graphs to the "
                         "last, the time between the graphs' launches included)")
        lines.append(line)
    # each line escaped on its own: the newline between them is ours, not a name's
    return _RichText("\n".join(safe(x) for x in lines))


def by_graph_table(by: dict[str, Any], depth: Optional[int] = None,
                   width: Optional[int] = None) -> Group:
    """Module time with one column per graph (a forward-mode bundle's buckets, a program's
    graphs): names without the capture site they share, and as many tables as the terminal
    needs (``width``, the terminal's by default) so that no figure wraps."""
    import shutil

    names = [str(n) for n in by["graphs"]]
    site = os.path.commonprefix(names)
    site = site[: site.rfind(" ") + 1] if " " in site else ""
    heads = [n[len(site):] for n in names] if site else names
    rows = [r for r in by["rows"] if depth is None or r["level"] <= depth]
    labels = [("  " * r["level"]) + (r["module"].rsplit(".", 1)[-1] if r["level"]
                                     else r["module"]) for r in rows]
    cells = [[fmt_ns(x) if x else "-" for x in r["per_graph_ns"]] for r in rows]
    width = width or shutil.get_terminal_size((80, 24)).columns
    name_w = max((len(x) for x in labels), default=6) + 3
    col_w = max([len(c) for row in cells for c in row] + [min(len(h), 12) for h in heads]
                + [1]) + 3
    per = max(1, (width - name_w - 1) // col_w)
    chunks = -(-len(names) // per)
    per = -(-len(names) // chunks)  # the tables about as wide as each other
    title = (f"GPU time by module per graph of {site.strip()} (median per replay)" if site
             else "GPU time by module per graph (median per replay)")
    tables = []
    for lo in range(0, len(names), per):
        hi = min(lo + per, len(names))
        more = f"graph {hi} of {len(names)}" if hi == lo + 1 else (
            f"graphs {lo + 1}-{hi} of {len(names)}")
        t = Table(title=Text(title if lo == 0 else f"... {more}"),
                  title_justify="left")
        t.add_column("module", no_wrap=True, overflow="ellipsis")
        for h in heads[lo: lo + per]:
            t.add_column(Text(h), justify="right", overflow="fold")
        for label, row in zip(labels, cells):
            t.add_row(Text(label), *row[lo: lo + per])
        tables.append(keep_figures(t, width))
    return Group(*tables)


def ddp_table(rows: list[dict[str, Any]]) -> Table:
    """DDP's gradient buckets: reducer nodes, NCCL time, overlap with compute."""
    t = Table(title="DDP gradient buckets (backward, median per replay)", title_justify="left")
    for col in ("bucket", "size", "nodes", "time", "comm", "overlap"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("modules", overflow="fold", ratio=1)
    for r in rows:
        mods = r.get("modules") or []
        shown = ", ".join(str(m) for m in mods[:6]) + (f" … +{len(mods) - 6}"
                                                        if len(mods) > 6 else "")
        t.add_row(str(r["bucket"]), fmt_bytes(r.get("bucket_bytes")), str(r["nodes"]),
                  fmt_ns(r["median_ns"]), fmt_ns(r["comm_ns"]),
                  f"{r['overlap_pct']:.0f}%" if "overlap_pct" in r else "-", Text(shown))
    return keep_figures(t)


def render(summary: dict[str, Any], depth: Optional[int] = None, top: bool = True,
           graphs_part: Any = None, middle: Sequence[Any] = ()) -> Group:
    """The header and tables of ``summary``. ``graphs_part``: the Graphs table drawn by the
    caller (a bucket ladder as one row: then no column per graph either); ``middle``: what
    goes between the modules and the top kernels (memory, the ladder: render/memory.py)."""
    parts: list[Any] = [header(summary)]
    if graphs_part is not None:
        parts.append(graphs_part)
    elif len(summary["graphs"]) > 1 or any("site" in g for g in summary["graphs"]):
        parts.append(graphs_table(summary))
    parts.append(module_table(summary, depth))
    if summary.get("by_graph") and summary.get("replays") and graphs_part is None:
        parts.append(by_graph_table(summary["by_graph"], depth))
    if summary.get("ddp"):
        parts.append(ddp_table(summary["ddp"]))
    parts.extend(middle)
    if top:
        parts.append(kernel_table(summary))
        if any(r.get("op") != "(no op recorded)" for r in summary.get("top_ops", [])):
            parts.append(kernel_table(summary, key="op"))
    return Group(*parts)
