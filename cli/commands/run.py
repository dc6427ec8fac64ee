"""graphscope run: profile the CUDA graphs an unmodified program captures itself."""

from __future__ import annotations

from typing import Any, Optional

import click

from ..options import command, config_option, depth_option, force_option, output_option


class OpCaptures(click.ParamType):
    """``--op-captures``: a count >= 1, or ``all`` (0 in the config: every capture)."""

    name = "N|all"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        if str(value).strip().lower() == "all":
            return 0
        try:
            n = int(value)
        except ValueError:
            n = -1
        if n < 1:
            self.fail(f"{value!r} is not a count of captures (1 or more) or 'all'", param, ctx)
        return n


@command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-m", "as_module", is_flag=True,
              help="Run TARGET as a module (python -m TARGET), not a file.")
@output_option("Bundle directory to write.  [default: graphscope-out/<script>.run]")
@click.option("--replays", type=click.IntRange(min=0), default=None,
              help="Replays of each graph traced by CUPTI; the others run at plain speed."
              "  [default: 20]")
@click.option("--skip-replays", type=click.IntRange(min=0), default=None,
              help="Replays of each graph to let pass before tracing.  [default: 0]")
@click.option("--graphs", "graphs_regex", default=None, metavar="REGEX",
              help="Trace only graphs whose name matches.")
@depth_option("Annotate modules at most this deep below the outermost module called.")
@click.option("--no-ops", is_flag=True, default=None,
              help="Do not record aten ops, shapes and source lines.")
@click.option("--op-captures", type=OpCaptures(), default=None, metavar="N|all",
              help="Record aten ops, shapes and source lines in the first N captures of each "
              "capture site (a bucket ladder's first N buckets; the others keep their module, "
              "phase and memory scopes); 'all': in every capture.  [default: 2]")
@config_option
@force_option()
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(as_module: bool, output: Optional[str], replays: Optional[int],
        skip_replays: Optional[int], graphs_regex: Optional[str], depth: Optional[int],
        no_ops: Optional[bool], op_captures: Optional[int], config_path: Optional[str],
        force: bool, target: str, args: tuple[str, ...]) -> int:
    """Profile the CUDA graphs an unmodified program captures.

    Runs TARGET (a script, or a module with -m) with ARGS in this process, as python would,
    and writes a bundle of every CUDA graph it captures: each kernel, memcpy and memset node
    tagged with its module and phase (and, in the first --op-captures captures of each
    capture line, its aten op, shapes and source line), and replays timed.

    The program's argv, stdout/stderr and exit code are its own; graphscope prints to stderr.
    """
    import os
    import sys

    from graphscope.capture import ProgramJob, run_program_capture
    from graphscope.capture.run import check_target

    from ..options import console
    from ._run import build_config

    if as_module and os.getcwd() not in sys.path:  # python -m finds modules in the cwd
        sys.path.insert(0, os.getcwd())
    check_target(target, as_module)
    opts: dict[str, Any] = dict(mode="run", model=target, output=output, replays=replays,
                                skip_replays=skip_replays, graphs=graphs_regex, depth=depth,
                                record_ops=False if no_ops else None, op_captures=op_captures,
                                force=force)
    cfg = build_config(opts, config_path, "run")
    job = ProgramJob(target, list(args), cfg, module=as_module)
    raw, res = run_program_capture(cfg, job, argv=["graphscope", *sys.argv[1:]])
    code = job.exit_code if job.exit_code is not None else 0
    for w in raw.meta.get("warnings", ()):
        click.echo(f"graphscope: warning: {w}", err=True)
    if res is None:
        click.echo(f"graphscope: {target} captured no CUDA graph "
                   f"({raw.meta.get('observed_captures', 0)} capture(s) seen, none recorded); "
                   "no bundle written", err=True)
        return code
    # the bundle written, read and reported as `graphscope report` does, on stderr
    from graphscope.analysis.report import ReportOptions
    from graphscope.render.terminal import print_report

    from .report import read_report

    if res.bundle_path:
        print_report(read_report(res.bundle_path, ReportOptions())[0], console(stderr=True))
    for site in res.summary.get("ladder") or ():  # --op-captures: the buckets without ops
        n = len(site["buckets"]) - site.get("ops_recorded", len(site["buckets"]))
        if n > 0:
            click.echo(f"graphscope: {site['site']}: aten ops, shapes and source lines recorded "
                       f"in its first {cfg.op_captures} capture(s); {n} later one(s) keep module, "
                       "phase and memory scopes (--op-captures all records every capture)",
                       err=True)
    if res.diagnosis_error:
        click.echo(f"graphscope: the diagnosis could not be kept in the bundle "
                   f"({res.diagnosis_error}): `graphscope report` diagnoses it", err=True)
    click.echo(f"Wrote {res.bundle_path}", err=True)
    return code
