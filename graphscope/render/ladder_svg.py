"""The bucket ladder's charts as inline SVG (the HTML report's Overview draws them): time per
replay and per batch row against bucket size, every label escaped."""

from __future__ import annotations

import html
import math
from typing import Any

from .fmt import fmt_ns


def _points(buckets: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(float(b["batch"]), float(b[key])) for b in buckets
            if b.get("batch") and b.get(key)]


def ladder_svg(site: dict[str, Any], width: int = 360, height: int = 220) -> str:
    """Two panels, time per replay and time per batch row against bucket size (a log x axis
    when the sizes span 16x or more): an inline SVG, every label escaped."""
    buckets = site["buckets"]
    panels = [("time per replay", _points(buckets, "median_ns")),
              ("time per row", _points(buckets, "ns_per_row"))]
    xs = [x for _, pts in panels for x, _ in pts]
    if not xs:
        return ""
    lo, hi = min(xs), max(xs)
    logx = lo > 0 and hi / lo >= 16
    fx = (lambda v: math.log2(v)) if logx else (lambda v: v)
    x0, x1 = fx(lo), fx(hi)
    pad_l, pad_r, pad_t, pad_b = 56, 12, 22, 34
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="ladder" style="margin-top:16px" '
             f'width="{2 * width}" height="{height}" font-size="11" font-family="sans-serif">']
    for k, (title, pts) in enumerate(panels):
        ox = k * width
        ymax = max((y for _, y in pts), default=1.0) * 1.1 or 1.0
        w, h = width - pad_l - pad_r, height - pad_t - pad_b

        def px(v: float, ox: int = ox, w: int = w) -> float:
            return ox + pad_l + (w * (fx(v) - x0) / (x1 - x0) if x1 > x0 else w / 2)

        def py(v: float, ymax: float = ymax, h: int = h) -> float:
            return pad_t + h - h * v / ymax

        parts.append(f'<text x="{ox + pad_l}" y="14" font-weight="bold">'
                     f'{html.escape(title)} vs bucket size</text>')
        parts.append(f'<line x1="{ox + pad_l}" y1="{pad_t + h}" x2="{ox + pad_l + w}" '
                     f'y2="{pad_t + h}" stroke="#888"/><line x1="{ox + pad_l}" y1="{pad_t}" '
                     f'x2="{ox + pad_l}" y2="{pad_t + h}" stroke="#888"/>')
        for frac in (0.0, 0.5, 1.0):
            v = ymax / 1.1 * frac
            parts.append(f'<text x="{ox + pad_l - 4}" y="{py(v) + 4:.1f}" text-anchor="end">'
                         f'{html.escape(fmt_ns(v) if v else "0")}</text>')
        parts.extend(f'<text x="{px(x):.1f}" y="{pad_t + h + 14}" text-anchor="middle">'
                     f'{int(x)}</text>' for x in sorted({x for x, _ in pts}))
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        parts.append(f'<polyline fill="none" stroke="#3366cc" points="{line}"/>')
        for x, y in pts:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#3366cc">'
                         f'<title>{html.escape(f"batch {int(x)}: {fmt_ns(y)}")}</title></circle>')
        parts.append(f'<text x="{ox + pad_l + w / 2:.1f}" y="{height - 4}" '
                     f'text-anchor="middle">bucket size (batch rows{", log scale" if logx else ""})'
                     '</text>')
    parts.append("</svg>")
    return "".join(parts)
