"""graphscope annotate-trace: join annotations onto a torch.profiler / Kineto trace."""

from __future__ import annotations

import functools
import math
from typing import Optional

import click

from ..options import command, force_option, output_option


def _default_out(trace: str) -> str:
    for ext in (".json.gz", ".json"):
        if trace.endswith(ext):
            return trace[: -len(ext)] + ".annotated" + ext
    return trace + ".annotated.json"


def _not_nan(v: float) -> float:
    if math.isnan(v):  # FloatRange lets NaN through (every comparison with it is false)
        raise click.BadParameter("nan is not in the range 0<=x<=1")
    return v


@command("annotate-trace")
@click.argument("trace", type=click.Path())
@click.option("-a", "--annotations", "ann", required=True, type=click.Path(),
              help="A bundle, graphscope's annotations.json, or PyTorch's annotation pickle "
              "(read with a restricted unpickler: plain containers and scalars only).")
@output_option("Output trace (.json or .json.gz). Default: next to TRACE, '.annotated' before "
               "its extension (run.json -> run.annotated.json, run.json.gz -> "
               "run.annotated.json.gz).")
@click.option("--default-stream", type=click.IntRange(0, (1 << 53) - 1), default=7,
              show_default=True,
              help="Stream lane for graphed work without an annotated stream.")
@click.option("--min-match", type=click.FloatRange(0.0, 1.0), default=0.9, show_default=True,
              callback=lambda _ctx, _p, v: _not_nan(v),
              help="Refuse (exit 2, nothing written) when less than this share of the trace's "
              "graph work matches the annotations: graphed events of graphs they know, or "
              "kernels matched by sequence. 0 accepts any match.")
@click.option("--no-module-track", is_flag=True, help="Do not add the modules track.")
@click.option("--gzip-level", type=click.IntRange(1, 9), default=1, show_default=True,
              help="Compression level of a .gz output (1 is fast, by ISA-L where python-isal "
              "is installed; 2-9 use zlib: 9 is small and slow).")
@force_option()
def annotate_trace(trace: str, ann: str, output: Optional[str], default_stream: int,
                   min_match: float, no_module_track: bool, gzip_level: int,
                   force: bool) -> int:
    """Add graphscope's tags to a torch.profiler trace.

    Adds annotation fields to the kernel/memcpy/memset events of TRACE, keyed by their graph
    node id (or, for torch <= 2.11 traces, matched to a bundle by kernel sequence)."""
    from graphscope.model.outputs import check_output
    from graphscope.trace_annotate import annotate_trace_file, tune_allocator

    tune_allocator()  # this process does nothing else

    out = output or _default_out(trace)
    check_output(out, force=force, inputs=(trace, ann), what="annotated trace")
    r = annotate_trace_file(trace, ann, out, default_stream=default_stream,
                            module_track=not no_module_track, gzip_level=gzip_level,
                            force=force, min_match=min_match)
    echo = functools.partial(click.echo, err=out == "-")
    added = r.events_out - r.events_in + r.events_dropped
    echo(f"{r.events_in} events in, {r.events_out} out: {r.events_dropped} dropped "
         f"({r.noise_removed} noise, {r.events_dropped - r.noise_removed} metadata of emptied "
         f"lanes), {added} added ({r.module_spans} module spans, {added - r.module_spans} "
         f"track and lane names); {r.graphed_events} graphed, {r.annotated_events} annotated; "
         f"{r.moved_overlapping} overlapping kernels moved; {r.timestamps_fixed} timestamps "
         f"clamped")
    if r.match_rate is not None:
        echo(f"no graph node ids in the trace: matched {r.matched_by_sequence} of "
                   f"{r.sequence_candidates} graph-launched kernels to the bundle by kernel "
                   f"sequence ({r.match_rate:.1f}%)")
    matched, total = r.match
    if matched < total:
        click.echo(f"warning: {matched} of {total} graph work events matched the annotations "
                   f"({100.0 * matched / total:.1f}%)", err=True)
    for note in r.notes[:5]:
        click.echo(f"note: {note}", err=True)
    if out != "-":
        echo(f"Wrote {out}")
    return 0
