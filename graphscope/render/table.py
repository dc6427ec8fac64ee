"""Rich tables of a bundle's summary (what summary.json holds): the header, graphs, GPU time by
module and per graph, DDP's buckets, what graphs cost (memory pools, capture cost, memory by
module, the bucket ladder), top kernels and ops. Formatting only: numbers come from analysis/.
Counters are drawn by render/counters.py, `diff`'s module table by render/diff.py."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Optional

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text as _RichText

from .fmt import (
    MAX_GRAPH_ROWS,
    Text,
    fmt_bytes,
    fmt_ns,
    fmt_s,
    keep_figures,
    output_width,
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


GROUPED_FROM = 5  # a capture site of this many graphs or more is one row (--full: each)


def grouped_graphs_table(groups: Sequence[Any]) -> Table:
    """The graphs by capture site (``analysis.answer.GraphGroup``): a bucket ladder as one row,
    with the range over its buckets; a site of few graphs keeps a row per graph."""
    t = Table(title="Graphs (a capture site's buckets as one row: --full for each graph)",
              title_justify="left")
    t.add_column("graphs", overflow="fold", ratio=1)
    for col in ("nodes", "tagged", "replays", "traced", "time/replay"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("pool", justify="right", overflow="fold")
    for g in groups:
        n = len(g.names)
        name = (f"{g.site}: {n} graphs, {g.buckets[0]} … {g.buckets[-1]}" if n > 1
                else g.names[0])
        nodes = str(g.nodes_low) if g.nodes_low == g.nodes_high else (
            f"{g.nodes_low}–{g.nodes_high}")
        time = "-" if g.low_ns is None else fmt_ns(g.low_ns) if g.low_ns == g.high_ns else (
            f"{fmt_ns(g.low_ns)}–{fmt_ns(g.high_ns)}")
        pool = "-" if g.pool_bytes is None else fmt_bytes(g.pool_bytes) + (
            f" ({g.pools} pools)" if g.pools > 1 else "")
        t.add_row(Text(name), nodes, f"{g.attributed}/{g.work_nodes}",
                  "-" if g.replays is None else str(g.replays), f"{g.traced} of {n}", time,
                  Text(pool))
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
           groups: Optional[Sequence[Any]] = None, ladder: bool = False) -> Group:
    """The header and tables of ``summary``; ``groups`` (``analysis.answer.GraphGroup``):
    where a capture site has GROUPED_FROM graphs or more, its graphs as one row and no
    column per graph (None: a row and a column per graph), and the bucket ladder only where
    ``ladder`` asks for it."""
    parts: list[Any] = [header(summary)]
    grouped = groups is not None and any(len(g.names) >= GROUPED_FROM for g in groups)
    if grouped:
        parts.append(grouped_graphs_table(groups or ()))
    elif len(summary["graphs"]) > 1 or any("site" in g for g in summary["graphs"]):
        parts.append(graphs_table(summary))
    parts.append(module_table(summary, depth))
    if summary.get("by_graph") and summary.get("replays") and not grouped:
        parts.append(by_graph_table(summary["by_graph"], depth))
    if summary.get("ddp"):
        parts.append(ddp_table(summary["ddp"]))
    if summary.get("memory"):
        training = bool((summary.get("coverage") or {}).get("backward", {}).get("nodes"))
        parts.append(memory_group(summary["memory"], depth, training, grouped))
    if summary.get("ladder") and (ladder or not grouped):
        parts.append(ladder_group(summary["ladder"]))
    elif summary.get("ladder"):
        parts.append(Text(f"Bucket ladder: {len(summary['ladder'])} capture site(s); "
                          "report --ladder shows each bucket's replays, time per row, "
                          "memory and capture cost"))
    if top:
        parts.append(kernel_table(summary))
        if any(r.get("op") != "(no op recorded)" for r in summary.get("top_ops", [])):
            parts.append(kernel_table(summary, key="op"))
    return Group(*parts)


def print_summary(
    summary: dict[str, Any], console: Optional[Console] = None, depth: Optional[int] = None,
    groups: Optional[Sequence[Any]] = None, ladder: bool = False,
) -> None:
    (console or Console()).print(render(summary, depth, groups=groups, ladder=ladder))


# -- what graphs cost: pools once, capture cost, memory by module, the bucket ladder
# (analysis/memory.py, analysis/ladder.py)

def pools_table(mem: dict[str, Any]) -> Table:
    """One row per pool, whatever number of graphs share it; the total is their union."""
    t = Table(title="Memory pools", title_justify="left")
    t.add_column("pool", justify="right", no_wrap=True)
    t.add_column("graphs", overflow="fold", ratio=1)
    for col in ("reserved", "allocated", "held by captures"):
        t.add_column(col, justify="right", no_wrap=True)
    for p in mem["pools"][:MAX_GRAPH_ROWS]:
        names = p["graphs"]
        who = names[0] if len(names) == 1 else f"{len(names)} graphs: {names[0]} .. {names[-1]}"
        t.add_row(str(p["pool"]), Text(who), fmt_bytes(p["reserved_bytes"]),
                  fmt_bytes(p["allocated_bytes"]), fmt_bytes(p["capture_live_bytes"]))
    outside = mem.get("outside_pools_bytes")
    t.caption = (f"{len(mem['pools'])} pool(s), "
                 f"{fmt_bytes(mem.get('total_reserved_bytes'))} reserved in all (each pool once)"
                 + (f"; {fmt_bytes(outside)} more reserved outside the pools during the captures"
                    if outside else "")
                 + f"; capture {fmt_s(mem.get('capture_s'))}, instantiate "
                 f"{fmt_s(mem.get('instantiate_s'))} over {len(mem['graphs'])} graph(s)")
    t.caption_justify = "left"
    return keep_figures(t)


def columns_that_fit(cols: Sequence[str], rows: Sequence[Sequence[str]], name_width: int,
                     extra: Sequence[str], width: int) -> tuple[int, list[bool]]:
    """What a table of a name column (``name_width``) and the figure columns ``cols`` needs at
    the least (each column at its widest cell or header, two characters of padding, no
    rules), and which columns it keeps: all, or, where that is more than ``width``, all but
    ``extra`` (the caller says where they went)."""
    need = name_width + 2 + sum(max([len(c)] + [len(r[i]) for r in rows]) + 2
                                for i, c in enumerate(cols))
    return need, [c not in extra or need <= width for c in cols]


_CAPTURE_EXTRA = ("inst.", "inputs", "outputs")  # left out where the table cannot fit


def capture_table(mem: dict[str, Any], max_rows: int = MAX_GRAPH_ROWS,
                  width: Optional[int] = None) -> Table:
    """Per graph: its pool, capture and instantiate time, the capture's allocations (where
    the whole table cannot fit ``width``, the terminal's, instantiation and the static inputs
    and outputs are left out, and the caption says so)."""
    cols = ("pool", "capture", "inst.", "peak", "held", "new seg.", "inputs", "outputs")
    rows = [(g["name"], (str(g["pool"]), fmt_s(g.get("capture_s")), fmt_s(g.get("instantiate_s")),
                         fmt_bytes(g.get("capture_peak_bytes")),
                         fmt_bytes(g.get("capture_live_bytes")),
                         fmt_bytes(g.get("capture_segment_bytes")),
                         fmt_bytes(g.get("static_input_bytes")),
                         fmt_bytes(g.get("static_output_bytes"))))
            for g in mem["graphs"][:max_rows]]
    need, keep = columns_that_fit(cols, [r for _, r in rows], 16, _CAPTURE_EXTRA,
                                  width or output_width())
    narrow = not all(keep)
    t = Table(title="Capture cost", title_justify="left")
    t.add_column("graph", overflow="fold", ratio=1)
    for col, k in zip(cols, keep):
        if k:
            t.add_column(col, justify="right")
    for name, cells in rows:
        t.add_row(Text(name), *(c for c, k in zip(cells, keep) if k))
    lines = ["inst.: instantiation; new seg.: the segments the capture added to its pool"]
    if narrow:
        lines[0] = ("new seg.: the segments the capture added to its pool; instantiation, "
                    "inputs and outputs: a wider terminal, or --json")
    if len(mem["graphs"]) > max_rows:
        lines.append(f"{max_rows} of {len(mem['graphs'])} graphs shown: --json for all")
    t.caption = "\n".join(lines)
    t.caption_justify = "left"
    return keep_figures(t)


def module_memory_table(rows: list[dict[str, Any]], depth: Optional[int] = None) -> Table:
    """Memory by module: what each module allocated during capture, what it still holds, and
    the capture time spent in it (inclusive of sub-modules)."""
    t = Table(title="Memory by module (during capture)", title_justify="left")
    t.add_column("module", overflow="fold", ratio=1)
    for col in ("allocated", "held", "capture time"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        if depth is not None and r["level"] > depth:
            continue
        # a row's own name under its parent's, as the GPU time tables show the tree
        name = r["module"].rsplit(".", 1)[-1] if r["level"] else r["module"]
        t.add_row(Text("  " * r["level"] + name), fmt_bytes(r["alloc_bytes"]),
                  fmt_bytes(r["held_bytes"]), fmt_s(r["capture_s"]))
    return keep_figures(t)


def outside_note(rows: list[dict[str, Any]], training: bool = False) -> str:
    """What the memory table's outside row holds, where it holds anything: the capture
    window's time while no module's forward ran (in a forward capture, most of it is
    torch.cuda.graph's own entry and exit). ``training``: the bundle captured a backward."""
    from ..model.graph import OUTSIDE_MODULES

    if not any(r["module"] == OUTSIDE_MODULES and (r["alloc_bytes"] or r["capture_s"])
               for r in rows):
        return ""
    step = ("; in a training step also the loss, backward pass and optimizer step"
            if training else "")
    return (f"{OUTSIDE_MODULES}: the capture window while no module's forward ran: "
            "torch.cuda.graph's entry and exit (synchronize, garbage collection, "
            "capture_begin/capture_end) and graphscope's own CUPTI subscription and record "
            f"keeping around each capture{step}")


def memory_group(mem: dict[str, Any], depth: Optional[int] = None,
                 training: bool = False, grouped: bool = False) -> Group:
    """Pools, capture cost per graph (``grouped``: a bucket ladder's, in one line: its
    buckets' rows are `--full`'s and `--ladder`'s) and memory by module."""
    parts: list[Any] = [pools_table(mem)]
    if grouped:
        parts.append(Text(f"Capture cost of each of the {len(mem['graphs'])} graphs: "
                          "report --full (--ladder: by bucket)"))
    else:
        parts.append(capture_table(mem))
    if mem.get("by_module"):
        parts.append(module_memory_table(mem["by_module"], depth))
        note = outside_note(mem["by_module"], training)
        if note:
            parts.append(Text(note))
    return Group(*parts)


_LADDER_EXTRA = ("time/row", "new pool", "inst.")  # left out where the table cannot fit


def ladder_table(site: dict[str, Any], width: Optional[int] = None) -> Table:
    """One capture site's buckets by size: replays, GPU time per replay and per batch row,
    memory, capture cost, structure group (where the whole table cannot fit ``width``, the
    terminal's, time per row, the new pool memory and instantiation are left out, and the
    caption says so)."""
    # short headers: a header wraps at spaces only, and a long word would widen the table past
    # the terminal (the caption says what "inst." and "struct." are)
    cols = ("batch", "replays", "time/replay", "time/row", "peak mem", "new pool",
            "capture", "inst.", "struct.")
    rows = [(str(b["shapes"] or b["name"]), (
        str(b["batch"] or "-"), str(b["replays"]),
        fmt_ns(b["median_ns"]) if b["median_ns"] else "-",
        fmt_ns(b["ns_per_row"]) if b["ns_per_row"] else "-", fmt_bytes(b["peak_bytes"]),
        fmt_bytes(b["segment_bytes"]), fmt_s(b["capture_s"]), fmt_s(b["instantiate_s"]),
        str(b["structure"]))) for b in site["buckets"]]
    width = width or output_width()
    need, keep = columns_that_fit(cols, [r for _, r in rows],
                                  max((len(name) for name, _ in rows), default=6),
                                  _LADDER_EXTRA, width)
    narrow = not all(keep)
    t = Table(title=f"Bucket ladder: {site['site']}", title_justify="left")
    if not narrow and need + len(cols) + 2 > width:  # it fits without its vertical rules only
        from rich import box

        t.box, t.show_edge, t.pad_edge = box.SIMPLE_HEAD, False, False
        t.collapse_padding = True
    t.add_column("bucket", overflow="fold", ratio=1)
    for col, k in zip(cols, keep):
        if k:
            t.add_column(col, justify="right")
    for name, cells in rows:
        t.add_row(Text(name), *(c for c, k in zip(cells, keep) if k))
    lines = [f"{len(site['buckets'])} buckets, {len(site['structures'])} structure(s)"
             + (f", {site['pools']} pool(s)" if site["pools"] else "")
             + (f"; capture {fmt_s(site['capture_s'])}, instantiate {fmt_s(site['instantiate_s'])}"
                if site["capture_s"] is not None else "")]
    if site["never_replayed"]:
        lines.append(f"never replayed: {len(site['never_replayed'])} bucket(s): "
                     + ", ".join(site["never_replayed"][:8])
                     + (" ..." if len(site["never_replayed"]) > 8 else ""))
    with_ops = site.get("ops_recorded", len(site["buckets"]))
    if with_ops < len(site["buckets"]):
        lines.append(f"aten ops, shapes and source lines recorded in {with_ops} of "
                     f"{len(site['buckets'])} buckets (the first captured; the others keep "
                     "module scopes: graphscope run --op-captures all records every bucket)")
    if site.get("scopes_counted"):
        lines.append(f"{site['scopes_counted']} of {len(site['buckets'])} buckets recorded by "
                     "node counts, without CUPTI in their captures")
    shared = [s for s in site["structures"] if len(s["graphs"]) > 1]
    lines.extend(f"structure {s['structure']}: {len(s['graphs'])} buckets with the same "
                 "kernels and edges (other launch dimensions)" for s in shared[:5])
    lines.append("struct.: buckets of one structure have the same kernels and edges"
                 + ("; time/row, new pool and inst. (instantiation): a wider terminal, or "
                    "--json" if narrow
                    else "; inst.: instantiation"))
    t.caption = "\n".join(lines)
    t.caption_justify = "left"
    return keep_figures(t)


def ladder_group(sites: list[dict[str, Any]]) -> Group:
    return Group(*[ladder_table(s) for s in sites])
