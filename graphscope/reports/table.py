"""Rich tables of a bundle's summary. Formatting only: numbers come from summary.py."""

from __future__ import annotations

import re
from typing import Any, Optional

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text as _RichText

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe(s: object) -> str:
    """A name from a bundle, made harmless for a terminal: control characters (escape
    sequences included) shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(s))


def Text(s: object = "", **kw: object) -> _RichText:  # noqa: N802 - rich's name, made safe
    """rich's Text (never markup) of ``s`` with control characters escaped."""
    return _RichText(safe(s), **kw)  # type: ignore[arg-type]


def fmt_ns(ns: Optional[float]) -> str:
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def module_table(summary: dict[str, Any], depth: Optional[int] = None) -> Table:
    timed = summary.get("replays", 0) > 0
    # the autograd engine's gradient-accumulation adds, inside bwd: shown when there are any
    acc = any(r.get("acc_kernels") for r in summary["modules"])
    t = Table(title="GPU time by module (median per replay)", title_justify="left")
    widest = max((len(r["module"].rsplit(".", 1)[-1]) + 2 * r["level"]
                  for r in summary["modules"]), default=6)
    t.add_column("module", no_wrap=True, overflow="ellipsis", min_width=min(widest, 24))
    # "acc": of bwd, the gradient-accumulation adds (time when timed, else kernels)
    cols = (["time", "%", "fwd", "bwd"] + (["acc"] if acc else [])) if timed else []
    cols += ["kernels", "fwd/bwd"] + (["acc"] if acc and not timed else [])
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for row in summary["modules"]:
        if depth is not None and row["level"] > depth:
            continue
        name = row["module"]
        label = ("  " * row["level"]) + (name.rsplit(".", 1)[-1] if row["level"] else name)
        cells = [label]
        if timed:
            cells += [fmt_ns(row["median_ns"]), f"{row['pct']:.1f}", fmt_ns(row["fwd_ns"]),
                      fmt_ns(row["bwd_ns"])]
            if acc:
                cells.append(fmt_ns(row.get("acc_ns")) if row.get("acc_kernels") else "")
        cells += [str(row["kernels"]), f"{row['fwd_kernels']}/{row['bwd_kernels']}"]
        if acc and not timed:
            cells.append(str(row.get("acc_kernels") or ""))
        t.add_row(Text(cells[0]), *cells[1:])
    return t


def kernel_table(summary: dict[str, Any], key: str = "kernel") -> Table:
    rows = summary["top_kernels"] if key == "kernel" else summary["top_ops"]
    timed = summary.get("replays", 0) > 0
    title = "Top kernels" if key == "kernel" else "Top aten ops"
    t = Table(title=title + (" by time" if timed else " by count"), title_justify="left")
    t.add_column(key, no_wrap=True, max_width=44, overflow="ellipsis")
    t.add_column("count", justify="right", no_wrap=True)
    if timed:
        t.add_column("time", justify="right", no_wrap=True)
        t.add_column("%", justify="right", no_wrap=True)
    for r in rows:
        cells = [str(r[key]), str(r["count"])]
        if timed:
            cells += [fmt_ns(r["median_ns"]), f"{r['pct']:.1f}"]
        t.add_row(*cells)
    return t


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def graphs_table(summary: dict[str, Any]) -> Table:
    """The graphs of a bundle: capture site, size, replays over the run, pool memory."""
    t = Table(title="Graphs", title_justify="left")
    t.add_column("graph", overflow="fold", ratio=1)
    for col in ("nodes", "tagged", "replays", "traced", "time/replay", "pool"):
        t.add_column(col, justify="right", no_wrap=True)
    for g in summary["graphs"]:
        t.add_row(
            Text(str(g["name"])), str(g["nodes"]),
            f"{g.get('attributed', 0)}/{g['work_nodes']}",
            str(g.get("replays", "-")), str(g.get("traced_replays", "-")),
            fmt_ns(g.get("median_ns")) if g.get("median_ns") else "-",
            fmt_bytes(g.get("pool_bytes")),
        )
    return t


