"""The ranks section of a multi-rank bundle (``analysis.ranks.RanksSection``) in words:
rich renderables for the terminal (:func:`terminal`) and GitHub-flavoured Markdown
(:func:`markdown`). Formatting only: every number comes from the section."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from rich.console import Group
from rich.table import Table
from rich.text import Text as _RichText

from ..analysis import Absent, Maybe
from ..analysis.collectives import AlignedCollective, Alignment, Serves
from ..analysis.ranks import RanksSection, StepRank
from ..analysis.stragglers import Straggler
from .fmt import fmt_bytes, fmt_ns, keep_figures, output_width, safe, verdict_text

KIND_WORDS = {"all_reduce": "all-reduce", "all_gather": "all-gather",
              "reduce_scatter": "reduce-scatter", "broadcast": "broadcast",
              "all_to_all": "all-to-all", "send_recv": "send/recv", "other": "collective"}
CLOCK_WORDS = {
    "recorded": "CUPTI timestamps of one host (each rank's manifest holds its events' clock "
                "origin): one clock for every rank",
    "not_recorded": "no clock origin recorded (each rank's events start at its own first "
                    "kernel): each collective aligned on its end, which every rank reaches "
                    "together",
    "hosts_differ": "the ranks ran on different hosts: each collective aligned on its end, "
                    "which every rank reaches together",
    "ends_disagree": "the ranks' clock origins put the ends of their collectives far apart: "
                     "each collective aligned on its end instead",
}


ABSENT_WORDS = {
    "no_collectives": "no rank's graphs hold a collective kernel",
    "unmatched": "the ranks' first collectives differ (kind, bucket or module served)",
    "no_events": "no replay kept events of the collectives on every rank",
}


def Text(s: object = "", **kw: Any) -> _RichText:  # noqa: N802 - rich's name, made safe
    return _RichText(safe(s), **kw)


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.0f}%"


def serves_words(s: Serves) -> str:
    """What a collective serves: ``bucket 0``, ``L.h.0 (prefetch)``, a module."""
    if s.bucket is not None:
        return f"bucket {s.bucket}"
    if s.fsdp_module is not None:
        return s.fsdp_module + (" (prefetch)" if s.prefetch else "")
    return s.scope


def collective_words(c: AlignedCollective | Straggler) -> str:
    """``bucket 0's all-reduce``, ``L.h.0's all-gather (prefetch)``; the graph's name too
    where it is not ``step``."""
    kind = KIND_WORDS.get(c.kind, c.kind)
    s = c.serves
    where = "" if c.graph == "step" else f" in {c.graph}"
    if s.bucket is not None or s.fsdp_module is not None:
        pre = " (prefetch)" if s.prefetch else ""
        name = f"bucket {s.bucket}" if s.bucket is not None else s.fsdp_module
        return f"{name}'s {kind}{pre}{where}"
    return f"{kind} #{c.index} ({s.scope}){where}"


def straggler_sentence(s: Straggler, replays: int) -> str:
    """One straggler in words: who is late to what, who waits, and why."""
    out = (f"rank {s.rank} is late to {collective_words(s)} by {fmt_ns(s.late_ns)} (median of "
           f"{replays} replays): rank {s.waiting_rank} waits {fmt_ns(s.wait_ns)} in it "
           f"(its own time {fmt_ns(s.own_ns)}). ")
    if s.cause == "work":
        out += f"Its work before it took {fmt_ns(s.work_excess_ns)} more than the other ranks'"
        if s.excess:
            e = s.excess[0]
            out += f", most in {e.module} ({e.phase}, +{fmt_ns(e.excess_ns)})"
        out += "."
    else:
        out += (f"Its work before it differs from the other ranks' by "
                f"{'+' if s.work_excess_ns >= 0 else '-'}{fmt_ns(abs(s.work_excess_ns))}: "
                f"it began the replay {fmt_ns(s.start_ns)} later (launched later, or still "
                "busy with earlier work).")
    if s.preceding_module:
        out += f" Work just before it: {s.preceding_module} ({s.preceding_phase})."
    return out


def step_sentence(st: Maybe[StepRank]) -> Optional[str]:
    if isinstance(st, Absent):
        return None
    what = ("its critical path without waiting in collectives" if st.waits_removed
            else "its critical path (waits in collectives included: not aligned)")
    out = f"Step set by rank {st.rank}: {what} is {fmt_ns(st.own_path_ns)}"
    if st.next_rank is not None:
        out += f", {fmt_ns(st.margin_ns)} longer than rank {st.next_rank}'s"
    return out + "."


def clock_sentence(a: Alignment) -> str:
    out = f"Clock: {CLOCK_WORDS.get(a.clock_reason, a.clock_reason)}."
    spread = [c.end_spread_ns for c in a.collectives if c.end_spread_ns is not None]
    if spread:
        out += f" Collective ends agree within {fmt_ns(max(spread))} (median per collective)."
    return out


def unmatched_sentences(a: Alignment) -> list[str]:
    why = {"count": "the ranks issue different numbers of collectives",
           "kind": "the ranks issue different kinds of collective",
           "serves": "the ranks' collectives serve different buckets or modules",
           "missing_graph": "the graph is missing on some rank"}
    return [f"{u.graph}: collectives from #{u.index} on not matched ({why.get(u.reason, u.reason)};"
            f" per rank: {', '.join(str(x) for x in u.counts)})" for u in a.unmatched]


# ---------------------------------------------------------------- rows shared by both views

def _totals_rows(s: RanksSection) -> tuple[list[str], list[list[str]]]:
    # short headers: a figure column's header does not wrap, so it sets the column's width
    head = ["rank", "work/replay", "span", "collectives", "waiting", "nodes"]
    rows = [[str(t.rank), fmt_ns(t.kernel_ns), fmt_ns(t.span_ns), fmt_ns(t.collective_ns),
             fmt_ns(t.wait_ns), str(t.work_nodes)] for t in s.totals]
    m = s.merged
    rows.append([f"all {m.ranks}", fmt_ns(m.kernel_ns), f"{fmt_ns(m.step_ns)} (max)",
                 fmt_ns(m.collective_ns), fmt_ns(m.wait_ns),
                 str(sum(t.work_nodes for t in s.totals))])
    return head, rows


def _collective_rows(s: RanksSection) -> tuple[list[str], list[list[str]]]:
    a = s.collectives if isinstance(s.collectives, Alignment) else None
    ranks = [t.rank for t in s.totals]
    head = ["collective", "kind", "own", *[f"r{r} wait" for r in ranks], "last", "late by"]
    rows = []
    for c in (a.collectives if a is not None else ()):
        own = min(x.own_ns for x in c.ranks)
        rows.append([f"{c.graph} #{c.index} {serves_words(c.serves)}",
                     KIND_WORDS.get(c.kind, c.kind), fmt_ns(own),
                     *[fmt_ns(x.wait_ns) for x in c.ranks],
                     "-" if c.last_rank is None else f"r{c.last_rank}",
                     "-" if c.last_rank is None else fmt_ns(c.late_ns)])
    return head, rows


def _diagnosis_rows(s: RanksSection) -> tuple[list[str], list[list[str]]]:
    head = ["rank", "graph", "span", "critical path", "without waits", "idle", "launch",
            "path's largest modules"]
    rows = []
    for d in s.diagnosis:
        for g in d.graphs:
            mods = ", ".join(f"{m.module} {m.pct:.0f}%" for m in g.path_modules)
            rows.append([str(d.rank), g.graph, fmt_ns(g.span_ns), fmt_ns(g.critical_path_ns),
                         fmt_ns(g.own_path_ns), _pct(g.idle_pct), fmt_ns(g.launch_ns), mods])
    return head, rows


def _fsdp_rows(s: RanksSection) -> tuple[list[str], list[list[str]]]:
    head = ["rank", "module", "op", "phase", "nodes", "time", "comm", "overlap"]
    rows = [[str(f.rank), r.module + (" (prefetch)" if r.prefetch else ""),
             KIND_WORDS.get(r.op, r.op), r.phase, str(r.nodes), fmt_ns(r.median_ns),
             fmt_ns(r.comm_ns), _pct(r.overlap_pct)] for f in s.fsdp for r in f.rows]
    return head, rows


def _bucket_rows(s: RanksSection) -> tuple[list[str], list[list[str]]]:
    head = ["rank", "bucket", "size", "nodes", "time", "comm", "overlap", "modules"]
    rows = []
    for e in s.ddp:
        for b in e.buckets:
            mods = ", ".join(b.modules[:6]) + (f" … +{len(b.modules) - 6}"
                                               if len(b.modules) > 6 else "")
            rows.append([str(e.rank), str(b.bucket), fmt_bytes(b.bucket_bytes), str(b.nodes),
                         fmt_ns(b.median_ns), fmt_ns(b.comm_ns), _pct(b.overlap_pct), mods])
    return head, rows


def _kernel_rows(s: RanksSection, top: int) -> tuple[list[str], list[list[str]]]:
    head = ["rank", "kernel", "count", "time", "% of replay"]
    rows = [[str(k.rank), r.kernel, str(r.count), fmt_ns(r.median_ns), f"{r.pct:.1f}"]
            for k in s.top_kernels for r in k.kernels[:top]]
    return head, rows


def _module_rows(s: RanksSection, depth: Optional[int], tree: bool
                 ) -> tuple[list[str], list[list[str]]]:
    """``tree``: a child indented under its parent by its last name (the terminal); else its
    whole path (Markdown collapses the indent)."""
    head = ["module", *[f"rank {t.rank}" for t in s.totals], "skew"]
    rows = []
    for m in s.modules:
        if depth is not None and m.level > depth:
            continue
        name = (("  " * m.level) + (m.module.rsplit(".", 1)[-1] if m.level else m.module)
                if tree else m.module)
        skew = ("only some ranks" if m.skew is None else f"{m.skew:.2f}") + (
            f" (r{m.slowest_rank})" if m.skew is None or m.skew > 1.05 else "")
        rows.append([name, *[fmt_ns(x) for x in m.per_rank_ns], skew])
    return head, rows


Rows = tuple[list[str], list[list[str]]]


def _sections(s: RanksSection, depth: Optional[int], top: int, tree: bool
              ) -> list[tuple[str, Rows, frozenset[int]]]:
    """(title, (head, rows), the columns of words, not figures) of each table."""
    out: list[tuple[str, Rows, frozenset[int]]] = [
        (f"Ranks ({s.world_size}, median per replay)", _totals_rows(s), frozenset())]
    if isinstance(s.collectives, Alignment):
        out.append(("Collectives across ranks (median per replay)", _collective_rows(s),
                    frozenset({0, 1})))
    out.append(("Diagnosis per rank", _diagnosis_rows(s), frozenset({1, 7})))
    out.append(("GPU time by module per rank (median per replay)",
                _module_rows(s, depth, tree), frozenset({0})))
    out.append((f"Top kernels per rank (top {top})", _kernel_rows(s, top), frozenset({1})))
    if s.ddp:
        out.append(("DDP gradient buckets per rank (backward, median per replay)",
                    _bucket_rows(s), frozenset({7})))
    if s.fsdp:
        out.append(("FSDP all-gathers and reduce-scatters per rank (median per replay)",
                    _fsdp_rows(s), frozenset({1, 2, 3})))
    return out


def sentences(s: RanksSection) -> list[str]:
    """The section's verdicts in words: stragglers, the step rank, the clock, what did not
    match, each rank's diagnosis verdicts."""
    out = []
    a = s.collectives if isinstance(s.collectives, Alignment) else None
    if isinstance(s.collectives, Absent) and s.collectives.reason != "one_rank":
        why = ABSENT_WORDS.get(s.collectives.reason, s.collectives.reason)
        out.append(f"Collectives not aligned across ranks: {why}.")
    if a is not None:
        out += [straggler_sentence(x, len(a.replays)) for x in s.stragglers]
        if not s.stragglers and a.collectives:
            out.append("No straggler: no rank waited for another in any collective beyond "
                       "noise.")
    if (st := step_sentence(s.step_rank)) is not None:
        out.append(st)
    if a is not None:
        out.append(clock_sentence(a))
        out += unmatched_sentences(a)
    out += [f"rank {d.rank}: " + (f"{v.graph}: " if v.graph and len(d.graphs) > 1 else "")
            + verdict_text(v) for d in s.diagnosis for v in d.verdicts]
    return out


