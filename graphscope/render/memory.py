"""Terminal tables and the HTML chart of what graphs cost: pools (each once), capture cost per
graph, memory by module, and the bucket ladder (``graphscope.analysis.memory`` / ``.ladder``)."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Group
from rich.table import Table

from .fmt import fmt_bytes, fmt_ns
from .table import MAX_GRAPH_ROWS, Text


def _s(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.2f} s"


def _b(v: Optional[float]) -> str:
    return "-" if v is None else fmt_bytes(v)


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
        t.add_row(str(p["pool"]), Text(who), _b(p["reserved_bytes"]), _b(p["allocated_bytes"]),
                  _b(p["capture_live_bytes"]))
    t.caption = (f"{len(mem['pools'])} pool(s), {_b(mem.get('total_reserved_bytes'))} reserved "
                 f"in all (each pool once); capture {_s(mem.get('capture_s'))}, instantiate "
                 f"{_s(mem.get('instantiate_s'))} over {len(mem['graphs'])} graph(s)")
    t.caption_justify = "left"
    return t


def capture_table(mem: dict[str, Any], max_rows: int = MAX_GRAPH_ROWS) -> Table:
    """Per graph: its pool, capture and instantiate time, the capture's allocations."""
    t = Table(title="Capture cost", title_justify="left")
    t.add_column("graph", overflow="fold", ratio=1)
    for col in ("pool", "capture", "instantiate", "peak", "held", "new segments", "inputs"):
        t.add_column(col, justify="right", no_wrap=True)
    for g in mem["graphs"][:max_rows]:
        t.add_row(Text(g["name"]), str(g["pool"]), _s(g.get("capture_s")),
                  _s(g.get("instantiate_s")), _b(g.get("capture_peak_bytes")),
                  _b(g.get("capture_live_bytes")), _b(g.get("capture_segment_bytes")),
                  _b(g.get("static_input_bytes")))
    if len(mem["graphs"]) > max_rows:
        t.caption = f"{max_rows} of {len(mem['graphs'])} graphs shown: --json for all"
        t.caption_justify = "left"
    return t


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
        t.add_row(Text("  " * r["level"] + r["module"]), _b(r["alloc_bytes"]),
                  _b(r["held_bytes"]), _s(r["capture_s"]))
    return t


def memory_group(mem: dict[str, Any], depth: Optional[int] = None) -> Group:
    parts: list[Any] = [pools_table(mem), capture_table(mem)]
    if mem.get("by_module"):
        parts.append(module_memory_table(mem["by_module"], depth))
    return Group(*parts)


def ladder_table(site: dict[str, Any]) -> Table:
    """One capture site's buckets by size: replays, GPU time per replay and per batch row,
    memory, capture cost, structure group."""
    t = Table(title=f"Bucket ladder: {site['site']}", title_justify="left")
    t.add_column("bucket", overflow="fold", ratio=1)
    for col in ("batch", "replays", "time/replay", "time/row", "peak mem", "new pool",
                "capture", "instantiate", "structure"):
        t.add_column(col, justify="right", no_wrap=True)
    for b in site["buckets"]:
        t.add_row(Text(str(b["shapes"] or b["name"])), str(b["batch"] or "-"),
                  str(b["replays"]), fmt_ns(b["median_ns"]) if b["median_ns"] else "-",
                  fmt_ns(b["ns_per_row"]) if b["ns_per_row"] else "-", _b(b["peak_bytes"]),
                  _b(b["segment_bytes"]), _s(b["capture_s"]), _s(b["instantiate_s"]),
                  str(b["structure"]))
    lines = [f"{len(site['buckets'])} buckets, {len(site['structures'])} structure(s)"
             + (f", {site['pools']} pool(s)" if site["pools"] else "")
             + (f"; capture {_s(site['capture_s'])}, instantiate {_s(site['instantiate_s'])}"
                if site["capture_s"] is not None else "")]
    if site["never_replayed"]:
        lines.append(f"never replayed: {len(site['never_replayed'])} bucket(s): "
                     + ", ".join(site["never_replayed"][:8])
                     + (" ..." if len(site["never_replayed"]) > 8 else ""))
    shared = [s for s in site["structures"] if len(s["graphs"]) > 1]
    lines.extend(f"structure {s['structure']}: {len(s['graphs'])} buckets with the same "
                 "kernels and edges (other launch dimensions)" for s in shared[:5])
    t.caption = "\n".join(lines)
    t.caption_justify = "left"
    return t


