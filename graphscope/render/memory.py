"""What graphs cost, as rich tables: memory pools (each once), capture cost per graph, memory
by module during capture, the bucket ladder (analysis/memory.py, analysis/ladder.py).
Formatting only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from rich.console import Group
from rich.table import Table

from .fmt import MAX_GRAPH_ROWS, Text, fmt_bytes, fmt_ns, fmt_s, keep_figures, output_width

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


def _fill(t: Table, first: str, cols: Sequence[str], keep: Sequence[bool],
          rows: Sequence[tuple[str, Sequence[str]]]) -> None:
    """``t``'s columns (a name column ``first``, then the ``cols`` kept) and rows."""
    t.add_column(first, overflow="fold", ratio=1)
    for col, k in zip(cols, keep):
        if k:
            t.add_column(col, justify="right")
    for name, cells in rows:
        t.add_row(Text(name), *(c for c, k in zip(cells, keep) if k))


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
    _fill(t, "graph", cols, keep, rows)
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
    _fill(t, "bucket", cols, keep, rows)
    lines = _ladder_caption(site, narrow)
    t.caption = "\n".join(lines)
    t.caption_justify = "left"
    return keep_figures(t)


def _ladder_caption(site: dict[str, Any], narrow: bool) -> list[str]:
    """The ladder table's caption: totals, buckets never replayed or no faster than a larger
    one, buckets without aten ops or recorded by node counts, shared structures, the key."""
    lines = [f"{len(site['buckets'])} buckets, {len(site['structures'])} structure(s)"
             + (f", {site['pools']} pool(s)" if site["pools"] else "")
             + (f"; capture {fmt_s(site['capture_s'])}, instantiate {fmt_s(site['instantiate_s'])}"
                if site["capture_s"] is not None else "")]
    if site["never_replayed"]:
        lines.append(f"never replayed: {len(site['never_replayed'])} bucket(s): "
                     + ", ".join(site["never_replayed"][:8])
                     + (" ..." if len(site["never_replayed"]) > 8 else ""))
    slower = (site.get("trim") or {}).get("no_faster") or []
    if slower:
        lines.append("no faster than a larger bucket (it would serve them): " + ", ".join(
            f"{x['bucket']} ({fmt_ns(x['median_ns'])}) as {x['into']} "
            f"({fmt_ns(x['into_ns'])})" for x in slower[:8])
            + (" ..." if len(slower) > 8 else ""))
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
    return lines


def ladder_group(sites: list[dict[str, Any]]) -> Group:
    return Group(*[ladder_table(s) for s in sites])
