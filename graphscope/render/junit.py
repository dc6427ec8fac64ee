"""JUnit XML of budget check results (``graphscope check --junit``)."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from ..analysis.budgets import CheckResult


def junit_xml(results: list[CheckResult], suite: str = "graphscope.check") -> str:
    """JUnit XML, one testcase per check."""
    fails = sum(not r.passed for r in results)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={quoteattr(suite)} tests="{len(results)}" failures="{fails}">']
    for r in results:
        lines.append(f'  <testcase classname={quoteattr(suite)} name={quoteattr(r.name)}>')
        if not r.passed:
            lines.append(f'    <failure message={quoteattr(r.message)}>{escape(r.message)}'
                         "</failure>")
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"