def ladder_group(sites: list[dict[str, Any]]) -> Group:
    return Group(*[ladder_table(s) for s in sites])


def _points(buckets: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(float(b["batch"]), float(b[key])) for b in buckets
            if b.get("batch") and b.get(key)]


def ladder_svg(site: dict[str, Any], width: int = 360, height: int = 220) -> str:
    """Two panels, time per replay and time per batch row against bucket size (a log x axis
    when the sizes span 16x or more): an inline SVG, every label escaped."""
    import html
    import math

    buckets = site["buckets"]
    panels = [("time per replay", _points(buckets, "median_ns")),
              ("time per row", _points(buckets, "ns_per_row"))]
    xs = [x for _, pts in panels for x, _ in pts]
    if not xs:
        return ""
    lo, hi = min(xs), max(xs)
    logx = lo > 0 and hi / lo >= 16
    fx = (lambda v: math.log2(v)) if logx else (lambda v: v)
    x0, x1 = fx(lo), fx(hi)
    pad_l, pad_r, pad_t, pad_b = 56, 12, 22, 34
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="ladder" style="margin-top:16px" '
             f'width="{2 * width}" height="{height}" font-size="11" font-family="sans-serif">']
    for k, (title, pts) in enumerate(panels):
        ox = k * width
        ymax = max((y for _, y in pts), default=1.0) * 1.1 or 1.0
        w, h = width - pad_l - pad_r, height - pad_t - pad_b

        def px(v: float, ox: int = ox, w: int = w) -> float:
            return ox + pad_l + (w * (fx(v) - x0) / (x1 - x0) if x1 > x0 else w / 2)

        def py(v: float, ymax: float = ymax, h: int = h) -> float:
            return pad_t + h - h * v / ymax

        parts.append(f'<text x="{ox + pad_l}" y="14" font-weight="bold">'
                     f'{html.escape(title)} vs bucket size</text>')
        parts.append(f'<line x1="{ox + pad_l}" y1="{pad_t + h}" x2="{ox + pad_l + w}" '
                     f'y2="{pad_t + h}" stroke="#888"/><line x1="{ox + pad_l}" y1="{pad_t}" '
                     f'x2="{ox + pad_l}" y2="{pad_t + h}" stroke="#888"/>')
        for frac in (0.0, 0.5, 1.0):
            v = ymax / 1.1 * frac
            parts.append(f'<text x="{ox + pad_l - 4}" y="{py(v) + 4:.1f}" text-anchor="end">'
                         f'{html.escape(fmt_ns(v) if v else "0")}</text>')
        parts.extend(f'<text x="{px(x):.1f}" y="{pad_t + h + 14}" text-anchor="middle">'
                     f'{int(x)}</text>' for x in sorted({x for x, _ in pts}))
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        parts.append(f'<polyline fill="none" stroke="#3366cc" points="{line}"/>')
        for x, y in pts:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#3366cc">'
                         f'<title>{html.escape(f"batch {int(x)}: {fmt_ns(y)}")}</title></circle>')
        parts.append(f'<text x="{ox + pad_l + w / 2:.1f}" y="{height - 4}" '
                     f'text-anchor="middle">bucket size (batch rows{", log scale" if logx else ""})'
                     '</text>')
    parts.append("</svg>")
    return "".join(parts)
