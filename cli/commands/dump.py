"""graphscope dump: a bundle as annotated DOT, the driver's raw DOT, a trace or annotations."""

from __future__ import annotations

import json
import os
from typing import Optional

import click

from ..options import bundle_argument, command, depth_option, force_option, output_option


@command()
@bundle_argument
@click.option("--dot", "what", flag_value="dot", default=True, help="Annotated DOT (default).")
@click.option("--raw", "what", flag_value="raw", help="The driver's verbose DOT (debug_dump).")
@click.option("--trace", "what", flag_value="trace", help="Chrome/Perfetto trace JSON.")
@click.option("--annotations", "what", flag_value="annotations",
              help="The {exec node id: [dict]} map as JSON.")
@output_option("Output file (default: next to the bundle; '-' for stdout).")
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "png", "pdf"]), default="dot",
              show_default=True, help="Render DOT with Graphviz's `dot`.")
@click.option("--graph", default=None,
              help="Graph name (step, forward, backward, or a run bundle's graph: exact name, "
              "unique prefix or regex).")
@click.option("--group", type=click.Choice(["module", "phase", "stream", "none"]),
              default="module", show_default=True, help="Cluster nodes by.")
@depth_option("Cluster/collapse module depth.")
@click.option("--collapse/--no-collapse", default=None,
              help="One node per module with counts and time (default: above 2000 nodes).")
@click.option("--filter", "regex", default=None, help="Keep nodes whose module/kernel matches.")
@force_option()
def dump(bundle: str, what: str, output: Optional[str], fmt: str, graph: Optional[str],
         group: str, depth: Optional[int], collapse: Optional[bool], regex: Optional[str],
         force: bool) -> int:
    """Write BUNDLE as annotated DOT (default), raw DOT, a trace or an annotation map."""
    from graphscope.bundle import raw_dot, read_bundle
    from graphscope.outputs import check_output, write_output
    from graphscope.ranks import is_multirank, read_ranks
    from graphscope.render.dot import DotOptions, build_dot, render

    if output:  # refused before any work if it would destroy data
        check_output(output, force=force, inputs=[bundle])
    if regex is not None:
        import re

        try:
            re.compile(regex)
        except re.error as exc:
            raise click.BadParameter(f"not a valid regex: {exc}", param_hint="--filter") from None

    if is_multirank(bundle):
        from graphscope.render.perfetto import build_multirank_trace

        if what != "trace":
            raise click.UsageError("a multi-rank bundle: dump --trace, or dump one rank<r>/")
        out = output or bundle.rstrip("/") + ".trace.json"
        check_output(out, force=force, inputs=[bundle])
        text = json.dumps(build_multirank_trace(read_ranks(bundle)), sort_keys=True) + "\n"
        write_output(out, text, force=force, inputs=[bundle])
        if out != "-":
            click.echo(f"Wrote {out}", err=True)
        return 0
    b = read_bundle(bundle)
    from graphscope.model.graph import resolve_graph, safe_file_stem

    gname = resolve_graph(b, graph) if graph else b.graphs[0].name
    notes: list[str] = []
    if what == "raw":
        text, ext = raw_dot(b, gname), "raw.dot"
    elif what == "trace":
        from graphscope.render.perfetto import build_trace

        if not b.events:
            from graphscope._errors import BundleError

            raise BundleError(f"{b.path}: no replay events (recorded by `graphscope annotate`?);"
                              " capture with `graphscope capture` for a timeline")
        text, ext = json.dumps(build_trace(b), sort_keys=True) + "\n", "trace.json"
    elif what == "annotations":
        amap = b.annotation_map()
        text = json.dumps({str(k): v for k, v in sorted(amap.items())}, sort_keys=True, indent=1)
        text, ext = text + "\n", "annotations.json"
    else:
        opts = DotOptions(graph=gname if graph else None, group=group, depth=depth,
                          collapse=collapse, filter=regex)
        text, notes = build_dot(b, opts)
        ext = "dot" if fmt == "dot" else fmt
    for n in notes:
        click.echo(f"note: {n}", err=True)
    out = output or os.path.join(os.path.dirname(b.path) or ".",
                                 f"{os.path.basename(b.path)}.{safe_file_stem(gname)}.{ext}")
    check_output(out, force=force, inputs=[bundle])
    data = render(text, fmt) if what == "dot" and fmt != "dot" else text
    write_output(out, data, force=force, inputs=[bundle])
    if out != "-":
        click.echo(f"Wrote {out}", err=output == "-")
    return 0
