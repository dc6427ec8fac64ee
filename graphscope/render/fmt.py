"""The formatting every output shares: durations, byte sizes, names made safe for a terminal,
figures kept whole in narrow tables. Plain functions of numbers and strings (no rich import at
module level, no model): capture's messages use them too."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from rich.text import Text as _RichText

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe(s: object) -> str:
    """A name from a bundle, made harmless for a terminal: control characters (escape
    sequences included) shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(s))


def Text(s: object = "", **kw: Any) -> _RichText:  # noqa: N802 - rich's name, made safe
    """rich's Text (never markup) of ``s`` with control characters escaped. rich is imported
    here, when a table is drawn: capture's messages import this module without it."""
    from rich.text import Text as RichText

    return RichText(safe(s), **kw)


def fmt_ns(ns: Optional[float]) -> str:
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def signed_ns(v: float) -> str:
    """A time delta with its sign (``+1.2 µs``, ``-80 ns``); ``0 ns`` where it rounds to
    nothing, without a sign."""
    mag = fmt_ns(abs(v))
    return mag if mag == "0 ns" else ("+" if v > 0 else "-") + mag


def fmt_s(s: Optional[float]) -> str:
    """A duration in seconds (capture, instantiate): ``12.3 ms`` below a second."""
    if s is None:
        return "-"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def svg_key(rank: Optional[int], graph: str) -> str:
    """The key of one graph's drawings in the HTML report (``render.dot.graph_svgs`` draws
    them, ``render.html`` refers to them)."""
    import json

    return json.dumps([rank, graph])


MAX_ROWS = 80  # module rows report and diff show without --depth


def bundle_labels(a: str, b: str) -> tuple[str, str]:
    """Two bundle paths as a title names them: the fewest trailing path parts that tell them
    apart (``runs/old/b.capture`` and ``runs/new/b.capture`` → ``old/b.capture`` and
    ``new/b.capture``), so a title does not grow with where the bundles sit."""
    pa, pb = (os.path.abspath(p).split(os.sep)[1:] or [p] for p in (a, b))
    k = 1
    while pa[-k:] == pb[-k:] and k < max(len(pa), len(pb)):
        k += 1
    if pa[-k:] == pb[-k:]:  # one bundle twice: its own name
        k = 1
    return "/".join(pa[-k:]), "/".join(pb[-k:])


def depth_that_fits(rows: list[dict[str, Any]], max_rows: int = MAX_ROWS) -> Optional[int]:
    """Without --depth, the deepest module level whose rows (``level`` each) fit in
    ``max_rows``, where the whole tree does not; None where it does (or nothing fits)."""
    levels = sorted({r["level"] for r in rows})
    fits = [lv for lv in levels if sum(1 for r in rows if r["level"] <= lv) <= max_rows]
    return fits[-1] if fits and fits[-1] < levels[-1] else None


_MARKUP = re.compile(r"\[/?[a-z #0-9]*\]")  # rich's colour tags around a figure
_FIGURE = re.compile(r"^(?:[-+±]?\d[\d.,]*(?: ?[a-zA-Zµ%]+)?|[\d.]+/[\d.]+|-|new|gone|n/r)$")


MAX_GRAPH_ROWS = 50  # rows of graphs a terminal table shows: --json and the HTML have them all
PIPE_WIDTH = 100  # columns for tables written to a pipe or file, unless COLUMNS says


def output_width() -> int:
    """The width the command's console prints at: ``COLUMNS``, else the terminal's, else
    (a pipe or a file) ``PIPE_WIDTH``."""
    import shutil
    import sys

    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((80, 24)).columns
    return PIPE_WIDTH


def keep_figures(table: Any, width: Optional[int] = None) -> Any:
    """A rich ``Table`` whose columns of figures (``190.0 µs``, ``36.0 MiB``, ``+11.4%``,
    ``-``) do not wrap inside a figure: such a column gets a minimum width of its widest cell
    (its header may still wrap), so a narrow terminal wraps names and headers instead
    (``190.`` over ``0 µs`` reads as two values). Only where the table still fits ``width``
    (the terminal's, ``COLUMNS`` first): rich crops a table wider than that, which would hide
    whole columns. Duck-typed: no rich import here."""
    width = width or output_width()
    mins = []
    need = 1
    for col in table.columns:
        cells = [_MARKUP.sub("", c) if isinstance(c, str) else str(getattr(c, "plain", c))
                 for c in getattr(col, "_cells", ())]
        figures = [c.strip() for c in cells if c.strip()]
        head = max((len(x) for x in str(getattr(col.header, "plain", col.header)).split()),
                   default=1)
        if figures and all(_FIGURE.match(c) for c in figures):
            w = max(len(c) for c in figures)
            mins.append((col, w))
        else:  # a name column: what it needs at least (it wraps)
            w = min(8, max((len(c) for c in cells), default=1))
        need += max(w, min(head, 8)) + 3  # a header word, padding and the border
    if need > width and len(table.columns) > 1:
        # too wide for the terminal: no vertical rules, paddings collapsed (a column costs its
        # figure and two characters, not three), then the same check
        from rich import box

        table.box, table.show_edge, table.pad_edge = box.SIMPLE_HEAD, False, False
        table.collapse_padding = True
        need -= len(table.columns) + 1
    if need <= width:
        for col, w in mins:
            col.min_width = max(col.min_width or 0, w)
    return table


