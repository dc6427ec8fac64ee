# Long on purpose: every sentence of the diagnosis in one renderer, the views' words() beside
# the text functions it calls (renderers never import each other, so a split would not compose)
"""The diagnosis in words: the ranked findings, the per-graph table (critical path, work, span,
parallelism, idle, launch, the what-if), the lines it does not hold, and ``diff``'s deltas.
Formatting only: the numbers and codes come from graphscope/analysis/diagnosis/,
findings.py and whatif.py; every sentence a code stands for is written here (``diff``'s
diagnosis deltas: render/diff.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, Union

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text as _RichText

from ..analysis.diagnosis import (
    Assumption,
    BetweenReplays,
    Diagnosis,
    GraphDiagnosis,
    from_json,
)
from ..analysis.diagnosis.types import (
    LISTED,
    Action,
    Chain,
    Finding,
    Findings,
    MeasuredStreams,
    ReplaySelection,
    WhatIf,
)
from .fmt import fmt_ns, gain_words, keep_figures, safe, verdict_text, wrap

MAX_GRAPH_ROWS = 50  # as the Graphs table: --json has them all
TRIED_MIN_WIDTH = 120  # narrower terminals get the measured what-if in the lines below only


def Text(s: object = "", **kw: Any) -> _RichText:  # noqa: N802 - rich's name, made safe
    """rich's Text (never markup) of ``s`` with control characters escaped."""
    return _RichText(safe(s), **kw)


def _share(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.0f}%"


def differ_words(m: MeasuredStreams) -> str:
    """How a --try-streams graph's outputs differ from the graph's (and the captured graph
    from itself, where it does)."""
    own = f", the graph against itself {m.own_max_abs_diff:.3g}" if m.own_max_abs_diff else ""
    return ("output structure differs" if m.max_abs_diff is None
            else f"max |diff| {m.max_abs_diff:.3g}{own}")


# ---------------------------------------------------------------- findings

def action_text(a: Action) -> str:
    """The command that tries a finding, or what to do by hand."""
    if a.argv:
        return " ".join(x if x and " " not in x and "*" not in x else f"'{x}'" for x in a.argv)
    what = {
        "side_streams": "run the independent chains on side streams in the program "
                        "(torch.cuda.Stream, wait_stream)",
        "compile_function": "torch.compile the code that launches these kernels",
        "capture_more_of_the_loop": "capture more of the loop in the graph, or launch the next "
                                    "replay before synchronizing",
    }.get(a.by_hand, a.by_hand)
    return f"by hand: {what}" + (f" ({a.target})" if a.target else "")


def finding_text(f: Finding) -> str:
    """What one finding says, without its saving (the table's first columns hold that)."""
    ev = f.evidence
    if f.kind == "streams":
        edges = ", ".join(f"#{u}→#{v}" for u, v in ev.edges[:3])
        more = f", … {ev.edge_count - 3} more" if ev.edge_count > 3 else ""
        out = (f"{ev.edge_count} stream-order-only edge(s) ({edges}{more}) keep "
               f"{f.kernels} independent chain(s) on one stream"
               + (f": {_some(ev.modules, f.kernels)}" if ev.modules else ""))
        if f.measured_ns is not None:
            out += (f"; --try-streams measured a saving of {fmt_ns(f.measured_ns)} (the "
                    f"what-if predicted {fmt_ns(f.predicted_ns)})")
        return out
    if f.kind == "fusion":
        mods = _some(ev.modules) if ev.modules else "no modules"
        where = "in one region" if len(ev.modules) < 2 else "each in its region"
        return (f"latency bound: {f.kernels} small kernel(s) on the critical path follow "
                f"another {where} ({mods}); fusing them saves a kernel floor of "
                f"{fmt_ns(f.floor_ns)} and a dependency gap of {fmt_ns(f.gap_ns)} (median) "
                "each")
    if f.kind == "host":
        return (f"host bound: the gap between replays (over {f.gaps} gap(s)) is longer than a "
                "replay; its share is of one replay's start to the next's")
    return f.kind


