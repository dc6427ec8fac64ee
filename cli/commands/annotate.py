"""graphscope annotate: capture with annotations, no timing: the annotation map + graph."""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import click

from ..options import capture_options, command, json_option


@command()
@capture_options
@click.option("--backward/--no-backward", default=None,
              help="Attribute backward kernels to forward scopes (autograd_phase: backward)."
              "  [default: on]")
@json_option()
def annotate(model: Optional[str], entry: Optional[str], mode: Optional[str],
             warmup: Optional[int], depth: Optional[int], config_path: Optional[str],
             output: Optional[str], force: bool, backward: Optional[bool],
             as_json: bool) -> int:
    """Capture MODEL for its annotation map only: no replays.

    Writes a bundle with the exec-node annotation map (PyTorch's pickle and JSON) and the
    annotated graph, and times nothing: for annotate-trace (or PyTorch's own annotator) to
    join onto a trace you profile yourself. capture does the same capture, then replays the
    graphs under the tracer for GPU times, tables and a timeline. This runs the code in MODEL.
    """
    from ..options import console
    from ._run import build_config, run

    opts: dict[str, Any] = dict(model=model, entry=entry, mode=mode, warmup=warmup,
                                depth=depth, output=output, force=force or None, backward=backward,
                                replays=0)
    cfg = build_config(opts, config_path, "annotate")
    res = run(cfg, "annotate", timing=False, quiet=as_json)
    s = res.summary
    pkl = os.path.join(res.bundle_path, "annotations.pkl")
    if as_json:
        click.echo(json.dumps({"bundle": res.bundle_path, "annotations_pkl": pkl,
                               "work_nodes": s["work_nodes"],
                               "annotated_nodes": s["annotated_nodes"],
                               "coverage": s["coverage"]}, sort_keys=True, indent=1))
        return 0
    con = console()
    cov = s["coverage"]
    con.print(f"annotated {s['annotated_nodes']} of {s['work_nodes']} kernel/memcpy/memset nodes"
              f" (module coverage: forward {cov['forward']['pct']:.1f}%, backward "
              f"{cov['backward']['pct']:.1f}%)")
    con.print(f"Wrote {pkl}")
    con.print(f"Wrote {os.path.join(res.bundle_path, 'annotations.json')}")
    con.print(f"Wrote {res.bundle_path}")
    return 0
