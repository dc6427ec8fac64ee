"""Shared body of capture / annotate: options -> CaptureConfig -> run_capture with progress."""

from __future__ import annotations

import sys
from typing import Any, Optional

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

PHASES = {
    "load": "loading the model file",
    "warmup": "warming up on a side stream",
    "capture": "capturing (annotated)",
    "inspect": "inspecting the template graph",
    "instantiate": "instantiating",
    "replay": "replaying under the CUPTI tracer",
    "counters": "hardware counters (PM-sampled replays)",
    "eager": "running the step eagerly under the CUPTI tracer (--eager-baseline)",
    "what-if": "capturing over more streams and timing it (--try-streams)",
    "try-compile": "compiling, capturing and timing the compiled modules (--try-compile)",
    "write": "writing the bundle",
}


# config keys that only one command reads: the other says so (a project's one config file
# may hold both commands' options; an environment variable applies wherever it is read)
ONLY_FOR = {"op_captures": "run", "skip_replays": "run", "graphs": "run",
            "mode": "capture", "warmup": "capture", "backward": "capture", "entry": "capture",
            "counters": "capture", "eager_baseline": "capture", "try_streams": "capture",
            "try_compile": "capture"}


def build_config(cli_opts: dict[str, Any], config_path: Optional[str],
                 command: str = "capture") -> Any:
    import click

    from graphscope.capture.config import from_env, load_yaml, merge

    yaml_layer = load_yaml(config_path) if config_path else {}
    reads = "run" if command == "run" else "capture"  # annotate and check capture a model
    ignored = sorted(k for k in yaml_layer if ONLY_FOR.get(k, reads) != reads)
    if ignored:
        click.echo(f"warning: {config_path}: {', '.join(ignored)}: graphscope "
                   f"{'capture' if reads == 'run' else 'run'}'s option(s), not read by "
                   f"graphscope {command}", err=True)
    return merge(yaml_layer, from_env(), cli_opts, where="command line")


def check_capture_output(cfg: Any, command: str) -> str:
    """The bundle path the capture will write (this rank's under torchrun), refused now if it
    cannot be written: before the warm-up, the capture and the replays."""
    from graphscope.capture import default_output
    from graphscope.capture.loader import check_model_file, model_path
    from graphscope.model.outputs import check_bundle_output
    from graphscope.model.ranks import rank_from_env, rank_output

    model = model_path(cfg.model)  # no MODEL and no sample model: say so before the GPU
    check_model_file(model)  # and a MODEL that is not there
    out: str = cfg.output or default_output(model, command)
    rank = rank_from_env()
    if rank is not None:
        out = rank_output(out, rank)
    check_bundle_output(out, force=cfg.force, inputs=[cfg.model] if cfg.model else ())
    return out


def run(cfg: Any, command: str, timing: bool, quiet: bool) -> Any:
    from graphscope.capture import check_capture_options, require_gpu, run_capture

    check_capture_options(cfg)
    check_capture_output(cfg, command)
    require_gpu(command)  # before loading anything: one clear line without a GPU
    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        return run_capture(cfg, timing=timing, command=command, argv=["graphscope", *sys.argv[1:]])
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as prog:
        task = prog.add_task("starting", total=None)

        def step(name: str) -> None:
            prog.update(task, description=PHASES.get(name, name))

        return run_capture(cfg, timing=timing, command=command, progress=step,
                           argv=["graphscope", *sys.argv[1:]])