def terminal(s: RanksSection, depth: Optional[int] = None, top: int = 5) -> Group:
    """The ranks section for the terminal: the totals and the collectives, the verdicts, then
    the other tables."""
    parts: list[Any] = []
    tables = _sections(s, depth, top, tree=True)
    width = output_width()
    for k, (title, (head, rows), words) in enumerate(tables):
        head, rows, under = _fit(head, rows, words, width)
        t = Table(title=title, title_justify="left")
        for i, h in enumerate(head):
            # a word column wraps between words, never inside one (up to 16 characters)
            longest = max((len(w) for x in [h, *(r[i] for r in rows)] for w in x.split()),
                          default=1)
            t.add_column(h, justify="left" if i in words else "right", no_wrap=i not in words,
                         overflow="fold" if i in words else "ellipsis",
                         min_width=min(longest, 16) if i in words else None)
        for row in rows:
            t.add_row(*[Text(x) for x in row])
        parts.append(keep_figures(t))
        parts += [Text(x) for x in under]
        if k == (1 if isinstance(s.collectives, Alignment) else 0):  # verdicts under numbers
            parts += [Text(x) for x in sentences(s)]
    return Group(*parts)


def _fit(head: list[str], rows: list[list[str]], words: frozenset[int], width: int
         ) -> tuple[list[str], list[list[str]], list[str]]:
    """A table whose last column is free text (a list of modules) and that cannot fit
    ``width`` with it: that column as lines under the table, each naming its row."""
    last = len(head) - 1
    if last < 2 or last not in words or not rows:
        return head, rows, []
    need = sum(max(len(h), *(len(r[i]) for r in rows)) + 3 for i, h in enumerate(head[:last]))
    if need + 24 <= width:  # room for the text column at a readable width
        return head, rows, []
    under = [f"  {head[0]} {r[0]}, {f'{head[1]} {r[1]}' if r[1].isdigit() else r[1]}: "
             f"{head[last]}: {r[last]}" for r in rows if r[last]]
    return head[:last], [r[:last] for r in rows], under


def _md_cell(x: str) -> str:
    return x.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def md_table(head: Sequence[str], rows: Sequence[Sequence[str]],
             words: frozenset[int] = frozenset({0})) -> str:
    """A GitHub-flavoured Markdown table: the columns ``words`` left-aligned, figures right."""
    align = [":---" if i in words else "---:" for i in range(len(head))]
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |",
             "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(s: RanksSection, depth: Optional[int] = None, top: int = 5) -> str:
    """The ranks section as Markdown: the verdicts first (a CI summary's reader looks for
    them), then the tables."""
    parts = ["## Ranks", ""]
    parts += [f"- {_md_cell(x)}" for x in sentences(s)]
    for title, (head, rows), words in _sections(s, depth, top, tree=False):
        if rows:
            parts += ["", f"### {title}", "", md_table(head, rows, words)]
    return "\n".join(parts) + "\n"
