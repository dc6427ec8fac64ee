"""JUnit XML of budget check results (``graphscope check --junit``): failures first, as the
terminal shows them, and the one-line summary last (the suite's ``system-out``)."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

from ..analysis.budgets import CheckResult

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(s: str) -> str:
    """Characters XML 1.0 cannot hold (control characters from a budget pattern), as \\xNN."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def junit_xml(results: list[CheckResult], suite: str = "graphscope.check") -> str:
    """JUnit XML, one testcase per check, failures first."""
    fails = sum(not r.passed for r in results)
    skips = sum(r.skipped for r in results)
    run = len(results) - skips
    summary = (f"graphscope check: FAIL, {fails} of {run} checks failed" if fails else
               f"graphscope check: pass, {run} of {run} checks passed")
    summary += f" ({skips} skipped)" if skips else ""
    results = ([r for r in results if not r.passed] + [r for r in results if r.passed
               and not r.skipped] + [r for r in results if r.skipped])
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={quoteattr(suite)} tests="{len(results)}" failures="{fails}" '
             f'skipped="{skips}">']
    for r in results:
        name = quoteattr(_xml_text(r.name))
        lines.append(f'  <testcase classname={quoteattr(suite)} name={name}>')
        if r.skipped:
            msg = _xml_text(r.message)
            lines.append(f'    <skipped message={quoteattr(msg)}/>')
        elif not r.passed:
            msg = _xml_text(r.message)
            lines.append(f'    <failure message={quoteattr(msg)}>{escape(msg)}</failure>')
        lines.append("  </testcase>")
    lines.append(f"  <system-out>{escape(summary)}</system-out>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"
