"""A self-contained HTML report: a JSON payload plus one template, no CDN, no network.

The page shows the module table (collapsible tree), an interactive timeline of one replay
(kernel boxes on stream lanes, coloured by top-level module, hover for annotation, op, shapes
and source) and, where Graphviz's `dot` is installed, the collapsed graph as inline SVG.
Tests assert on the payload; a headless-browser test checks that the page draws.
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import resources
from typing import Any, Optional

from ..graphs.model import Bundle
from .summary import summarize

MAX_EVENTS = 20000


def payload(bundle: Bundle, replay: int = 0) -> dict[str, Any]:
    """Everything the page draws, as plain data."""
    nodes = {n.exec_node_id: n for n in bundle.nodes()}
    events = []
    for e in bundle.events:
        if e.get("replay") != replay:
            continue
        n = nodes.get(int(e["exec_node_id"]))
        events.append({
            "t": e["start_ns"], "d": e["dur_ns"], "s": e["stream"],
            "name": n.short_name if n else e.get("kind", "?"),
            "module": n.module if n else None,
            "phase": n.phase if n else None,
            "op": n.op if n else None,
            "shapes": n.shapes if n else None,
            "source": n.source if n else None,
        })
        if len(events) >= MAX_EVENTS:
            break
    if events:
        t0 = min(ev["t"] for ev in events)
        for ev in events:
            ev["t"] -= t0
    s = summarize(bundle)
    return {
        "schema_version": 1,
        "title": os.path.basename(bundle.path.rstrip("/")) or "bundle",
        "versions": bundle.manifest.get("versions", {}),
        "summary": {k: s[k] for k in ("graphs", "replays", "replay_kernel_median_ns",
                                      "replay_span_median_ns", "work_nodes",
                                      "annotated_nodes", "coverage", "modules", "top_kernels",
                                      "top_ops")},
        "replay": replay,
        "events": sorted(events, key=lambda ev: (ev["t"], ev["s"])),
    }


def _svg(bundle: Bundle) -> Optional[str]:
    if shutil.which("dot") is None:
        return None
    try:
        from ..exporters.dot import DotOptions, build_dot
        from ..exporters.dot import render as render_dot

        text, _ = build_dot(bundle, DotOptions(collapse=True, depth=1))
        out = render_dot(text, "svg").decode("utf-8", errors="replace")
        return out[out.find("<svg"):]
    except Exception:
        return None


def render(bundle: Bundle, replay: int = 0) -> str:
    """The page as one string."""
    data = payload(bundle, replay)
    svg = _svg(bundle)
    template = resources.files("graphscope.reports").joinpath("templates/report.html").read_text(
        encoding="utf-8")
    # Every "<" escaped: no module name can end the script element or open a comment in it.
    blob = json.dumps(data, sort_keys=True).replace("<", "\\u003c").replace(">", "\\u003e")
    graph = svg if svg else ("<p class='note'>Install Graphviz (<code>dot</code>) to embed the "
                             "collapsed graph here; <code>graphscope dump --dot</code> writes "
                             "it as DOT.</p>")
    # One pass over the template's own markers: data never gets substituted into.
    head, rest = template.split("__GRAPH__", 1)
    mid, tail = rest.split("__PAYLOAD__", 1)
    return head + graph + mid + blob + tail


def write_html(bundle: Bundle, path: str, replay: int = 0, *, force: bool = False,
               inputs: tuple[str, ...] = ()) -> str:
    from ..outputs import write_output

    write_output(path, render(bundle, replay), force=force,
                 inputs=(bundle.path, *inputs), what="HTML report")
    return path
