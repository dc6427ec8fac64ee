"""The diagnosis in the terminal: the per-graph table (critical path, work, span, parallelism,
idle, launch, what-if), the lines it does not hold, and ``diff``'s deltas. Formatting only: the
numbers come from graphscope/analysis/diagnosis.py."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text as _RichText

from ..analysis.diagnosis import differ_words, gain_words
from .fmt import fmt_ns, keep_figures, safe

MAX_GRAPH_ROWS = 50  # as the Graphs table: --json has them all


def Text(s: object = "", **kw: Any) -> _RichText:  # noqa: N802 - rich's name, made safe
    """rich's Text (never markup) of ``s`` with control characters escaped."""
    return _RichText(safe(s), **kw)


def _share(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.0f}%"


TRIED_MIN_WIDTH = 120  # narrower terminals get the measured what-if in the lines below only


def diagnosis_table(diag: dict[str, Any], max_rows: int = MAX_GRAPH_ROWS,
                    width: Optional[int] = None, notes_out: Optional[list[str]] = None
                    ) -> Table:
    """One row per graph: critical path against work and span, parallelism achieved / the DAG
    allows, idle share of the span, launch latency and the what-if of removing
    stream-order-only edges (analysis/diagnosis.py defines each). Above ``max_rows`` graphs,
    the longest critical paths (``--json`` has them all). ``notes_out``: a list that gets the
    table's notes, one a line, instead of the caption (which wraps at the table's width)."""
    rows = diag["graphs"]
    if len(rows) > max_rows:
        rows = sorted(rows, key=lambda o: -float((o.get("critical_path") or {})
                                                 .get("length_ns") or 0))[:max_rows]
    tried = any((o.get("what_if_measured") or {}).get("max_streams") for o in rows) and (
        width is None or width >= TRIED_MIN_WIDTH)
    notes = []
    if len(rows) < len(diag["graphs"]):
        notes.append(f"{len(rows)} of {len(diag['graphs'])} graphs shown (longest critical "
                     "path first; --json has all)")
    marks = [o for o in rows if "error" not in o and o.get("timed")]
    if marks:  # the header's graph work is the median of each replay's sum: a hair apart
        notes.append("path and work add each node's median duration (no latencies)")
    if any(((o.get("serialization") or {}).get("renamed") or {}).get("stream_order_only_edges")
           and not o["serialization"].get("stream_order_only_edges") for o in marks):
        notes.append("renamed: once the allocator's reuse of blocks across chains is undone")
    if tried:
        notes.append("tried: the span over more streams (--try-streams), against the graph's in "
                     "the same alternated replays")
    if any(not (o.get("serialization") or {}).get("op_info") for o in marks):
        notes.append("what-if -: no memory ranges recorded (no false-serialization analysis)")
    apart = [o for o in marks if _spans_apart(o)]
    if apart:  # idle is measured on the replays kept as events, span on every traced one
        o = apart[0]
        notes.append(f"idle %: of the {len(o.get('replays', []))} replays kept as events "
                     f"(median span {fmt_ns(o['median']['span_ns'])}"
                     + (f" for {o['graph']}" if len(marks) > 1 else "")
                     + "; the span column is every traced replay's)")
    if any(o.get("timed") and not o.get("launch_recorded") for o in marks):
        notes.append("launch n/r: launches not recorded (a bundle from before launch records)")
    title = ("Diagnosis (median per replay)" if any(o.get("timed") for o in marks)
             else "Diagnosis (no timed replays: node counts)")
    if notes_out is not None:
        notes_out.extend(notes)
    t = Table(title=title, title_justify="left", caption_justify="left",
              caption=None if notes_out is not None else ("; ".join(notes) or None))
    t.add_column("graph", overflow="fold", ratio=1)
    for col in ("path", "work", "span", "par/DAG", "idle", "launch"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("what-if", justify="right")
    if tried:  # capture --try-streams: the what-if measured
        t.add_column("tried", justify="right")
    for o in rows:
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
        elif (ren := ser.get("renamed") or {}).get("stream_order_only_edges"):
            what_if = f"{fmt_ns(ren['what_if_ns'])} -{ren['gain_pct']:.0f}% renamed"
        else:
            what_if = "no gain"
        par, dag = o.get("parallelism"), o.get("dag_parallelism")
        t.add_row(
            Text(o["graph"]),
            fmt_ns(cp["length_ns"]) if timed else f"{cp['length_nodes']} nodes",
            fmt_ns(o["work_ns"]) if timed else "-", fmt_ns(o.get("span_ns")),
            "-" if par is None or dag is None else f"{par:.2f}/{dag:.2f}",
            _share(o.get("idle_pct")),
            fmt_ns(o.get("launch_latency_ns")) if o.get("launch_recorded")
            else ("n/r" if timed else "-"),
            what_if, *([_tried(o.get("what_if_measured") or {})] if tried else []))
    return keep_figures(t)


def _tried(m: dict[str, Any]) -> str:
    """The ``tried`` cell: the span measured over more streams and its gain."""
    if m.get("error"):
        return "failed"
    if not m.get("span_ns"):
        return "-"
    return (f"{fmt_ns(m['span_ns'])} {gain_words(m.get('gain_pct') or 0.0)}"
            + ("" if m.get("outputs_equal") else " (outputs differ)"))


def _measured_line(m: dict[str, Any]) -> Optional[str]:
    """What capture --try-streams found, in one line (None: nothing measured)."""
    if m.get("error"):
        return (f"--try-streams {m.get('max_streams')}: the capture over more streams failed: "
                f"{m['error']}")
    if not (m.get("span_ns") and m.get("one_stream_ns")):
        if m.get("max_streams"):
            return (f"--try-streams {m['max_streams']}: no span measured (the tracer kept no "
                    "record of the re-captured graph's replays)")
        return None
    iqr = m.get("span_iqr_ns")
    out = (f"re-captured over {m['streams']} of up to {m['max_streams']} streams "
           f"({m['ops']} aten ops, {m['cross_stream_waits']} cross-stream wait(s)): span "
           f"{fmt_ns(m['span_ns'])}"
           + (f" (IQR {fmt_ns(iqr[0])}-{fmt_ns(iqr[1])})" if iqr else "")
           + f" against {fmt_ns(m['one_stream_ns'])} on one stream, {m['replays']} replays of "
           f"each alternated ({gain_words(m.get('gain_pct') or 0.0)})")
    above = m.get("above_bound_pct")
    if above is not None:
        out += (f"; it lies {above:.0f}% above the what-if bound {fmt_ns(m['bound_ns'])} "
                "(what kernels side by side cost each other)" if above >= 0.5 else
                f"; it lies {-above:.0f}% below the what-if bound {fmt_ns(m['bound_ns'])}"
                if above <= -0.5 else f"; it matches the what-if bound {fmt_ns(m['bound_ns'])}")
    out += ("; outputs equal" if m.get("outputs_equal") else
            f"; outputs DIFFER ({differ_words(m)})")
    return out


def _spans_apart(o: dict[str, Any]) -> bool:
    """Whether the span of the replays with events (idle's) and the span shown differ by
    more than 2%."""
    a, b = (o.get("median") or {}).get("span_ns"), o.get("span_ns")
    return bool(a and b and abs(a - b) > 0.02 * b)


def diagnosis_lines(diag: dict[str, Any], graphs: int = 3) -> Group:
    """What the table does not say: the critical path's modules, near-critical nodes, the
    serialized chains, assumptions and verdicts (for the first ``graphs`` graphs)."""
    out: list[str] = []
    # the details of timed graphs first (a ladder's never-replayed buckets have none)
    shown = sorted(diag["graphs"], key=lambda o: not o.get("timed"))[:graphs]
    for o in shown:
        if "error" in o:
            continue
        head = f"{o['graph']}: "
        med = o.get("median", {})
        if o.get("replays"):
            out.append(head + f"{len(o['critical_path']['nodes'])} of {o['nodes']} nodes on the "
                       f"critical path; dependency gaps {fmt_ns(med.get('dep_gap_ns'))}, idle "
                       f"{fmt_ns(med.get('idle_ns'))}, tail {fmt_ns(med.get('tail_ns'))}"
                       + (f", two or more nodes running {_share(o.get('concurrency_pct'))} of "
                          "the span" if o.get("streams", 0) > 1 else ", one stream"))
        cp = o["critical_path"]
        every = cp.get("modules_rolled_up") or cp["modules"]
        mods = every[:4]
        if mods and o.get("timed"):
            rest = every[4:]
            out.append(head + "critical path by module: " + ", ".join(
                f"{m['module']} {m['pct']:.0f}%" for m in mods)
                + (f", {len(rest)} more {sum(m['pct'] for m in rest):.0f}%" if rest else ""))
        near = o.get("slack", {}).get("near_critical", [])[:3]
        if near and o.get("timed"):
            out.append(head + "nearest off the path: " + ", ".join(
                f"#{x['local_id']} {x['name']} (slack {fmt_ns(x['slack_ns'])})" for x in near))
        ser = o.get("serialization") or {}
        if ser.get("op_info") and ser.get("stream_order_only_edges"):
            chains = "; ".join(_run(c) for c in ser["chains"][:4])
            if len(ser["chains"]) > 4:
                chains += f"; … ({len(ser['chains']) - 4} more)"
            edges = _edges(ser.get("edges", []), ser["stream_order_only_edges"])
            out.append(head + f"{ser['stream_order_only_edges']} stream-order-only edge(s) "
                       f"({edges}); the runs of one stream they cut: {chains}")
        ren = ser.get("renamed") or {}
        if ser.get("op_info") and not ser.get("stream_order_only_edges") and ren.get(
                "stream_order_only_edges"):
            edges = _edges(ren.get("edges", []), ren["stream_order_only_edges"])
            out.append(head + f"{ren['stream_order_only_edges']} edge(s) order only reused "
                       f"memory ({edges}): with blocks of their own the chains could overlap")
        measured = _measured_line(o.get("what_if_measured") or {})
        if measured and "error" not in (o.get("what_if_measured") or {}):
            out.append(head + measured)  # a failure is a verdict
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
    # launches not recorded: the table's caption says so (launch n/r), once
    out.extend("verdict: " + v for v in diag.get("verdicts", []))
    return Group(*(Text(x) for x in out))


def print_diagnosis(diag: dict[str, Any], console: Optional[Console] = None) -> None:
    con = console or Console()
    notes: list[str] = []
    con.print(diagnosis_table(diag, width=con.width, notes_out=notes))
    for note in notes:  # each on its own line, at the console's width, not the table's
        con.print(Text(note))
    con.print(diagnosis_lines(diag))


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
            mag = f(abs(dv))
            zero = mag in ("0%", "0 ns")  # no sign on what rounds to nothing
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


def _edges(edges: list[Any], total: int, shown: int = 4) -> str:
    """The first ``shown`` edges, and how many more there are."""
    out = ", ".join(f"#{u}→#{v}" for u, v in edges[:shown])
    return out + (f", … {total - shown} more" if total > shown else "")


def _run(c: dict[str, Any]) -> str:
    """One stream run a false edge cut: its nodes (one node: ``#15``), modules, work."""
    nodes = f"#{c['first']}" if c["first"] == c["last"] else f"#{c['first']}–#{c['last']}"
    return f"{nodes} {c['module']} {fmt_ns(c['work_ns'])}"
