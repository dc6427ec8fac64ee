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
import subprocess
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
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        from ..exporters.dot import DotOptions, build_dot

        text, _ = build_dot(bundle, DotOptions(collapse=True, depth=1))
        out = subprocess.run([exe, "-Tsvg"], input=text.encode(), capture_output=True,
                             timeout=60, check=True).stdout.decode()
        return out[out.find("<svg"):]
    except Exception:
        return None


def render(bundle: Bundle, replay: int = 0) -> str:
    """The page as one string."""
    data = payload(bundle, replay)
    svg = _svg(bundle)
    template = resources.files("graphscope.reports").joinpath("templates/report.html").read_text(
        encoding="utf-8")
    blob = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    graph = svg if svg else ("<p class='note'>Install Graphviz (<code>dot</code>) to embed the "
                             "collapsed graph here; <code>graphscope dump --dot</code> writes "
                             "it as DOT.</p>")
    return template.replace("__PAYLOAD__", blob).replace("__GRAPH__", graph)


def write_html(bundle: Bundle, path: str, replay: int = 0) -> str:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render(bundle, replay))
    os.replace(tmp, path)
    return path
