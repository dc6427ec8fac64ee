"""A bucket ladder's findings and Diagnosis with the site's graphs as one row (the ranges and
verdict counts of ``analysis.answer``): what `report` shows without --full where a capture
site has many graphs. Formatting only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from rich.console import Console
from rich.table import Table

from ..analysis.answer import DiagnosisGroup, GroupedFinding
from .answer import bucket_list
from .fmt import Text, fmt_bytes, fmt_ns, keep_figures, safe, verdict_text

WIDE = 100  # narrower, a group's ranges take two lines or a line of their own


def _range(lo: Optional[float], hi: Optional[float], f: Any = fmt_ns) -> str:
    if lo is None or hi is None:
        return "-"
    return f(lo) if f(lo) == f(hi) else f"{f(lo)}–{f(hi)}"


def _pct(v: float) -> str:
    return f"{v:.0f}%"


def _where(site: str, buckets: Sequence[str], names: Sequence[str]) -> str:
    if len(names) == 1:
        return safe(names[0]) or "between replays"
    return f"{safe(site)} ({len(names)} graphs: {bucket_list(tuple(buckets))})"


def grouped_graphs_table(groups: Sequence[Any], width: int = WIDE) -> Table:
    """The graphs by capture site (``analysis.answer.GraphGroup``): a bucket ladder as one row,
    with the range over its buckets; a site of few graphs keeps a row per graph. Under
    ``WIDE`` columns a range takes two lines, so that the site's name keeps one."""
    t = Table(title="Graphs (a capture site's buckets as one row: --full for each graph)",
              title_justify="left")
    t.add_column("graphs", overflow="fold", ratio=1)
    for col in ("nodes", "tagged", "replays", "traced", "time/replay"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("pool", justify="right", overflow="fold")
    for g in groups:
        n = len(g.names)
        name = Text(g.site + ":" if n > 1 else g.names[0])
        if n > 1:  # the site on a line of its own, its buckets below
            name.append("\n" + safe(f"{n} graphs, {g.buckets[0]} … {g.buckets[-1]}"))
        nodes = str(g.nodes_low) if g.nodes_low == g.nodes_high else (
            f"{g.nodes_low}–{g.nodes_high}")
        time = "-" if g.low_ns is None else fmt_ns(g.low_ns) if g.low_ns == g.high_ns else (
            f"{fmt_ns(g.low_ns)}–" + ("\n" if width < WIDE else "") + fmt_ns(g.high_ns))
        pool = "-" if g.pool_bytes is None else fmt_bytes(g.pool_bytes) + (
            f" ({g.pools} pools)" if g.pools > 1 else "")
        t.add_row(name, nodes, f"{g.attributed}/{g.work_nodes}",
                  "-" if g.replays is None else str(g.replays), f"{g.traced} of {n}", time,
                  Text(pool))
    return keep_figures(t)


def grouped_findings_table(findings: Sequence[GroupedFinding]) -> Table:
    """The ranked findings, one row per kind of finding and capture site."""
    from .diagnosis import action_text, finding_text

    t = Table(title="What to do next (ranked by predicted saving per replay; a site's "
                    "graphs as one row: --full for each)", title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("saving", justify="right", no_wrap=True)  # a range: never inside a figure
    t.add_column("graphs", overflow="fold")
    t.add_column("finding (its first graph's)", ratio=3)
    t.add_column("try", ratio=2, overflow="fold")
    for i, f in enumerate(findings, 1):
        saving = (f"{fmt_ns(f.high_ns)} {f.pct:.0f}%" if len(f.graphs) == 1
                  else f"{_range(f.low_ns, f.high_ns)}\neach")
        t.add_row(str(i), saving, Text(_where(f.site, f.buckets, f.graphs)),
                  Text(finding_text(f.finding)), Text(action_text(f.finding.action)))
    return t


def grouped_diagnosis_table(groups: Sequence[DiagnosisGroup], width: int = WIDE) -> Any:
    """The Diagnosis's figures, one row per group: the range over its graphs (under ``WIDE``
    columns, a line per group, wrapped between figures, never inside one)."""
    if width < WIDE:
        from .fmt import wrap

        lines = ["Diagnosis (median per replay; a site's graphs as one line, the range over "
                 "them: --full for each)"]
        for g in groups:
            name = safe(g.names[0]) if len(g.names) == 1 else (
                f"{safe(g.site)} ({len(g.names)} graphs)")
            lines += wrap(0, f"{name}: path {_range(*g.path_ns)}, work {_range(*g.work_ns)}, "
                          f"span {_range(*g.span_ns)}, idle {_range(*g.idle_pct, f=_pct)}, "
                          f"launch {_range(*g.launch_ns)}", width)
        from rich.console import Group

        return Group(*(Text(line) for line in lines))
    t = Table(title="Diagnosis (median per replay; a site's graphs as one row, the range over "
                    "them: --full for each)", title_justify="left")
    t.add_column("graphs", overflow="fold", ratio=1)
    for col in ("path", "work", "span", "idle", "launch"):
        t.add_column(col, justify="right", no_wrap=True)
    for g in groups:
        name = safe(g.names[0]) if len(g.names) == 1 else (
            f"{safe(g.site)} ({len(g.names)} graphs)")
        t.add_row(Text(name), _range(*g.path_ns),
                  _range(*g.work_ns), _range(*g.span_ns), _range(*g.idle_pct, f=_pct),
                  _range(*g.launch_ns))
    return keep_figures(t)


def grouped_verdict_lines(groups: Sequence[DiagnosisGroup]) -> list[str]:
    """One line per kind of verdict and group: how many of its graphs, the first's words."""
    out = []
    for g in groups:
        for v in g.verdicts:
            names = tuple(n[len(g.site):].strip() if n.startswith(g.site) else n
                          for n in v.graphs)
            count = (f"{len(v.graphs)} of {len(g.names)} graphs ({bucket_list(names)}); "
                     f"{safe(names[0])}: " if len(g.names) > 1 else "")
            out.append(f"verdict: {_where(g.site, g.buckets, g.names)}: {count}"
                       f"{verdict_text(v.first)}")
    return out


def grouped_findings_lines(findings: Sequence[GroupedFinding], width: int) -> list[str]:
    """The ranked findings by site as numbered lines (a terminal under ``WIDE`` columns)."""
    from .diagnosis import action_text, finding_text
    from .fmt import wrap

    out = ["What to do next (ranked by predicted saving per replay; a site's graphs as one: "
           "--full for each)"]
    for i, f in enumerate(findings, 1):
        saving = (f"{fmt_ns(f.high_ns)} {f.pct:.0f}%" if len(f.graphs) == 1
                  else f"{_range(f.low_ns, f.high_ns)} each")
        out += wrap(0, f"{i}. {saving}, {_where(f.site, f.buckets, f.graphs)}: "
                    f"{safe(finding_text(f.finding))}", width)
        out += wrap(3, f"try: {safe(action_text(f.finding.action))}", width)
    return out


def print_grouped_diagnosis(answer: Any, con: Console) -> None:
    """The findings and the Diagnosis of ``answer`` (``analysis.answer.Answer``) by group."""
    if answer.all_findings and con.width < WIDE:
        for line in grouped_findings_lines(answer.all_findings, con.width):
            con.print(Text(line))
    elif answer.all_findings:
        con.print(grouped_findings_table(answer.all_findings))
    if answer.diagnosis:
        con.print(grouped_diagnosis_table(answer.diagnosis, con.width))
        for line in grouped_verdict_lines(answer.diagnosis):
            con.print(Text(line))
