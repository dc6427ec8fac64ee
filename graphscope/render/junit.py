"""JUnit XML of budget check results (``graphscope check --junit``)."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

from ..analysis.budgets import CheckResult

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(s: str) -> str:
    """Characters XML 1.0 cannot hold (control characters from a budget pattern), as \\xNN."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def junit_xml(results: list[CheckResult], suite: str = "graphscope.check") -> str:
    """JUnit XML, one testcase per check."""
    fails = sum(not r.passed for r in results)
    skips = sum(r.skipped for r in results)
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
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"
