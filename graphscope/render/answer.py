"""The answer a report opens with (analysis/answer.py), in words: lines that fit one
80-column screen, for the terminal and for Markdown. Formatting only."""

from __future__ import annotations

from typing import Any, Optional

from ..analysis.answer import (
    BUCKETS_NAMED,
    Answer,
    Bound,
    GraphGroup,
    GroupedFinding,
    LadderTrim,
)
from .fmt import fmt_bytes, fmt_ns, fmt_s, safe, verdict_text, wrap

MODE_WORDS = {
    "step": "a training step (forward, loss and backward in one graph)",
    "forward": "forward graphs (inference)",
    "callables": "make_graphed_callables' graphs",
    "run": "the graphs a program captured (graphscope run)",
}


def _range(lo: Optional[float], hi: Optional[float]) -> str:
    if lo is None or hi is None:
        return "-"
    return fmt_ns(lo) if fmt_ns(lo) == fmt_ns(hi) else f"{fmt_ns(lo)}–{fmt_ns(hi)}"


def bucket_list(names: tuple[str, ...]) -> str:
    shown = ", ".join(safe(x) for x in names[:BUCKETS_NAMED])
    return shown + (f", … {len(names) - BUCKETS_NAMED} more" if len(names) > BUCKETS_NAMED
                    else "")


def group_label(g: GraphGroup) -> str:
    """A group as the answer names it: the graph, or the site and its buckets."""
    if len(g.names) == 1:
        return safe(g.names[0])
    return f"{safe(g.site)} ({len(g.names)} graphs: {bucket_list(g.buckets)})"


def _what(a: Answer) -> str:
    sites = len(a.groups)
    graphs = sum(len(g.names) for g in a.groups)
    what = MODE_WORDS.get(a.mode or "", "captured graphs")
    count = f"{graphs} graph{'s' if graphs != 1 else ''}"
    if sites < graphs:
        count += f" from {sites} capture site{'s' if sites != 1 else ''}"
    replays = (f", {a.replays} traced replay{'s' if a.replays != 1 else ''}" if a.replays
               else ", no timed replays")
    return f"The bundle: {what}; {count}{replays}."


def _where(a: Answer) -> Optional[str]:
    if not a.modules or a.work_ns is None:
        return None
    parts = " · ".join(f"{safe(m.module)} {m.pct:.0f}%" for m in a.modules)
    per = ("for one replay of each graph" if len(a.groups) > 1 or
           sum(len(g.names) for g in a.groups) > 1 else "per replay")
    return f"GPU work {fmt_ns(a.work_ns)} {per}; it goes to {parts}."


def _bound(b: Bound, several: bool) -> str:
    figures = []
    if b.path_pct is not None:
        figures.append(f"critical path {b.path_pct:.0f}% of it")
    if b.idle_pct is not None:
        figures.append(f"{b.idle_pct:.0f}% idle")
    said = "; ".join(verdict_text(v) for v in b.verdicts) or "no verdict: nothing stands out"
    if b.graphs > 1:  # the range over the group, then one graph's figures and verdicts
        return (f"{safe(b.site)} ({b.graphs} graphs: {bucket_list(b.buckets)}): span "
                f"{_range(b.span_low_ns, b.span_high_ns)}; the longest, {safe(b.widest)}: "
                + ", ".join(figures) + "; " + said)
    head = f"{safe(b.site)}: " if several else ""
    return head + ", ".join([f"span {_range(b.span_low_ns, b.span_high_ns)}", *figures]) + (
        "; " + said)


def _finding(i: int, f: GroupedFinding) -> tuple[str, str]:
    from .diagnosis import action_text, finding_text

    where = safe(f.finding.graph) if len(f.graphs) == 1 else (
        f"{safe(f.site)} ({len(f.graphs)} graphs: {bucket_list(f.buckets)})")
    where = where or "between replays"
    saving = (f"{fmt_ns(f.high_ns)} ({f.pct:.0f}%) per replay" if len(f.graphs) == 1
              else f"{_range(f.low_ns, f.high_ns)} per replay of each graph")
    if f.program_ns:  # a program's graphs: times how often it replayed them
        saving += f" ({fmt_ns(f.program_ns)} over the run's replays)"
    return (f"{i}. {saving}, {where}: {safe(finding_text(f.finding))}",
            f"try: {safe(action_text(f.finding.action))}")


def answer_lines(a: Answer) -> list[tuple[int, str]]:
    """(indent, text) lines of the answer."""
    out = [(0, _what(a))]
    where = _where(a)
    if where:
        out.append((0, where))
    if a.bounds:
        several = len(a.bounds) > 1
        out.append((0, "What bounds it:" if not several else "What bounds each graph:"))
        out += [(2, _bound(b, several)) for b in a.bounds]
        if a.more_bounds:
            out.append((2, f"… {a.more_bounds} more (the Diagnosis below has every graph)"))
    if a.findings:
        out.append((0, "What to try first (predicted saving; the full list below):"
                    if not any(f.program_ns for f in a.findings) else
                    "What to try first (ranked by what it saves the program's run; the full "
                    "list below):"))
        for i, f in enumerate(a.findings, 1):
            said, tried = _finding(i, f)
            out += [(2, said), (5, tried)]
        if a.more_findings:
            out.append((2, f"… {a.more_findings} more below"))
    elif a.bounds and not a.trims:
        out.append((0, "What to try first: nothing found above noise (see the Diagnosis)."))
    out += [(0, _trim(t)) for t in a.trims]
    return out


def _trim(t: LadderTrim) -> str:
    """A ladder's buckets to drop, in one sentence."""
    parts = []
    if t.never_replayed:
        parts.append(f"{len(t.never_replayed)} bucket(s) never replayed "
                     f"({bucket_list(t.never_replayed)})")
    if t.no_faster:
        runs = ", ".join(f"{safe(b)} as {safe(up)}" for b, up in t.no_faster[:BUCKETS_NAMED])
        more = (f", … {len(t.no_faster) - BUCKETS_NAMED} more"
                if len(t.no_faster) > BUCKETS_NAMED else "")
        parts.append(f"{len(t.no_faster)} no faster than a larger one, which would serve them "
                     f"({runs}{more})")
    saves = [f"{fmt_s(t.capture_s)} of capture and instantiation" if t.capture_s else "",
             f"up to {fmt_bytes(t.segment_bytes)} of pool" if t.segment_bytes else ""]
    said = " and ".join(x for x in saves if x)
    return (f"Trim the bucket ladder {safe(t.site)}: " + "; ".join(parts)
            + (f": dropping them saves {said}." if said else "."))


def answer_text(a: Answer, width: int) -> str:
    """The answer for a terminal or a file, at most ``width`` columns a line where no single
    word is wider."""
    return "\n".join(ln for indent, text in answer_lines(a) for ln in wrap(indent, text, width))


def answer_markdown(a: Answer, code: Any) -> list[str]:
    """The answer as Markdown lines (``code``: how a name or a command is quoted)."""
    out = []
    for indent, text in answer_lines(a):
        if text.startswith("try: "):
            out.append(f"   try: {code(text[5:])}")
        elif indent:
            out.append(f"- {text}")
        else:
            out += ["", text]
    return out
