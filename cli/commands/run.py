"""graphscope run: profile the CUDA graphs an unmodified program captures itself."""

from __future__ import annotations

import os
from typing import Optional

import click

from ..options import command, depth_option, force_option, output_option


@command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-m", "as_module", is_flag=True,
              help="Run TARGET as a module (python -m TARGET), not a file.")
@output_option("Bundle directory to write.  [default: graphscope-out/<script>.run]")
@click.option("--replays", type=click.IntRange(min=0), default=20, show_default=True,
              help="Replays of each graph traced by CUPTI; the others run at plain speed.")
@click.option("--skip-replays", type=click.IntRange(min=0), default=0, show_default=True,
              help="Replays of each graph to let pass before tracing.")
@click.option("--graphs", "graphs_regex", default=None, metavar="REGEX",
              help="Trace only graphs whose name matches.")
@depth_option("Annotate modules at most this deep below the outermost module called.")
@click.option("--no-ops", is_flag=True, help="Do not record aten ops, shapes and source lines.")
@force_option()
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(as_module: bool, output: Optional[str], replays: int, skip_replays: int,
        graphs_regex: Optional[str], depth: Optional[int], no_ops: bool,
        force: bool, target: str, args: tuple[str, ...]) -> int:
    """Run TARGET (a script, or a module with -m) with ARGS in this process, as python would,
    and write a bundle of every CUDA graph it captures: each kernel, memcpy and memset node
    tagged with its module, phase, aten op, shapes and source line, and replays timed.

    The program's argv, stdout/stderr and exit code are its own; graphscope prints to stderr.
    """
    import sys

    from rich.console import Console

    from graphscope.capture import require_gpu
    from graphscope.capture.program import check_target, run_program
    from graphscope.outputs import check_bundle_output
    from graphscope.profile import profile
    from graphscope.ranks import rank_from_env, rank_output
    from graphscope.reports.table import print_graphs

    if as_module and os.getcwd() not in sys.path:  # python -m finds modules in the cwd
        sys.path.insert(0, os.getcwd())
    check_target(target, as_module)
    stem = target.rsplit(".", 1)[-1] if as_module else os.path.splitext(
        os.path.basename(target))[0]
    out = output or os.path.join("graphscope-out", f"{stem}.run")
    rank = rank_from_env()
    check_bundle_output(rank_output(out, rank) if rank is not None else out, force=force,
                        inputs=[target] if not as_module else ())
    require_gpu("run")
    err = Console(stderr=True)
    prof = profile(out, replays=replays, skip_replays=skip_replays, graphs=graphs_regex,
                   depth=depth, record_ops=not no_ops, force=force,
                   command=["graphscope", *sys.argv[1:]])
    with prof:
        code = run_program(target, list(args), as_module)
    for w in prof.warnings:
        click.echo(f"graphscope: warning: {w}", err=True)
    if prof.bundle_path is None:
        click.echo(f"graphscope: {target} captured no CUDA graph ({prof.captures} capture(s) "
                   "seen, none recorded); no bundle written", err=True)
        return code
    print_graphs(prof.result.summary, err)
    click.echo(f"Wrote {prof.bundle_path}", err=True)
    return code
