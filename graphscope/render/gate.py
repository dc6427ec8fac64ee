"""The words of a regression gate: a :class:`~graphscope.analysis.gate.Comparison` (``diff``,
``check --baseline``) and budget results (``check``) for the terminal (rich), as GitHub-
flavoured Markdown (a CI step summary or a PR comment) and as JSON (docs/gates.md: schema)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Optional

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..analysis.gate import (
    REGRESSION,
    SPEED_UP,
    Change,
    Comparison,
    KernelRef,
    Moved,
)
from ..analysis.gate.stats import UNDER_LIMIT_WORDS, VERDICT_WORDS
from .fmt import bundle_labels, fmt_bytes, fmt_ns, keep_figures, output_width, safe

JSON_SCHEMA = "graphscope.gate/2"
METRIC_WORDS = {"span": "span", "critical_path": "critical path", "work": "GPU work",
                "module": "GPU work"}
# the headline table's verdict cell (the verdict line under the details says it in full)
SHORT_VERDICT = {"within_noise": "within noise"}
REASON_WORDS = {"no_samples_a": "no traced replay of it in A",
                "no_samples_b": "no traced replay of it in B"}
MORE_WORDS = {"critical_path": "modules whose time on the critical path changed",
              "kernel_added": "kernels added", "kernel_removed": "kernels removed",
              "kernel_replaced": "kernels replaced", "module_work": "modules' GPU work moved",
              "stream_order_edge": "new stream-order-only edges"}

Code = Callable[[str], str]


def _plain(s: str) -> str:
    return safe(s)


def signed_ns(v: float) -> str:
    return ("+" if v > 0 else "-" if v < 0 else "±") + fmt_ns(abs(v))


def signed_pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def verdict_words(c: Change, short: bool = False) -> str:
    """A change's verdict: ``regression``, ``speed-up``, ``no change beyond noise``
    (``within noise`` in a table's cell); a regression the gate's limit allows reads
    ``slower, under the limit``, never ``regression``."""
    if c.under_limit:
        return UNDER_LIMIT_WORDS
    return (SHORT_VERDICT.get(c.verdict) if short else None) or VERDICT_WORDS[c.verdict]


def interval(c: Change) -> str:
    """The 95% interval of the difference: in % of A's median, in time where A's is 0."""
    if c.ci_low_pct is None or c.ci_high_pct is None:
        return f"{signed_ns(c.ci_low_ns)} … {signed_ns(c.ci_high_ns)}"
    return f"{c.ci_low_pct:+.1f}% … {c.ci_high_pct:+.1f}%"


def subject(c: Change, code: Code = _plain) -> str:
    """``span of forward``, ``GPU work of L.left.2 in forward``."""
    what = METRIC_WORDS[c.metric]
    if c.module is not None:
        return f"{what} of {code(c.module)} in {code(c.graph)}"
    return f"{what} of {code(c.graph)}"


def change_text(c: Change, code: Code = _plain) -> str:
    """``span of forward 1.34 ms → 812 µs (-39.6%, 95% interval -41.3% … -31.8%, noise
    84.4 µs): speed-up``."""
    return (f"{subject(c, code)} {fmt_ns(c.a.median_ns)} → {fmt_ns(c.b.median_ns)} "
            f"({signed_pct(c.delta_pct) if c.delta_pct is not None else signed_ns(c.delta_ns)}"
            f", 95% interval {interval(c)}, noise {fmt_ns(c.noise_ns)}): {verdict_words(c)}")


def verdict_line(cmp: Comparison, code: Code = _plain) -> str:
    """One line: the gate's result (or, without a limit, the verdict) and the change that
    decides it (the document's ``named``)."""
    on = METRIC_WORDS[cmp.on]
    limit = "" if cmp.limit_pct is None else f" (limit {cmp.limit_pct:+.1f}% on {on})"
    c = cmp.named
    if c is None:
        return (f"{'FAIL: ' if cmp.failed else ''}not compared: no graph has {on} figures in "
                f"both bundles{limit}")
    head = change_text(c, code)
    if cmp.failed:
        more = len(cmp.failures) - 1
        return (f"FAIL: {head}{limit}" + (f"; {more} more over the limit" if more else ""))
    if cmp.limit_pct is None:
        return head
    return f"pass: {head}{limit}"


def _kernel(k: KernelRef, code: Code) -> str:
    shape = f" [{k.shape}]" if k.shape else ""
    return f"{code(k.name)}{safe(shape)} {fmt_ns(k.median_ns)}"


def _diff(a: Optional[float], b: Optional[float], f: Callable[[Optional[float]], str]) -> str:
    s = f"{f(a)} → {f(b)}"
    if a is not None and b is not None and b != a:
        s += f" ({'+' if b > a else '-'}{f(abs(b - a))})"
    return s


def item_text(m: Moved, code: Code = _plain) -> str:
    """One item of "what changed" (``analysis/gate/changed.py`` lists and orders them)."""
    if m.share is not None:
        s = m.share
        return (f"critical path: {code(s.module)} {fmt_ns(s.a_ns)} → {fmt_ns(s.b_ns)} "
                f"({s.a_pct:.1f}% → {s.b_pct:.1f}% of the path)")
    if m.kernel is not None:
        what = "added" if m.kind == "kernel_added" else "removed"
        return f"kernel {what} in {code(m.kernel.module)}: {_kernel(m.kernel, code)}"
    if m.swap is not None:
        w = m.swap
        return f"kernel replaced in {code(w.module)}: {_kernel(w.a, code)} → {_kernel(w.b, code)}"
    if m.change is not None:
        c = m.change
        return (f"GPU work of {code(c.module or '')}: {fmt_ns(c.a.median_ns)} → "
                f"{fmt_ns(c.b.median_ns)} ({signed_ns(c.delta_ns)}, {signed_pct(c.delta_pct)})"
                f": {verdict_words(c)}")
    if m.edge is not None:
        x = m.edge
        return (f"new stream-order-only edge: {code(x.src_module)} {code(x.src)} → "
                f"{code(x.dst_module)} {code(x.dst)}")
    if m.kind == "more":
        return f"… {m.count} more {MORE_WORDS.get(m.of or '', m.of or '')}"
    p = m.pair
    assert p is not None
    if m.kind == "stream_order_edges":
        return f"stream-order-only edges {p.a:.0f} → {p.b:.0f}"
    if m.kind == "pool_bytes":
        return f"pool memory {_diff(p.a, p.b, fmt_bytes)}"
    return "capture time " + _diff(p.a, p.b, lambda s: "-" if s is None else fmt_ns(s * 1e9))


class Hanging:
    """Lines of text wrapped to the console's width with a hanging indent: continuation lines
    sit deeper than the first, and a figure (``1.3 µs``) never splits across two lines."""

    def __init__(self, text: str, first: int = 2, rest: int = 4, style: str = ""):
        self.text, self.first, self.rest, self.style = text, first, rest, style

    def __rich_console__(self, console: Any, options: Any) -> Any:
        import re
        import textwrap

        glued = re.sub(r"(\d) (?=[a-zA-Zµ%]{1,3}\b)", "\\1\u00a0", self.text)
        for line in textwrap.wrap(glued, max(options.max_width, 20),
                                  initial_indent=" " * self.first,
                                  subsequent_indent=" " * self.rest,
                                  break_on_hyphens=False) or [""]:
            yield Text(line.replace("\u00a0", " "), style=self.style)


# ---------------------------------------------------------------- terminal


NARROW = 96  # a terminal narrower than this leaves out the interval and noise columns


def headline_table(cmp: Comparison, width: Optional[int] = None) -> Table:
    rows = [c for g in cmp.graphs for c in (g.span, g.critical_path, g.work) if c is not None]
    narrow = (width or output_width()) < NARROW
    counts = {(c.a.n, c.b.n) for c in rows}
    # one count of traced replays for every row (the usual): said once, not a column
    same_n = len(counts) == 1
    said_n = (f"; replays: A {next(iter(counts))[0]}, B {next(iter(counts))[1]}"
              if same_n else "")
    left_out = (f"; interval ({cmp.confidence:.0%} bootstrap) and noise columns: a terminal "
                f"of {NARROW} columns or more, or --json" if narrow else
                f"; interval: {cmp.confidence:.0%} bootstrap interval of the difference; noise:"
                " the least change that counts (the replays' spread, at least "
                f"{cmp.noise_pct:g}% of A)")
    la, lb = bundle_labels(cmp.a, cmp.b)
    t = Table(title=Text(f"A {safe(la)} → B {safe(lb)}"), title_justify="left",
              caption=Text(f"A, B: medians over the traced replays{set_aside_words(cmp)}"
                           f"{said_n}{left_out}"),
              caption_justify="left")
    cols = [("graph", "left"), ("", "left"), ("A", "right"), ("B", "right"),
            ("change", "right")] + ([] if narrow else [("interval", "right"), ("noise", "right")])
    cols += [] if same_n else [("replays", "right")]
    for col, just in cols + [("verdict", "left")]:
        # the verdict wraps by words, never inside one
        t.add_column(col, justify=just, no_wrap=col not in ("graph", "verdict"),  # type: ignore[arg-type]
                     min_width=12 if col == "verdict" else None)
    for g in cmp.graphs:
        first = True
        for c in (g.span, g.critical_path, g.work):
            if c is None:
                continue
            style = ("yellow" if c.under_limit else "red" if c.verdict == REGRESSION else
                     "green" if c.verdict == SPEED_UP else "")
            n = [] if same_n else [f"{c.a.n}/{c.b.n}"]
            spread = [] if narrow else [interval(c), fmt_ns(c.noise_ns)]
            t.add_row(Text(safe(g.graph) if first else ""), METRIC_WORDS[c.metric],
                      fmt_ns(c.a.median_ns), fmt_ns(c.b.median_ns), signed_pct(c.delta_pct),
                      *spread, *n,
                      Text(verdict_words(c, short=True), style=style))
            first = False
        for m in g.missing:
            why = f"not compared: {REASON_WORDS.get(m.reason, m.reason)}"
            t.add_row(Text(safe(g.graph) if first else ""), METRIC_WORDS[m.metric], "", "",
                      "-", *([] if narrow else ["", ""]), *([] if same_n else [""]),
                      Text(why, style="dim"))
            first = False
    return keep_figures(t)


def render_comparison(cmp: Comparison) -> Group:
    """``diff``'s first screen: the headline table and what changed (the verdict comes last,
    :func:`verdict_text`, under the details)."""
    compared = any(c is not None for g in cmp.graphs
                   for c in (g.span, g.critical_path, g.work))
    # a table with no row says nothing: where no figure is in both bundles, the last line
    # (verdict_text) says so alone
    parts: list[Any] = [headline_table(cmp)] if compared else []
    for g in cmp.changed:
        if g.items:
            parts.append(Hanging(f"What changed in {safe(g.graph)}:", 0, 2, style="bold"))
            parts += [Hanging(item_text(m)) for m in g.items]
    for side, names in (("A", cmp.only_in_a), ("B", cmp.only_in_b)):
        if names:
            parts.append(Text(f"graphs only in {side}, not compared: "
                              + ", ".join(map(safe, names))))
    return Group(*parts)


def verdict_text(cmp: Comparison) -> Text:
    """:func:`verdict_line` coloured: the last line ``diff`` prints (a CI log's last line)."""
    style = "red" if cmp.failed else "green" if cmp.limit_pct is not None else ""
    return Text(verdict_line(cmp), style=style)


# ---------------------------------------------------------------- Markdown


def md_code(s: str, in_table: bool = False) -> str:
    """``s`` as a Markdown code span (a fence longer than any run of backticks in it; ``|``
    escaped inside a table row, where GFM splits cells before it reads code spans)."""
    s = safe(s).replace("\n", " ")
    run = longest = 0
    for ch in s:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    out = f"{fence}{pad}{s}{pad}{fence}"
    return out.replace("|", "\\|") if in_table else out


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|")


def md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def comparison_markdown(cmp: Comparison, title: str = "graphscope diff",
                        link: Optional[str] = None) -> str:
    """A CI step summary or PR comment: the verdict as the heading, the headline table, what
    changed, and a link to the HTML report where ``link`` is given."""
    status = "❌ FAIL" if cmp.failed else "✅ pass" if cmp.limit_pct is not None else "ℹ️"
    verdict = (f"{len(cmp.failures)} regression(s) over the limit" if cmp.failures else
               verdict_words(cmp.named) if cmp.named is not None else "not compared")
    lines = [f"### {title}: {status} — {verdict}", "",
             "A {} → B {}".format(*map(md_code, bundle_labels(cmp.a, cmp.b))), "",
             verdict_line(cmp, md_code), ""]
    lines += comparison_table_md(cmp) + changed_md(cmp)
    for side, names in (("A", cmp.only_in_a), ("B", cmp.only_in_b)):
        if names:
            lines += ["", f"Graphs only in {side}, not compared: "
                      + ", ".join(md_code(n) for n in names)]
    if link:
        lines += ["", f"[Full report]({link.replace(')', '%29').replace(' ', '%20')})"]
    return "\n".join(lines) + "\n"


def changed_md(cmp: Comparison) -> list[str]:
    """What changed, per graph, as Markdown lists: the terminal's items."""
    lines: list[str] = []
    for g in cmp.changed:
        if g.items:
            lines += ["", f"**What changed in {md_code(g.graph)}**", ""]
            lines += [f"- {item_text(m, md_code)}" for m in g.items]
    return lines


def set_aside_words(cmp: Comparison) -> str:
    """", a cold first replay set aside (A, B)": the replays the diagnosis left out of the
    samples, by side (and graph, where more than one is compared); "" where none."""
    sides = [side if len(cmp.graphs) == 1 else f"{side} {g.graph}" for g in cmp.graphs
             for side, aside in (("A", g.set_aside_a), ("B", g.set_aside_b)) if aside]
    return f", a cold first replay set aside ({', '.join(sides)})" if sides else ""


def comparison_table_md(cmp: Comparison) -> list[str]:
    rows = [[md_code(g.graph, in_table=True), METRIC_WORDS[c.metric], fmt_ns(c.a.median_ns),
             fmt_ns(c.b.median_ns), signed_pct(c.delta_pct), interval(c), fmt_ns(c.noise_ns),
             verdict_words(c)]
            for g in cmp.graphs for c in (g.span, g.critical_path, g.work) if c is not None]
    head = ["graph", "metric", "A", "B", "change", f"{cmp.confidence:.0%} interval", "noise",
            "verdict"]
    if not rows:
        return ["(no graph compared)"]
    aside = set_aside_words(cmp)
    return md_table(head, rows) + (["", f"A, B: medians over the traced replays{aside}"]
                                   if aside else [])


# ---------------------------------------------------------------- check's results


def ordered(results: Sequence[Any]) -> list[Any]:
    """Failures first, then passes, then skips; each group in its own order."""
    return ([r for r in results if not r.passed] + [r for r in results if r.passed and
            not r.skipped] + [r for r in results if r.skipped])


def check_summary(results: Sequence[Any]) -> str:
    """The one line ``check`` ends with: ``graphscope check: FAIL, 2 of 12 checks failed
    (1 skipped)``."""
    failed = sum(not r.passed for r in results)
    skipped = sum(bool(r.skipped) for r in results)
    run = len(results) - skipped
    skip = f" ({skipped} skipped)" if skipped else ""
    if failed:
        return f"graphscope check: FAIL, {failed} of {run} checks failed{skip}"
    return f"graphscope check: pass, {run} of {run} checks passed{skip}"


def check_results_table(results: Sequence[Any]) -> Table:
    t = Table(title="graphscope check (failures first)", title_justify="left")
    t.add_column("check", no_wrap=True)
    t.add_column("result")
    t.add_column("detail")
    for r in ordered(results):
        status = (Text("skip", style="dim") if r.skipped
                  else Text("pass", style="green") if r.passed else Text("FAIL", style="red"))
        t.add_row(Text(safe(r.name)), status, Text(safe(r.message)))
    return keep_figures(t)


def render_check(results: Sequence[Any]) -> Group:
    failed = any(not r.passed for r in results)
    return Group(check_results_table(results),
                 Text(check_summary(results), style="red" if failed else "green"))


def check_markdown(results: Sequence[Any], cmp: Optional[Comparison] = None,
                   link: Optional[str] = None) -> str:
    """``check --markdown``: the summary as the heading, failures first, the baseline
    comparison's table where there is one, a link to the HTML report where given."""
    failed = [r for r in results if not r.passed]
    status = "❌" if failed else "✅"
    lines = [f"### {status} {check_summary(results)}", ""]
    rows = [[md_code(r.name, in_table=True),
             "skip" if r.skipped else "pass" if r.passed else "**FAIL**", _md_cell(safe(
                 r.message))] for r in ordered(results)]
    lines += md_table(["check", "result", "detail"], rows)
    if cmp is not None:
        lines += ["", f"**Against the baseline** {md_code(cmp.a)}: {verdict_line(cmp, md_code)}",
                  ""]
        lines += comparison_table_md(cmp) + changed_md(cmp)
    if link:
        lines += ["", f"[Full report]({link.replace(')', '%29').replace(' ', '%20')})"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- JSON


def comparison_json(cmp: Comparison) -> dict[str, Any]:
    """The comparison as JSON-ready data (docs/gates.md): every field of the dataclasses."""
    return {"schema": JSON_SCHEMA, **dataclasses.asdict(cmp)}