def gain_words(pct: float) -> str:
    """A measured change of span in words: "-45%", "no gain" (under 1% either way), "+21%,
    slower"."""
    if pct >= 1.0:
        return f"-{pct:.0f}%"
    return "no gain" if pct > -1.0 else f"+{-pct:.0f}%, slower"


def verdict_text(v: Any) -> str:
    """One verdict of the diagnosis (``analysis.diagnosis.Verdict``: a code and its numbers) in
    words, its graph named by the caller where there are several. Here because every output
    that shows verdicts (the diagnosis, the ranks) words them alike."""
    launch = (f"; launch latency is {v.launch_pct:.0f}% of launch latency + span"
              if getattr(v, "launch_pct", None) else "")
    if v.code == "latency_bound" and getattr(v, "short_pct", None) is None:  # an older diagnosis
        return (f"launch/dependency-latency bound: {v.work_nodes} work nodes of median "
                f"{fmt_ns(v.median_node_ns)}; {v.idle_pct or 0:.0f}% of the span is idle"
                + launch)
    if v.code == "latency_bound":
        return (f"launch/dependency-latency bound: {v.short_pct:.0f}% of the span is in the "
                f"critical path's {v.short_nodes} work nodes under {fmt_ns(v.short_under_ns)} "
                f"(of {v.work_nodes}) and in idle gaps ({v.idle_pct or 0:.0f}%)" + launch)
    if v.code == "dag_parallelism_unused":
        where = ("serialized on one stream" if (v.streams or 0) <= 1
                 else f"under-parallelized on its {v.streams} streams")
        return (f"{where}: the DAG allows {v.dag_parallelism:.2f}x parallelism, the replay "
                f"achieved {v.parallelism:.2f}x")
    if v.code == "serialized":
        return (f"serialized on one stream: {v.edges} stream-order-only edge(s); on up to "
                f"{v.max_streams} streams (the plan uses {v.streams}) the span would be "
                f"{fmt_ns(v.to_ns)} [{fmt_ns(v.low_ns)}–{fmt_ns(v.high_ns)}] against "
                f"{fmt_ns(v.from_ns)} (-{v.gain_pct or 0:.0f}%)" + _as_finding(v))
    if v.code == "streams_measured":
        out = (f"measured on {v.streams} stream(s) (--try-streams {v.max_streams}): span "
               f"{fmt_ns(v.to_ns)} against {fmt_ns(v.from_ns)} on one stream in the same "
               f"replays ({gain_words(v.gain_pct or 0.0)})")
        if not v.outputs_equal:
            diff = ("output structure differs" if v.max_abs_diff is None
                    else f"max |diff| {v.max_abs_diff:.3g}")
            own = (f", the graph against itself {v.own_max_abs_diff:.3g}"
                   if v.own_max_abs_diff else "")
            out += (f"; outputs within tolerance, not bitwise ({diff}{own})"
                    if v.within_tolerance else
                    f"; its outputs differ from the graph's ({diff}{own}): an ordering the "
                    "stream plan missed, or a nondeterministic model")
        return out + (_as_finding(v) if (v.gain_pct or 0) > 0 else "")
    if v.code == "streams_failed":
        return (f"--try-streams {v.max_streams}: the capture over more streams failed: "
                f"{v.error}")
    if v.code == "host_bound":
        gaps = getattr(v, "gaps", None)
        return (f"host bound: the gap between replays (median {fmt_ns(v.from_ns)}"
                + (f" over {gaps} gap(s)" if gaps else "")
                + f") is longer than a replay (median span {fmt_ns(v.to_ns)})" + _as_finding(v))
    return v.code


def _as_finding(v: Any) -> str:
    """Where a verdict's finding is not listed: its saving per replay and why (under the
    findings' floor, or measured on too few gaps between replays)."""
    if getattr(v, "listed", None) is not False or v.saving_ns is None:
        return ""
    if v.unlisted == "few_gaps":
        return (f"; {fmt_ns(v.saving_ns)} per replay, not listed as a finding: {v.gaps} gap(s) "
                "are too few to trust")
    return (f"; its finding, {fmt_ns(v.saving_ns)} per replay, is under the findings' floor "
            f"of {fmt_ns(v.threshold_ns)}: not listed")


# a figure and its unit, or a name and the share after it ("L.blocks 89%"): never apart
_FIGURE_SPACE = re.compile(r"(\d) (ns|µs|ms|s|B|KiB|MiB|GiB|%)(?=\W|$)|(\S) (\d+%)")


def wrap(indent: int, text: str, width: int) -> list[str]:
    """``text`` wrapped to ``width`` with a hanging indent, never inside a figure (``583.8
    µs``) and never inside a word: a word longer than the line stays whole."""
    import textwrap

    protected = _FIGURE_SPACE.sub(
        lambda m: f"{m.group(1)}\x00{m.group(2)}" if m.group(1) else
        f"{m.group(3)}\x00{m.group(4)}", text)
    lines = textwrap.wrap(protected, width=max(20, width), initial_indent=" " * indent,
                          subsequent_indent=" " * (indent + 2), break_long_words=False,
                          break_on_hyphens=False)
    return [ln.replace("\x00", " ") for ln in lines]
