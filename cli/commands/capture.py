"""graphscope capture: model file -> annotated graphs, traced replays, a bundle and a table."""

from __future__ import annotations

import json
from typing import Any, Optional

import click

from ..options import capture_options, command, json_option


# Long on purpose: a click command, one parameter per option
@command()
@capture_options
@click.option("--replays", type=int, default=None, help="Traced replays.  [default: 20]")
@click.option("--counters", is_flag=True, default=False,
              help="Also collect hardware counters (CUPTI PM sampling: DRAM bandwidth, SM "
              "active, tensor pipe, occupancy) over dedicated replays after the timed ones; "
              "writes counters.json into the bundle.")
@click.option("--counter-replays", type=click.IntRange(min=1), default=None,
              help="Dedicated replays for --counters.  [default: 10]")
@click.option("--nproc", type=click.IntRange(min=1), default=None,
              help="Run N ranks under torchrun (one GPU each); writes BUNDLE/rank<r>/.")
@click.option("--eager-baseline", is_flag=True, default=None,
              help="Also run the step eagerly (as many times as --replays) under the same "
              "tracer: eager vs graph per module, and the speed-up graphing bought "
              "(eager.json; --mode step or forward).")
@click.option("--try-streams", type=int, default=None, metavar="N",
              help="Also capture each graph with its independent ops (backward and optimizer "
              "ops too, in --mode step and callables) spread over up to N streams (2-16; 0: "
              "off) and trace as many replays of it as --replays, alternated with the "
              "captured graph's (the diagnosis's what-if, measured; outputs, gradients and "
              "the state a step writes compared).")
@click.option("--try-compile", default=None, metavar="GLOB",
              help="--mode forward or step: also capture the graph with the modules whose "
              "path matches GLOB (L, L.<path>; * crosses dots) compiled by torch.compile "
              "(inductor, no CUDA graphs of its own), replay it alternated with the same "
              "graph run eagerly, and write per module its kernels and time in both, "
              "outputs compared (compile.json).")
@json_option()
def capture(model: Optional[str], entry: Optional[str], mode: Optional[str],
            warmup: Optional[int], depth: Optional[int], config_path: Optional[str],
            output: Optional[str], force: bool, replays: Optional[int],
            counters: bool, counter_replays: Optional[int], nproc: Optional[int],
            eager_baseline: Optional[bool], try_streams: Optional[int],
            try_compile: Optional[str], as_json: bool) -> int:
    """Capture MODEL's CUDA graphs, time them, write a bundle.

    Captures MODEL into CUDA graphs (its training step, its own "step", or with --mode
    forward one inference graph per input bucket), replays them under the CUPTI tracer and
    writes a bundle. MODEL defines graphscope_model() (default: the sample MLP).

    This runs the code in MODEL.
    """
    import subprocess
    import sys

    from graphscope.model.ranks import rank_from_env, torchrun_argv, torchrun_env

    from ..options import console
    from ._run import build_config, check_capture_output, run

    opts: dict[str, Any] = dict(model=model, entry=entry, mode=mode, warmup=warmup,
                                depth=depth, output=output, force=force or None,
                                replays=replays,
                                counters=_counter_replays(counters, counter_replays),
                                eager_baseline=eager_baseline, try_streams=try_streams,
                                try_compile=try_compile)
    cfg = build_config(opts, config_path, "capture")
    if nproc and rank_from_env() is None:  # the launcher: torchrun runs the ranks
        from graphscope.capture import check_capture_options, require_gpu

        check_capture_options(cfg)  # options refused here, not once per rank
        check_capture_output(cfg, "capture")
        require_gpu("capture")  # one line here, not a no-GPU error and a traceback per rank
        return subprocess.call(torchrun_argv(nproc, sys.argv[1:]), env=torchrun_env())
    res = run(cfg, "capture", timing=True, quiet=as_json)
    # the bundle written, read and reported as `graphscope report` reads and reports it
    from graphscope.analysis.report import ReportOptions

    from .report import read_report

    rep, _ = read_report(res.bundle_path, ReportOptions())
    compiled = _compiled(res)
    if as_json:  # `report --json` of the bundle, and what only the capture knows
        from graphscope.analysis.document import report_json

        doc = report_json(rep)
        doc.update(bundle=res.bundle_path, phases_s=res.phases_s)
        if compiled is not None:
            doc["compile"] = compiled
        if res.diagnosis_error:
            doc["diagnosis_error"] = res.diagnosis_error
        click.echo(json.dumps(doc, sort_keys=True, indent=1))
        return 0
    from graphscope.render.terminal import print_report

    con = console()
    print_report(rep, con)
    phases = " · ".join(f"{k} {v:.2f} s" for k, v in res.phases_s.items())
    con.print(f"phases: {phases}", highlight=False)
    jr = res.join
    if jr is not None:
        con.print(f"joined {jr.joined_records} replayed records to nodes "
                  f"({jr.unjoined_records} unjoined, {jr.outside_graph_records} outside graphs)")
    for line in _compile_lines(compiled):
        con.print(line, highlight=False)
    if res.diagnosis_error:
        click.echo(f"graphscope: the diagnosis could not be kept in the bundle "
                   f"({res.diagnosis_error}): `graphscope report` diagnoses it", err=True)
    con.print(f"Wrote {res.bundle_path}")
    return 0


def _counter_replays(on: bool, n: Optional[int]) -> Optional[int]:
    """The config's ``counters`` (dedicated replays; None: the config file's or off)."""
    if n is not None and not on:
        raise click.UsageError("--counter-replays needs --counters")
    if not on:
        return None
    from graphscope.capture.counters import DEFAULT_REPLAYS

    return n or DEFAULT_REPLAYS


def _compiled(res: Any) -> Optional[dict[str, Any]]:
    """compile.json of a bundle captured with --try-compile (None without one)."""
    from graphscope.model.bundle_files import read_compile

    return read_compile(res.bundle_path) if res.bundle_path else None


def _compile_lines(doc: Optional[dict[str, Any]]) -> list[str]:
    """One line per graph of compile.json: spans eager and compiled, kernels, outputs."""
    if doc is None:
        return []
    from graphscope.render.fmt import fmt_ns

    out = []
    for g in doc["graphs"]:
        head = f"try-compile {doc['glob']}: {g['graph']}: "
        if "error" in g:
            out.append(head + f"not measured ({g['error']})")
            continue
        e, c = g["eager"], g["compiled"]
        span = (f"span {fmt_ns(e['median_span_ns'])} eager, {fmt_ns(c['median_span_ns'])} "
                f"compiled" if e["median_span_ns"] and c["median_span_ns"] else "no span")
        gain = f" ({-g['gain_pct']:+.0f}%)" if g["gain_pct"] is not None else ""
        same = ("outputs bitwise equal" if g["outputs_equal"] else
                "outputs within tolerance" if g["within_tolerance"] else
                "outputs OUTSIDE tolerance")
        noop = ("; the compiled version launched the very kernels of the eager one: "
                "torch.compile took no effect here" if g.get("same_kernels") else "")
        out.append(head + f"{span}{gain}; kernels {e['kernels']} -> {c['kernels']}; {same}"
                   f"{noop} (compile.json)")
    return out