def _some(names: tuple[str, ...], total: Optional[int] = None, shown: int = 3) -> str:
    """The first ``shown`` of ``names`` and how many of ``total`` are left out (None: not
    known; the evidence holds at most LISTED, so where it is full, "more" without a count)."""
    rest = (total if total is not None else len(names)) - shown
    if rest <= 0 or len(names) <= shown:
        return ", ".join(names)
    known = total is not None or len(names) < LISTED
    return ", ".join(names[:shown]) + (f", … {rest} more" if known else ", … more")


def saving_text(f: Finding) -> str:
    """A finding's predicted saving per replay, its share of the span and its interval."""
    shared = f" (after {fmt_ns(f.shared_ns)} claimed above)" if f.shared_ns > 1 else ""
    return (f"{fmt_ns(f.saving_ns)} {f.saving_pct:.0f}% [{fmt_ns(f.low_ns)}–"
            f"{fmt_ns(f.high_ns)}]{shared}")


def findings_table(fs: Findings) -> Table:
    """The ranked findings: saving per replay (with its interval), where, what, and how to
    try it."""
    t = Table(title="What to do next (ranked by predicted saving per replay)",
              title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("saving", justify="right", no_wrap=True)
    t.add_column("graph", overflow="fold")
    t.add_column("finding", ratio=3)
    t.add_column("try", ratio=2, overflow="fold")
    for i, f in enumerate(fs.findings, 1):
        shared = f" (after {fmt_ns(f.shared_ns)} claimed above)" if f.shared_ns > 1 else ""
        t.add_row(str(i), f"{fmt_ns(f.saving_ns)} {f.saving_pct:.0f}%\n"
                  f"[{fmt_ns(f.low_ns)}–{fmt_ns(f.high_ns)}]",
                  Text(f.graph or "between replays"), Text(finding_text(f) + shared),
                  Text(action_text(f.action)))
    return t


def findings_lines(fs: Findings) -> list[str]:
    """The findings' summary lines: none without timed replays, nothing above noise, or how
    many were under the floor; and the streams a measurement refuted."""
    out = [f"findings: streams on {g}: the what-if predicted {gain_words(p)}, --try-streams "
           f"measured {gain_words(m)}; not listed" for g, p, m in fs.refuted]
    if not fs.timed:
        return out + ["findings: none (no timed replays: nothing was measured)"]
    if fs.under_floor:
        return out + [("findings: none above the floor: " if fs.nothing_above_noise else
                       f"findings: {len(fs.under_floor)} more not listed: ") + "; ".join(
            _unlisted(f, fs.min_gaps) for f in fs.under_floor[:4])
            + (f"; … {len(fs.under_floor) - 4} more" if len(fs.under_floor) > 4 else "")]
    if fs.nothing_above_noise:
        return out + [f"findings: nothing to gain above noise (every candidate saves under "
                      f"{fs.floor_pct:g}% of its span or under the replays' own spread)"]
    if fs.below_floor:  # a diagnosis kept without their figures
        return out + [f"findings: {fs.below_floor} more under the floor ({fs.floor_pct:g}% of "
                      "the span or the replays' spread), not listed"]
    return out


def _unlisted(f: Finding, min_gaps: int) -> str:
    """A candidate not listed, with its saving and why."""
    where = f"{f.kind} on {f.graph}" if f.graph else f"{f.kind} (gap between replays)"
    if f.kind == "host" and f.gaps < min_gaps:
        return (f"{where} {fmt_ns(f.saving_ns)} per replay from {f.gaps} gap(s) "
                f"({min_gaps} needed)")
    return (f"{where} {fmt_ns(f.saving_ns)} ({f.saving_pct:.1f}%), under its floor of "
            f"{fmt_ns(f.threshold_ns)}")


NARROW_FINDINGS = 100  # narrower, the findings are numbered lines: a table would split words


def findings_narrow(fs: Findings, width: int) -> list[str]:
    """The ranked findings as numbered lines wrapped to ``width`` (never inside a figure or a
    word), each with its command on a line of its own."""
    out = ["What to do next (ranked by predicted saving per replay)"]
    for i, f in enumerate(fs.findings, 1):
        shared = f" (after {fmt_ns(f.shared_ns)} claimed above)" if f.shared_ns > 1 else ""
        out += wrap(0, f"{i}. {saving_text(f)}, {safe(f.graph or 'between replays')}: "
                    f"{safe(finding_text(f))}{shared}", width)
        out += wrap(3, f"try: {safe(action_text(f.action))}", width)
    return out


def print_findings(diag: Diagnosis, console: Optional[Console] = None) -> None:
    con = console or Console()
    if diag.findings.findings and con.width < NARROW_FINDINGS:
        for line in findings_narrow(diag.findings, con.width):
            con.print(Text(line))
    elif diag.findings.findings:
        con.print(findings_table(diag.findings))
    for line in findings_lines(diag.findings):
        con.print(Text(line))


# ---------------------------------------------------------------- verdicts and assumptions

def verdict_lines(diag: Diagnosis) -> list[str]:
    several = len(diag.graphs) > 1
    return [(f"{v.graph}: " if several and v.graph else "") + verdict_text(v)
            for v in diag.all_verdicts]


def assumption_text(a: Assumption) -> str:
    if a.code == "edges_dropped":
        return f"{a.count} edge(s) naming no node of the graph (or a node itself) left out"
    if a.code == "untimed_as_zero":
        return ("nodes without timing taken as 0 ns ("
                + ", ".join(f"{k} {n}" for k, n in a.kinds) + ")")
    if a.code == "node_counts":
        why = ("not replayed while traced" if a.why == "not_replayed_traced"
               else "no timed replays")
        return f"{why}: each work node counted as 1 (lengths are node counts)"
    return a.code


def selection_text(sel: ReplaySelection) -> Optional[str]:
    """The replay selection in words, where it left something out or kept a cold replay."""
    if sel.set_aside:
        rest = sel.traced - len(sel.set_aside)
        events = (f"; idle, gaps and launch latency from replay(s) "
                  f"{', '.join(map(str, sel.used))}, whose events were kept"
                  if sel.with_events < sel.traced else "")
        return (f"the cold first replay (span {fmt_ns(sel.set_aside_span_ns)} against "
                f"{fmt_ns(sel.others_span_ns)} for the others) is set aside: the figures come "
                f"from the other {rest} traced replay(s){events}")
    if sel.only_cold:
        return (f"the only replay with events is a cold first one (span "
                f"{fmt_ns(sel.set_aside_span_ns)} against {fmt_ns(sel.others_span_ns)} for the "
                "others): its figures stand, read them as an upper bound")
    if sel.traced > sel.with_events > 0:
        return (f"span, GPU work and critical path from the {sel.traced} traced replays; "
                f"idle, gaps and launch latency from the {sel.with_events} whose events "
                "were kept")
    return None


def whatif_lines(wi: WhatIf) -> list[str]:
    """The what-if's prediction and the assumptions it made."""
    cal = wi.calibration
    out = [f"what-if on up to {wi.max_streams} streams (the plan uses {wi.streams}, "
           f"{wi.chains} chains): span {fmt_ns(wi.predicted_span_ns)} "
           f"[{fmt_ns(wi.low_ns)}–{fmt_ns(wi.high_ns)}] against {fmt_ns(wi.measured_span_ns)} "
           f"({gain_words(wi.gain_pct)}); with nothing shared it would be "
           f"{fmt_ns(wi.no_contention_ns)}"]
    dev = {"properties": "from the recorded device properties",
           "name_table": "from the GPU's name", "assumed": "assumed (GPU not known)"}
    out.append(f"what-if assumed: {wi.sm_count} SMs, compute capability "
               f"{wi.compute_capability} ({dev.get(wi.device_source, wi.device_source)})"
               + ("; registers per thread not recorded: the worst case (255, or what lets one "
                  "block fit) for the prediction, 32 for the interval's low end"
                  if wi.registers == "worst_case" else "")
               + ("; interference calibrated from this bundle's concurrent nodes "
                  f"({cal.groups} launch signature(s))" if cal.source == "bundle"
                  else "; interference from a prior measured on an H200 (no concurrent nodes "
                  "here)")
               + f": +{fmt_ns(cal.added_ns)} and +{100 * cal.slowdown_per_overlap:.0f}% per "
               f"node beside others, +{fmt_ns(cal.latency_added_ns)} per dependency "
               f"(±{cal.uncertainty_pct:.0f}%), +{fmt_ns(cal.cross_stream_ns)} per wait on "
               "another stream")
    return out


# ---------------------------------------------------------------- the table

def _path_cell(o: GraphDiagnosis, any_timed: bool) -> str:
    if o.error == "cycle":
        return "cycle"
    cp = o.critical_path
    if cp is None:
        return "-"
    if o.timed:
        return fmt_ns(cp.length_ns)
    # a bundle whose other graphs were replayed: a never-replayed graph has no path to show;
    # with no timed replay at all, the longest chain in work nodes, of the graph's (the
    # title says "node counts"), never a bare count that reads as the graph's size
    return "-" if any_timed else f"{cp.length_nodes} of {o.work_nodes} nodes"


def _what_if_cell(o: GraphDiagnosis) -> str:
    so = o.stream_order
    if o.what_if is not None:
        return f"{fmt_ns(o.what_if.predicted_span_ns)} {gain_words(o.what_if.gain_pct)}"
    if so is None or not so.op_info:
        return "-"
    return "no gain"


def _tried(m: Optional[MeasuredStreams]) -> str:
    """The ``tried`` cell: the span measured over more streams and its gain."""
    if m is None:
        return "-"
    if m.error:
        return "failed"
    if not m.span_ns:
        return "-"
    return (f"{fmt_ns(m.span_ns)} {gain_words(m.gain_pct or 0.0)}"
            + ("" if m.outputs_equal else " (within tolerance)" if m.within_tolerance
               else " (outputs differ)"))


def diagnosis_table(diag: Diagnosis, max_rows: int = MAX_GRAPH_ROWS,
                    width: Optional[int] = None, notes_out: Optional[list[str]] = None
                    ) -> Table:
    """One row per graph: critical path, work and span, parallelism achieved / the DAG
    allows, idle share of the span, launch latency, the what-if (predicted span on more
    streams) and, where measured, the span --try-streams found. Above ``max_rows`` graphs, the
    longest critical paths (``--json`` has them all). ``notes_out``: a list that gets the
    table's notes, one a line, instead of the caption."""
    rows = list(diag.graphs)
    if len(rows) > max_rows:
        rows = sorted(rows, key=lambda o: -float(
            (o.critical_path.length_ns if o.critical_path else None) or 0))[:max_rows]
    tried = any(o.what_if_measured is not None and o.what_if_measured.max_streams
                for o in rows) and (width is None or width >= TRIED_MIN_WIDTH)
    any_timed = any(o.timed for o in diag.graphs)
    notes = []
    if len(rows) < len(diag.graphs):
        notes.append(f"{len(rows)} of {len(diag.graphs)} graphs shown (longest critical "
                     "path first; --json has all)")
    if any(o.timed and o.critical_path is not None for o in rows):
        notes.append("path: the nodes' medians along the longest chain; work: their durations "
                     "summed per replay, the median (no latencies in either)")
    if any(o.what_if is not None for o in rows):
        notes.append("what-if: the span predicted on more streams, contention included")
    if tried:
        notes.append("tried: the span over more streams (--try-streams), against the graph's in "
                     "the same alternated replays")
    if any(o.timed and o.stream_order is not None and not o.stream_order.op_info for o in rows):
        notes.append("what-if -: no memory ranges recorded (no stream-order analysis)")
    if any(o.timed and not o.launch_recorded for o in rows):
        notes.append("launch latency n/r: no launch record matched these replays"
                     if diag.launch_recorded else "launch latency n/r: launches not recorded "
                     "(a bundle from before launch records)")
    if any_timed and any(not o.timed for o in rows):
        notes.append("-: a graph never replayed while traced")
    title = ("Diagnosis (median per replay)" if any_timed
             else "Diagnosis (no timed replays: node counts)")
    if notes_out is not None:
        notes_out.extend(notes)
    t = Table(title=title, title_justify="left", caption_justify="left",
              caption=None if notes_out is not None else ("; ".join(notes) or None))
    t.add_column("graph", overflow="fold", ratio=1)
    for col in ("path", "work", "span", "par/DAG", "idle", "launch\nlatency"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("what-if", justify="right")
    if tried:
        t.add_column("tried", justify="right")
    for o in rows:
        par, dag = o.parallelism, o.dag_parallelism
        t.add_row(
            Text(o.graph), _path_cell(o, any_timed),
            fmt_ns(o.work_ns) if o.timed else "-", fmt_ns(o.span_ns),
            "-" if par is None or dag is None else f"{par:.2f}/{dag:.2f}",
            _share(o.idle_pct),
            fmt_ns(o.launch_latency_ns) if o.launch_recorded else ("n/r" if o.timed else "-"),
            _what_if_cell(o), *([_tried(o.what_if_measured)] if tried else []))
    return keep_figures(t)


# ---------------------------------------------------------------- the lines below the table

def _measured_line(m: MeasuredStreams) -> Optional[str]:
    """What capture --try-streams found, in one line (None: nothing measured)."""
    if m.error:
        return None  # a failure is a verdict
    if not (m.span_ns and m.one_stream_ns):
        if m.max_streams:
            return (f"--try-streams {m.max_streams}: no span measured (the tracer kept no "
                    "record of the re-captured graph's replays)")
        return None
    iqr = m.span_iqr_ns
    out = (f"re-captured over {m.streams} of up to {m.max_streams} streams "
           f"({m.ops} aten ops, {m.cross_stream_waits} cross-stream wait(s)): span "
           f"{fmt_ns(m.span_ns)}"
           + (f" (IQR {fmt_ns(iqr[0])}-{fmt_ns(iqr[1])})" if iqr else "")
           + f" against {fmt_ns(m.one_stream_ns)} on one stream, {m.replays} replays of "
           f"each alternated ({gain_words(m.gain_pct or 0.0)})")
    if m.off_prediction_pct is not None:
        off = m.off_prediction_pct
        out += (f"; the what-if predicted {fmt_ns(m.predicted_ns)} (its figure scaled to "
                "these replays' one-stream span), the measurement lies "
                + (f"{abs(off):.0f}% {'above' if off > 0 else 'below'} it"
                   if abs(off) >= 0.5 else "on it")
                + (", inside its interval" if m.within_interval else ", outside its interval"))
    out += ("; outputs equal" if m.outputs_equal else
            f"; outputs within tolerance, not bitwise ({differ_words(m)})" if m.within_tolerance
            else f"; outputs DIFFER ({differ_words(m)})")
    return out


def _edges(edges: tuple[tuple[int, int], ...], total: int, shown: int = 4) -> str:
    """The first ``shown`` edges, and how many more there are."""
    out = ", ".join(f"#{u}→#{v}" for u, v in edges[:shown])
    return out + (f", … {total - shown} more" if total > shown else "")


def _run(c: Chain) -> str:
    """One stream run a stream-order-only edge cut: its nodes, modules, work."""
    nodes = f"#{c.first}" if c.first == c.last else f"#{c.first}–#{c.last}"
    return f"{nodes} {c.module} {fmt_ns(c.work_ns)}"


def _gap_is_launch(med: Any) -> str:
    """Where each replay was launched while the one before still ran, the gap to the next
    replay is also that replay's launch latency: said once, here."""
    if not (med.launch_queued_ns and med.gap_after_ns and med.launch_ns):
        return ""
    return (" (each replay was launched while the one before ran: the next replay's launch "
            "latency is this gap)")


def _graph_lines(o: GraphDiagnosis) -> list[str]:
    head = f"{o.graph}: "
    out: list[str] = []
    sel = selection_text(o.selection)
    if sel and o.timed:
        out.append(head + sel)
    med = o.median
    cp = o.critical_path
    if o.replays and cp is not None:
        out.append(head + f"{len(cp.nodes)} of {o.nodes} nodes on the critical path; "
                   f"dependency gaps {fmt_ns(med.dep_gap_ns)}, idle {fmt_ns(med.idle_ns)}, "
                   f"gap to the next replay {fmt_ns(med.gap_after_ns)}{_gap_is_launch(med)}"
                   + (f", two or more nodes running {_share(o.concurrency_pct)} of the span"
                      if o.streams > 1 else ", one stream"))
    if o.error == "cycle":
        out.append(head + "the edges form a cycle: no critical path (the replays' figures "
                   "stand)")
    if cp is not None and o.timed:
        every = cp.modules_rolled_up or cp.modules
        if every:
            rest = every[4:]
            out.append(head + "critical path by module: " + ", ".join(
                f"{m.module} {m.pct:.0f}%" for m in every[:4])
                + (f", {len(rest)} more {sum(m.pct for m in rest):.0f}%" if rest else ""))
    near = o.slack.near_critical[:3] if o.slack is not None and o.timed else ()
    if near:
        out.append(head + "nearest off the path: " + ", ".join(
            f"#{x.local_id} {x.name} (slack {fmt_ns(x.slack_ns)})" for x in near))
    so = o.stream_order
    if so is not None and so.op_info and so.stream_order_only_edges:
        chains = "; ".join(_run(c) for c in so.chains[:4])
        if len(so.chains) > 4:
            chains += f"; … ({len(so.chains) - 4} more)"
        out.append(head + f"{so.stream_order_only_edges} stream-order-only edge(s) "
                   f"({_edges(so.edges, so.stream_order_only_edges)}); the runs of one stream "
                   f"they cut: {chains}")
    if o.what_if is not None:
        out.extend(head + x for x in whatif_lines(o.what_if))
    measured = _measured_line(o.what_if_measured) if o.what_if_measured else None
    if measured:
        out.append(head + measured)
    if so is not None and so.op_info and so.nodes_without_op_info:
        out.append(head + f"{so.nodes_without_op_info} node(s) without op info kept as hard "
                   "dependencies")
    out.extend(head + "assumed: " + assumption_text(a) for a in o.assumptions)
    return out


def _graphs(n: int, what: str = "graph") -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def untimed_words(diag: Diagnosis, replays: Optional[Mapping[str, Optional[int]]] = None
                  ) -> list[str]:
    """Why the graphs without a timed replay have none, counted: captured but never replayed
    (``replays``: each graph's replays over the run, where the bundle records them), replayed
    but never traced, traced without events kept."""
    untimed = [o for o in diag.graphs if not o.timed]
    if len(untimed) == len(diag.graphs):
        return []  # the title says it: no timed replays
    counts = dict.fromkeys(("captured but never replayed", "replayed but never traced",
                            "never replayed while traced", "traced without events kept"), 0)
    for o in untimed:
        r = (replays or {}).get(o.graph)  # None: the bundle does not say
        key = ("captured but never replayed" if r == 0
               else "traced without events kept" if o.selection.traced
               else "never replayed while traced" if r is None else "replayed but never traced")
        counts[key] += 1
    return [f"{_graphs(n)} {why}" for why, n in counts.items() if n]


def more_line(diag: Diagnosis, shown: int,
              replays: Optional[Mapping[str, Optional[int]]] = None) -> Optional[str]:
    """The line under the first ``shown`` graphs' details: how many more graphs have details
    in --json (traced ones, where any graph was), and why the others have no figures."""
    timed = sum(o.timed for o in diag.graphs)
    more = (timed or len(diag.graphs)) - shown
    parts = ([f"details of {more} more {'traced ' if timed else ''}"
              f"{'graph' if more == 1 else 'graphs'}: --json"] if more > 0 else [])
    parts += untimed_words(diag, replays)
    return f"({'; '.join(parts)})" if parts else None


def diagnosis_lines(diag: Diagnosis, graphs: int = 3,
                    replays: Optional[Mapping[str, Optional[int]]] = None) -> Group:
    """:func:`diagnosis_text` as rich lines."""
    return Group(*(Text(x) for x in diagnosis_text(diag, graphs, replays)))


def diagnosis_text(diag: Diagnosis, graphs: int = 3,
                   replays: Optional[Mapping[str, Optional[int]]] = None) -> list[str]:
    """What the table does not say: the replays used, the critical path's modules,
    near-critical nodes, the serialized chains and the what-if, assumptions and verdicts (for
    the first ``graphs`` timed graphs; ``replays``: each graph's replays over the run, where
    the bundle records them, to say which graphs were never replayed)."""
    out: list[str] = []
    # the details of timed graphs first (a ladder's never-replayed buckets have none)
    timed = [o for o in diag.graphs if o.timed]
    shown = (timed or list(diag.graphs))[:graphs]
    for o in shown:
        out.extend(_graph_lines(o))
    more = more_line(diag, len(shown), replays)
    if more:
        out.append(more)
    if diag.between_replays:
        out.append(between_text(diag.between_replays))
    # launches not recorded: the table's caption says so (launch n/r), once
    out.extend("verdict: " + v for v in verdict_lines(diag))
    return out


def between_text(btw: BetweenReplays) -> str:
    """The gaps between replays (last node end to the next replay's first node) in one
    line."""
    note = {"own_replay_loop": "the replays were driven by graphscope's own replay loop, not "
                               "by the program",
            "traced_one_at_a_time": "each traced replay was started, synchronized and flushed "
                                    "by graphscope's tracer: the gaps hold that overhead "
                                    "besides the program's own time"}
    return (f"gaps between replays: {btw.pairs}, median {fmt_ns(btw.median_gap_ns)} (max "
            f"{fmt_ns(btw.max_gap_ns)}) with no graph node running, against a median replay "
            f"span of {fmt_ns(btw.median_span_ns)}"
            + (f" ({note.get(btw.note, btw.note)})" if btw.note else ""))


def print_diagnosis(diag: Union[Diagnosis, Mapping[str, Any]],
                    console: Optional[Console] = None,
                    replays: Optional[Mapping[str, Optional[int]]] = None) -> None:
    """The findings first, then the table, its notes and the lines below it. ``diag``: the
    diagnosis, or its JSON form (a report's section); ``replays``: each graph's replays over
    the run, where the bundle records them."""
    if not isinstance(diag, Diagnosis):
        diag = from_json(Diagnosis, diag)
    con = console or Console()
    print_findings(diag, con)
    notes: list[str] = []
    con.print(diagnosis_table(diag, width=con.width, notes_out=notes))
    lines = [*notes, *diagnosis_text(diag, replays=replays)]
    for line in lines:  # at the console's width, never inside a figure (fmt.wrap)
        for part in wrap(0, line, con.width):
            con.print(Text(part))


def words(diag: Diagnosis) -> dict[str, Any]:
    """The sentences and table cells the views need beside the diagnosis's numbers (the HTML
    page draws its Diagnosis tab from these, as the terminal words them; Markdown): the
    verdicts, each finding's text and command, each graph's cells, lines and assumptions."""
    any_timed = any(o.timed for o in diag.graphs)
    return {
        "verdicts": verdict_lines(diag),
        "findings": [{"saving": saving_text(f), "graph": f.graph or "between replays",
                      "text": finding_text(f), "try": action_text(f.action)}
                     for f in diag.findings.findings],
        "findings_note": findings_lines(diag.findings),
        "between_replays": between_text(diag.between_replays) if diag.between_replays else None,
        "graphs": {o.graph: {"selection": selection_text(o.selection) if o.timed else None,
                             "what_if": whatif_lines(o.what_if) if o.what_if else [],
                             "assumptions": [assumption_text(a) for a in o.assumptions],
                             "path": _path_cell(o, any_timed),
                             "what_if_cell": _what_if_cell(o),
                             "tried": _tried(o.what_if_measured),
                             "lines": _graph_lines(o)}
                   for o in diag.graphs},
    }
