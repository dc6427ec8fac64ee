"""The report as GitHub-flavoured Markdown: for a CI step summary (``$GITHUB_STEP_SUMMARY``)
or a pull-request comment. Same numbers as the terminal and JSON views (the same
:class:`~graphscope.analysis.report.Report`), fewer rows: the header, the graphs, the top
modules, the top kernels, the diagnosis's per-graph figures, torch.compile's cudagraph trees
(a program's), and what does not apply."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ..analysis import Absent, plain, present
from ..analysis.report import Report
from .eager import tree_lines
from .fmt import fmt_ns, safe

TOP_ROWS = 10


def cell(value: object) -> str:
    """One table cell: pipes and line breaks escaped, so that no name can break the table,
    other control characters (a terminal's escape sequences) shown as ``\\xNN`` as the
    terminal shows them, and angle brackets as entities (``Kernel2<cutlass_...>``: GitHub drops
    what reads as HTML)."""
    text = "-" if value is None else str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    text = safe(text.replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    # a command in backquotes stays code; a backquote inside a name cannot open one
    if len(text) > 2 and text[0] == text[-1] == "`" and "`" not in text[1:-1]:
        return text
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("`", "'")


def table(head: Sequence[str], rows: Iterable[Sequence[object]],
          right: Sequence[int] = ()) -> list[str]:
    """A GFM table (columns in ``right`` right-aligned)."""
    out = ["| " + " | ".join(cell(h) for h in head) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def _ns(v: Optional[float], timed: bool) -> str:
    return fmt_ns(v) if timed and v is not None else "-"


def _header(report: Report, title: str) -> list[str]:
    h = report.header
    timed = h.replays > 0
    facts = [f"**{h.graphs}** graph(s)", f"**{h.work_nodes}** work nodes "
             f"({h.annotated_nodes} annotated)"]
    if timed:
        facts.append(f"GPU work per replay **{fmt_ns(h.replay_kernel_median_ns)}**")
        # one graph's span is the diagnosis's (of the replays it says it uses) where it has one
        if h.replay_span_median_ns and not any("site" in g for g in report.graphs) and not (
                present(report.diagnosis) and len(report.graphs) == 1):
            facts.append(f"span **{fmt_ns(h.replay_span_median_ns)}**")
        facts.append(f"{h.replays} traced replays")
    else:
        facts.append("no timed replays")
    return [f"## graphscope report: {cell(title)}", "", " · ".join(facts), ""]


def _graphs(report: Report) -> list[str]:
    rows = [(g["name"], g["nodes"], g["work_nodes"], _ns(g.get("median_ns"),  # type: ignore
                                                        g.get("median_ns") is not None))
            for g in report.graphs[:TOP_ROWS]]
    out = ["### Graphs", ""] + table(("graph", "nodes", "work nodes", "GPU work / replay"),
                                     rows, right=(1, 2, 3))
    if len(report.graphs) > TOP_ROWS:
        out.append(f"\n{len(report.graphs) - TOP_ROWS} more graph(s): `graphscope report "
                   "--json` lists them all.")
    return out + [""]


def _modules(report: Report) -> list[str]:
    timed = report.header.replays > 0
    depth = report.options.depth if report.options.depth is not None else 2
    rows = sorted((r for r in report.modules if int(r["level"]) <= depth),  # type: ignore
                  key=lambda r: -float(r["median_ns"]))[:TOP_ROWS]  # type: ignore[arg-type]
    body = [(r["module"], r["kernels"], _ns(r["median_ns"], timed),  # type: ignore[arg-type]
             f"{float(r['pct']):.1f}%" if timed else "-") for r in rows]  # type: ignore
    return (["### Modules by GPU time (inclusive of their children)", ""]
            + table(("module", "kernels", "time / replay", "share"), body, right=(1, 2, 3))
            + [""])


def _kernels(report: Report) -> list[str]:
    timed = report.header.replays > 0
    body = [(r["kernel"], r["count"], _ns(r["median_ns"], timed),  # type: ignore[arg-type]
             f"{float(r['pct']):.1f}%" if timed else "-")  # type: ignore[arg-type]
            for r in report.top_kernels]
    return ["### Top kernels", ""] + table(("kernel", "count", "time / replay", "share"), body,
                                           right=(1, 2, 3)) + [""]


def _diagnosis(diag: Mapping[str, Any]) -> list[str]:
    """The diagnosis's per-graph figures, as the terminal's Diagnosis table shows them."""
    rows = []
    for o in diag.get("graphs", [])[:TOP_ROWS]:
        if "error" in o:
            rows.append((o.get("graph"), o["error"], "", "", ""))
            continue
        timed = bool(o.get("timed"))
        idle = o.get("idle_pct")
        rows.append((o.get("graph"), _ns(o["critical_path"].get("length_ns"), timed),
                     _ns(o.get("work_ns"), timed), _ns(o.get("span_ns"), timed),
                     f"{idle:.0f}%" if idle is not None else "-"))
    out = ["### Diagnosis (median per replay)", ""] + table(
        ("graph", "critical path", "work", "span", "idle"), rows, right=(1, 2, 3, 4))
    return out + [""]


def _findings(typed: Any) -> list[str]:
    """What to do next: the diagnosis's (``analysis.diagnosis.Diagnosis``) findings, ranked by
    predicted saving, with the command that tries each (the terminal's wording:
    render/diagnosis.py)."""
    from .diagnosis import words

    said = words(typed)
    rows = [(k + 1, f"{fmt_ns(f.saving_ns)} ({f.saving_pct:.0f}%)", f.graph, w["text"],
             f"`{w['try']}`" if w["try"] else "-")
            for k, (f, w) in enumerate(zip(typed.findings.findings, said["findings"]))]
    out = ["### What to do next (ranked by predicted saving per replay)", ""]
    if rows:
        out += table(("#", "saving", "graph", "finding", "try"), rows, right=(0, 1))
    notes = [f"- {cell(x)}" for x in said["findings_note"]]
    return out + [""] + (notes + [""] if notes else [])


def _trees(report: Report) -> list[str]:
    """torch.compile's cudagraph trees: the terminal's lines, the first as the heading's."""
    if not present(report.cudagraph_trees):
        return []
    first, *rest = tree_lines(plain(report.cudagraph_trees))
    return ["### torch.compile cudagraph trees", "", cell(first.split(": ", 1)[1]), ""] + [
        f"- {cell(' '.join(x.split()))}" for x in rest] + [""]


def _absent(report: Report) -> list[str]:
    keys = ("diagnosis", "memory", "eager", "counters")
    gone = [(k, v) for k in keys if isinstance(v := getattr(report, k), Absent)]
    if not gone:
        return []
    return ["<details><summary>Not in this report</summary>", ""] + [
        f"- **{k}**: {cell(v.detail or v.reason)}" for k, v in gone] + ["", "</details>", ""]


def report_markdown(report: Report, title: str) -> str:
    """``report`` as one Markdown document (``title``: the bundle's name)."""
    parts = _header(report, title)
    if not isinstance(report.answer, Absent):  # the answer first, as the terminal shows it
        from .answer import answer_markdown
        from .gate import md_code

        parts += answer_markdown(report.answer, md_code)[1:] + [""]
    if len(report.graphs) > 1:
        parts += _graphs(report)
    parts += _modules(report) + _kernels(report)
    if not isinstance(report.diagnosis, Absent):
        from ..analysis.diagnosis.types import to_json

        parts += _findings(report.diagnosis) + _diagnosis(to_json(report.diagnosis))
    parts += _trees(report) + _absent(report)
    return "\n".join(parts).rstrip() + "\n"
