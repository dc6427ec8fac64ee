"""graphscope doctor: what works on this machine, and why not."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the probe as JSON.")
@click.option("--no-subscribe", is_flag=True, help="Do not try a CUPTI subscription.")
def doctor(as_json: bool, no_subscribe: bool) -> int:
    """Probe the GPU, driver, CUPTI and the one-subscriber slot; say what works."""
    from graphscope.native import probe

    caps = probe(try_subscribe=not no_subscribe)
    if as_json:
        click.echo(json.dumps({"can_capture": caps.can_capture, "problems": list(caps.problems),
                               **caps.details}, sort_keys=True, indent=1, default=str))
        return 0 if caps.extension else 2
    t = Table(title="graphscope doctor", title_justify="left", show_header=False)
    t.add_column("check")
    t.add_column("result")

    def yes(ok: bool) -> str:
        return "[green]yes[/green]" if ok else "[red]no[/red]"

    d = caps.details
    t.add_row("native extension", yes(caps.extension))
    t.add_row("torch", str(d.get("torch", "not installed")))
    t.add_row("GPU", str(d.get("gpu", "none")))
    t.add_row("driver CUDA version", str(d.get("driver_cuda_version", "-")))
    t.add_row("CUPTI", f"{d.get('cupti_path') or '-'} (API {d.get('cupti_api_version', '-')})")
    t.add_row("CUPTI subscription free", yes(caps.can_subscribe))
    t.add_row("driver toolsId API (>= 13.1)", yes(caps.tools_id_api))
    t.add_row("torch node_creation_hook", yes(bool(d.get("node_creation_hook"))))
    t.add_row("op/shape/line recorder", str(d.get("op_observer", "-")))
    t.add_row("capture works here", yes(caps.can_capture))
    t.add_row("annotate-trace .gz", str(d.get("gzip", "-")))
    con = Console()
    con.print(t)
    if d.get("tools_id_note"):
        con.print(f"note: {d['tools_id_note']}")
    for p in caps.problems:
        con.print(f"[yellow]why not:[/yellow] {p}")
    if not caps.can_capture:
        con.print("Commands that work on bundles here: graphscope dump, graphscope report")
    return 0 if caps.extension else 2
