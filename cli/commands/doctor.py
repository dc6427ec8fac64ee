"""graphscope doctor: what works on this machine, and why not."""

from __future__ import annotations

import json
import shutil
from typing import Any, Optional

import click

from ..options import command, json_option

# Every command that reads bundles (or model files on the CPU): what works without a GPU.
BUNDLE_COMMANDS = ("report", "dump", "diff", "check BUNDLE", "annotate-trace", "lint")
TORCH_COMMANDS = ("lint",)  # of these, the ones that run a model (on the CPU): they need torch


def _tool(*names: str) -> Optional[str]:
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    return None


@command()
@json_option("Print the probe as JSON.")
@click.option("--no-subscribe", is_flag=True, help="Do not try a CUPTI subscription.")
def doctor(as_json: bool, no_subscribe: bool) -> int:
    """Say what works on this machine, and why not.

    Probes the GPU, driver, CUPTI and the one-subscriber slot, the op recorder, Graphviz and
    Chromium; lists the commands that work without a GPU; warns when Alibaba's GraphScope
    (PyPI's graphscope, graphscope-client) is installed here too."""
    from rich.markup import escape

    from graphscope.capture.capabilities import other_graphscope, probe, torch_import_error
    from graphscope.native.pmsampling import pm_sampling_trial

    from ..options import console

    caps = probe(try_subscribe=not no_subscribe)
    no_torch = torch_import_error()
    need_torch = list(TORCH_COMMANDS) if no_torch else []
    works = [c for c in BUNDLE_COMMANDS if c not in need_torch]
    counters_why = pm_sampling_trial() if caps.cupti else "no GPU or CUPTI here"
    # one line per problem, in order: "X" goes when "X (why)" is there too
    problems = [p for p in dict.fromkeys(caps.problems)
                if not any(q != p and q.startswith(p) for q in caps.problems)]
    dot = _tool("dot")
    chromium = _tool("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    others = other_graphscope()
    warnings = [other_graphscope_warning(others)] if others else []
    if as_json:
        click.echo(json.dumps({"can_capture": caps.can_capture, "problems": problems,
                               "warnings": warnings, "other_graphscope": [
                                   {"name": n, "version": v} for n, v in others],
                               "graphviz_dot": dot, "chromium": chromium,
                               "counters": counters_why or "ok",
                               "bundle_commands": works, "needs_torch": need_torch,
                               **caps.details},
                              sort_keys=True, indent=1, default=str))
        return 0 if caps.extension else 2
    t = _table(caps, no_subscribe, counters_why, dot, chromium)
    con = console()
    con.print(t)
    for w in warnings:  # one line: what to run is copied from it
        con.print(f"[yellow]warning:[/yellow] {escape(w)}", soft_wrap=True, highlight=False)
    if caps.details.get("tools_id_note"):
        con.print(f"note: {escape(str(caps.details['tools_id_note']))}")
    for p in problems:
        con.print(f"[yellow]why not:[/yellow] {escape(p)}")
    if need_torch:  # before the list of what works: it is what a user of lint meets first
        con.print(", ".join(f"graphscope {c}" for c in need_torch) + " needs PyTorch, which "
                  f"cannot be imported here ({escape(str(no_torch))}): pip install torch",
                  soft_wrap=True, highlight=False)
    if not caps.can_capture:
        # one line, not folded at the console's width inside a command's name
        con.print("Commands that work here (no GPU needed): "
                  + ", ".join(f"graphscope {c}" for c in works), soft_wrap=True)
    return 0 if caps.extension else 2


def other_graphscope_warning(others: list[tuple[str, str]]) -> str:
    """What doctor says of Alibaba's GraphScope installed beside this project."""
    listed = ", ".join(f"{n} {v}" for n, v in others)
    return (f"Alibaba's GraphScope is installed here too ({listed}), a different project that "
            "also provides the `graphscope` import: each overwrites the other's files. Run "
            "pip uninstall graphscope graphscope-client, then pip install --force-reinstall "
            "--no-deps cudagraph-scope")


def _table(caps: Any, no_subscribe: bool, counters_why: Optional[str], dot: Optional[str],
           chromium: Optional[str]) -> Any:
    """doctor's table: each check and what it found."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="graphscope doctor", title_justify="left", show_header=False)
    t.add_column("check")
    t.add_column("result")

    def yes(ok: bool, checked: bool = True, why: str = "") -> str:
        if not checked:
            return f"[yellow]not checked[/yellow] ({why})"
        return "[green]yes[/green]" if ok else "[red]no[/red]"

    d = caps.details
    no_cupti = "no GPU or CUPTI here" if not caps.cupti else ""
    t.add_row("native extension", yes(caps.extension))
    t.add_row("torch", escape(str(d.get("torch", "not installed"))))
    t.add_row("GPU", escape(str(d.get("gpu", "none"))))
    t.add_row("driver CUDA version", str(d.get("driver_cuda_version", "-")))
    t.add_row("CUPTI", escape(f"{d.get('cupti_path') or '-'} "
                              f"(API {d.get('cupti_api_version', '-')})"))
    t.add_row("CUPTI subscription free",
              yes(caps.can_subscribe, caps.cupti and not no_subscribe,
                  no_cupti or "--no-subscribe"))
    t.add_row("driver toolsId API (>= 13.1)", yes(caps.tools_id_api, caps.gpu, "no GPU here"))
    t.add_row("torch node_creation_hook", yes(bool(d.get("node_creation_hook")),
                                              "torch" in d, "no torch"))
    t.add_row("op/shape/line recorder", escape(str(d.get("op_observer", "-"))))
    t.add_row("capture works here", yes(caps.can_capture))
    t.add_row("hardware counters (capture --counters: CUPTI PM sampling)",
              "[green]yes[/green]" if not counters_why
              else f"[red]no[/red] ({escape(counters_why)})")
    t.add_row("annotate-trace .gz", escape(str(d.get("gzip", "-"))))
    t.add_row("Graphviz dot (dump --format svg/png/pdf, report --html graph)",
              escape(dot) if dot else "[yellow]not found[/yellow] (apt install graphviz)")
    t.add_row("Chromium (headless HTML checks; any browser opens report --html)",
              escape(chromium) if chromium else "not found (optional)")
    return t