def header(summary: dict[str, Any]) -> _RichText:
    if len(summary["graphs"]) > 3:
        graphs = f"{len(summary['graphs'])} graphs"
    else:
        graphs = ", ".join(f"{g['name']} ({g['work_nodes']} work nodes)"
                           for g in summary["graphs"])
    cov = summary["coverage"]
    line = (
        f"graphs: {graphs}; annotated {summary['annotated_nodes']}/{summary['work_nodes']}; "
        f"module coverage fwd {cov['forward']['pct']:.1f}% bwd {cov['backward']['pct']:.1f}%"
    )
    if summary.get("replays"):
        line += (
            f"\nreplays: {summary['replays']}, graph work "
            f"{fmt_ns(summary['replay_kernel_median_ns'])} per replay"
        )
        # A program's graphs replay apart from each other: one span over them means nothing.
        if not any("site" in g for g in summary["graphs"]):
            line += f", span {fmt_ns(summary['replay_span_median_ns'])}"
    return Text(line)


def by_graph_table(by: dict[str, Any], depth: Optional[int] = None) -> Table:
    """Module time with one column per graph (a forward-mode bundle's buckets)."""
    t = Table(title="GPU time by module per graph (median per replay)", title_justify="left")
    t.add_column("module", no_wrap=True, overflow="ellipsis")
    for name in by["graphs"]:
        t.add_column(Text(str(name)), justify="right", overflow="fold")
    for row in by["rows"]:
        if depth is not None and row["level"] > depth:
            continue
        label = ("  " * row["level"]) + (row["module"].rsplit(".", 1)[-1] if row["level"]
                                         else row["module"])
        t.add_row(Text(label), *[fmt_ns(x) if x else "-" for x in row["per_graph_ns"]])
    return t


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
    return t


def render(summary: dict[str, Any], depth: Optional[int] = None, top: bool = True) -> Group:
    parts: list[Any] = [header(summary)]
    if len(summary["graphs"]) > 1 or any("site" in g for g in summary["graphs"]):
        parts.append(graphs_table(summary))
    parts.append(module_table(summary, depth))
    if summary.get("by_graph") and summary.get("replays"):
        parts.append(by_graph_table(summary["by_graph"], depth))
    if summary.get("ddp"):
        parts.append(ddp_table(summary["ddp"]))
    if top:
        parts.append(kernel_table(summary))
        if any(r.get("op") != "(no op recorded)" for r in summary.get("top_ops", [])):
            parts.append(kernel_table(summary, key="op"))
    return Group(*parts)


def print_summary(
    summary: dict[str, Any], console: Optional[Console] = None, depth: Optional[int] = None
) -> None:
    (console or Console()).print(render(summary, depth))


def print_graphs(summary: dict[str, Any], console: Optional[Console] = None) -> None:
    """What ``graphscope run`` prints when the program ends: graphs, then modules."""
    con = console or Console()
    con.print(graphs_table(summary))
    con.print(module_table(summary, depth=2))


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.0f}%"


def diagnosis_table(diag: dict[str, Any]) -> Table:
    """One row per graph: critical path against work and span, parallelism achieved / the DAG
    allows, idle share of the span, launch latency and the what-if of removing
    stream-order-only edges (analysis/diagnosis.py defines each)."""
    t = Table(title="Diagnosis (median per replay)", title_justify="left")
    t.add_column("graph", overflow="fold", ratio=1)
    for col in ("path", "work", "span", "par/DAG", "idle", "launch"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("what-if", justify="right")
    for o in diag["graphs"]:
        if "error" in o:
            t.add_row(Text(o["graph"]), Text(o["error"]))
            continue
        cp = o["critical_path"]
        timed = o.get("timed")
        ser = o.get("serialization") or {}
        if not ser.get("op_info"):
            what_if = "-"
        elif ser.get("stream_order_only_edges"):
            what_if = f"{fmt_ns(ser['what_if_ns'])} -{ser['gain_pct']:.0f}%"
        else:
            what_if = "= path"
        par, dag = o.get("parallelism"), o.get("dag_parallelism")
        t.add_row(
            Text(o["graph"]),
            fmt_ns(cp["length_ns"]) if timed else f"{cp['length_ns']:.0f} nodes",
            fmt_ns(o["work_ns"]) if timed else "-", fmt_ns(o.get("span_ns")),
            "-" if par is None or dag is None else f"{par:.2f}/{dag:.2f}",
            _pct(o.get("idle_pct")),
            fmt_ns(o.get("launch_latency_ns")) if o.get("launch_recorded") else "n/r",
            what_if)
    return t


def diagnosis_lines(diag: dict[str, Any], graphs: int = 3) -> Group:
    """What the table does not say: the critical path's modules, near-critical nodes, the
    serialized chains, assumptions and verdicts (for the first ``graphs`` graphs)."""
    out: list[str] = []
    for o in diag["graphs"][:graphs]:
        if "error" in o:
            continue
        head = f"{o['graph']}: "
        med = o.get("median", {})
        if o.get("replays"):
            out.append(head + f"{len(o['critical_path']['nodes'])} of {o['nodes']} nodes on the "
                       f"critical path; dependency gaps {fmt_ns(med.get('dep_gap_ns'))}, idle "
                       f"{fmt_ns(med.get('idle_ns'))}, tail {fmt_ns(med.get('tail_ns'))}"
                       + (f", two or more nodes running {_pct(o.get('concurrency_pct'))} of "
                          "the span" if o.get("streams", 0) > 1 else ", one stream"))
        mods = o["critical_path"]["modules"][:4]
        if mods and o.get("timed"):
            out.append(head + "critical path by module: " + ", ".join(
                f"{m['module']} {m['pct']:.0f}%" for m in mods))
        near = o.get("slack", {}).get("near_critical", [])[:3]
        if near and o.get("timed"):
            out.append(head + "nearest off the path: " + ", ".join(
                f"#{x['local_id']} {x['name']} (slack {fmt_ns(x['slack_ns'])})" for x in near))
        ser = o.get("serialization") or {}
        if ser.get("op_info") and ser.get("stream_order_only_edges"):
            chains = "; ".join(f"#{c['first']}–#{c['last']} {c['module']} {fmt_ns(c['work_ns'])}"
                               for c in ser["chains"][:4])
            out.append(head + f"{ser['stream_order_only_edges']} stream-order-only edge(s); "
                       f"independent chains: {chains}")
        if ser.get("nodes_without_op_info") and ser.get("op_info"):
            out.append(head + f"{ser['nodes_without_op_info']} node(s) without op info kept as "
                       "hard dependencies")
        out.extend(head + "assumed: " + a for a in o.get("assumptions", []))
    if len(diag["graphs"]) > graphs:
        out.append(f"(details of {len(diag['graphs']) - graphs} more graph(s): --json)")
    btw = diag.get("between_replays")
    if btw:
        out.append(f"between replays: {btw['pairs']} gap(s), median {fmt_ns(btw['median_gap_ns'])}"
                   f" (max {fmt_ns(btw['max_gap_ns'])}) with no graph node running, against a "
                   f"median replay span of {fmt_ns(btw['median_span_ns'])}"
                   + (f" ({btw['note']})" if btw.get("note") else ""))
    if not diag.get("launch_recorded") and any(o.get("replays") for o in diag["graphs"]):
        out.append("launch latency not recorded (a bundle from before launch records)")
    out.extend("verdict: " + v for v in diag.get("verdicts", []))
    return Group(*(Text(x) for x in out))


def print_diagnosis(diag: dict[str, Any], console: Optional[Console] = None) -> None:
    con = console or Console()
    con.print(diagnosis_table(diag))
    con.print(diagnosis_lines(diag))


def diagnosis_diff_table(diag: dict[str, Any]) -> Table:
    """``diff``'s diagnosis rows: critical path, span, idle and launch latency A → B."""
    t = Table(title="Diagnosis A → B (median per replay)", title_justify="left")
    t.add_column("graph", overflow="fold", ratio=1)
    for col in ("critical path", "span", "idle", "launch"):
        t.add_column(col, justify="right")

    def cell(p: dict[str, Any], pct: bool = False) -> str:
        f = (lambda v: f"{v:.0f}%") if pct else fmt_ns
        if p["a"] is None and p["b"] is None:
            return "-"
        s = f"{f(p['a'])} → {f(p['b'])}"
        if p["delta"] is not None:
            dv = p["delta"]
            s += f" ({'+' if dv >= 0 else '-'}{f(abs(dv))})"
        return s

    for r in diag["graphs"]:
        t.add_row(Text(r["graph"]), cell(r["critical_path_ns"]), cell(r["span_ns"]),
                  cell(r["idle_pct"], pct=True), cell(r["launch_latency_ns"]))
    g = diag.get("between_replays_gap_ns") or {}
    if g.get("a") is not None or g.get("b") is not None:
        t.add_row(Text("between replays (gap)"), "", cell(g), "", "")
    return t
