"""graphscope report: module tree, top kernels, fwd/bwd split and per-op rows of a bundle."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

import click

from ..options import bundle_argument, command, depth_option, force_option, json_option, not_empty

if TYPE_CHECKING:  # imported in the command's body: `graphscope --help` loads none of them
    from graphscope.analysis.report import Report, ReportOptions
    from graphscope.model.bundle import Bundle
    from graphscope.model.bundle_files import BundleExtras

DEFAULT_TOP = 10  # analysis.report's default: summary.json holds the tables at this --top
DEFAULT_EAGER_ROWS = 15  # render.eager.EAGER_ROWS


@command()
@bundle_argument
@depth_option("Module levels to show.")
@click.option("--top", type=click.IntRange(min=0), default=DEFAULT_TOP, show_default=True,
              help="Top kernels/ops rows (0: every row).")
@click.option("--eager-rows", type=click.IntRange(min=0), default=DEFAULT_EAGER_ROWS,
              show_default=True, metavar="N",
              help="Eager vs graph rows, largest |Δ| first (0: every row; --json has all).")
@click.option("--recompute", is_flag=True,
              help="Recompute the tables and the diagnosis from the nodes instead of the "
                   "bundle's summary.json and diagnosis.json.")
@click.option("--html", "html_path", type=click.Path(), default=None,
              help="Also write a self-contained HTML report (tables, timeline, graph) here; "
              "'-' writes it to stdout instead of the tables.")
@click.option("--diagnosis/--no-diagnosis", default=None,
              help="The Diagnosis section: critical path, gaps, false serialization, "
              "concurrency, launch. It reads every node: by default it is left out (and said "
              "so) only for bundles of over 1,000,000 nodes or 1,000 graphs.")
@click.option("--graph", "graph_name", default=None, callback=not_empty,
              metavar="NAME",
              help="Only this graph (names as listed in the Graphs table; an ordinal such "
              "as '#1', a unique prefix or a regex that matches one graph).")
@click.option("--ladder", is_flag=True,
              help="The bucket ladder of every capture site with several graphs (per bucket: "
              "replays, time per replay and per batch row, memory, capture cost); shown "
              "without it for bundles that recorded capture cost.")
@click.option("--full", is_flag=True,
              help="Every graph's row and column: without it, a capture site of 5 graphs or "
              "more (a bucket ladder) is one row with the range over its buckets.")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print the report as GitHub-flavoured Markdown (a CI step summary, a PR "
              "comment) instead of the tables.")
@force_option()
@json_option()
def report(bundle: str, depth: Optional[int], top: int, eager_rows: int, recompute: bool,
           html_path: Optional[str], diagnosis: Optional[bool], graph_name: Optional[str],
           ladder: bool, full: bool, as_markdown: bool, force: bool, as_json: bool) -> int:
    """Print BUNDLE's tables, diagnosis and what to do next.

    Works on any machine, no GPU. The tables (GPU time by module, top kernels and aten ops;
    memory, capture cost and more where the bundle recorded them), "What to do next" (the
    changes the diagnosis predicts save the most time per replay, each with its evidence and
    the command that measures it) and the Diagnosis of each graph (critical path, idle,
    serialized work, launch). --html writes one self-contained page.
    """

    if html_path:  # refused before any work if it would destroy data
        from graphscope.model.outputs import check_output, one_stdout_document

        one_stdout_document({"--html": html_path}, json_on_stdout=as_json)
        check_output(html_path, force=force, inputs=[bundle], what="HTML report")
    tables = html_path != "-"  # the page is stdout's one document
    if _is_multirank(bundle):
        return _multirank(bundle, depth, html_path, diagnosis, graph_name, ladder, force,
                          as_json, tables, as_markdown)
    from graphscope.analysis.report import ReportOptions

    options = ReportOptions(top=top, depth=depth, graph=graph_name, ladder=ladder,
                            diagnosis=diagnosis, full=full)
    rep, b = read_report(bundle, options, recompute)
    if html_path:
        _write_html(b, bundle, html_path, rep, force, as_json or as_markdown)
        if not (as_json or as_markdown):  # the page is what was asked for: "Wrote PATH"
            return 0
    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown each print the whole report: pick one")
    if as_markdown:
        import os

        from graphscope.render.markdown import report_markdown

        click.echo(report_markdown(rep, os.path.basename(os.path.abspath(bundle))), nl=False)
        return 0
    if as_json:
        from graphscope.analysis.document import report_json

        click.echo(json.dumps(report_json(rep), sort_keys=True, indent=1))
        return 0
    from graphscope.render.terminal import print_report

    from ..options import console

    print_report(rep, console(), eager_rows)
    return 0


def read_report(path: str, options: ReportOptions, recompute: bool = False
                ) -> tuple[Report, Optional[Bundle]]:
    """Read the bundle at ``path`` once and build its report once (``capture`` and ``run``
    print the bundle they wrote through this too); the bundle, where its nodes were read."""
    from graphscope.analysis.report import build_report

    b, extras, summary, cached = _read(path, options, recompute)
    return build_report(b, extras, options, summary=summary, diagnosis=cached), b


def _read(path: str, options: ReportOptions, full: bool
          ) -> tuple[Optional[Bundle], BundleExtras, Optional[dict[str, Any]],
                     Optional[dict[str, Any]]]:
    """The bundle (None where its summary.json and diagnosis.json hold all that is asked), its
    optional files, its summary.json where current and enough (None: the tables are
    computed), and its diagnosis.json where current and that is all the nodes are read for."""
    from graphscope.analysis.report import ReportOptions, wants_diagnosis
    from graphscope.model.bundle_files import (
        read_diagnosis,
        read_extras,
        read_manifest_mode,
        read_summary,
    )

    extras = read_extras(path, read_manifest_mode(path))
    full = full or options.top != ReportOptions().top or bool(options.graph) or options.ladder
    summary = read_summary(path) if not full else None
    nodes = sum(int(r["nodes"]) for r in summary["graphs"]) if summary else 0
    diagnosed = summary is None or wants_diagnosis(
        options, nodes, len(summary["graphs"])) is True
    extra_files = extras.eager is not None or extras.counters is not None or extras.mode == "run"
    cached = read_diagnosis(path) if summary is not None and diagnosed else None
    if summary is not None and not extra_files and (cached is not None or not diagnosed):
        return None, extras, summary, cached
    from graphscope.model.bundle_io import read_bundle

    b = read_bundle(path)
    if options.graph:
        from graphscope.model.bundle import only_graph

        b = only_graph(b, options.graph)
    # the optional files need the nodes; the diagnosis, where kept, does not
    return b, extras, summary if not options.graph else None, cached


def _write_html(b: Optional[Bundle], path: str, html_path: str, rep: Report,
                force: bool, to_stderr: bool) -> None:
    """The page of report ``rep``, written to ``html_path``. It draws the nodes too (the
    timeline, each graph's view): bundle ``b``, read here where the report needed none."""
    from graphscope.analysis.page import build_page
    from graphscope.model.outputs import write_output
    from graphscope.render.dot import graph_svgs
    from graphscope.render.html import render

    if b is None:
        from graphscope.model.bundle_io import read_bundle

        b = read_bundle(path)
    write_output(html_path, render(rep, build_page(rep, b), graph_svg=graph_svgs(b)),
                 force=force, inputs=(path,), what="HTML report")
    _wrote(html_path, to_stderr)


def _multirank(bundle: str, depth: Optional[int], html_path: Optional[str],
               diagnosis: Optional[bool], graph_name: Optional[str], ladder: bool, force: bool,
               as_json: bool, tables: bool, as_markdown: bool = False) -> int:
    """The ranks' view: it compares ranks; one graph, or a site's buckets, are each rank's."""
    from graphscope._errors import GraphscopeError

    for opt, given in (("--graph", graph_name), ("--ladder", ladder)):
        if given:
            raise GraphscopeError(f"{bundle}: a multi-rank bundle: {opt} takes one rank's "
                                  f"bundle ({bundle.rstrip('/')}/rank0 ...)")
    if html_path:
        from graphscope.analysis.page import build_page
        from graphscope.analysis.ranks import ranks_report
        from graphscope.model.bundle_files import read_diagnosis
        from graphscope.model.outputs import write_output
        from graphscope.model.ranks import read_ranks
        from graphscope.render.dot import graph_svgs
        from graphscope.render.html import render

        ranks = read_ranks(bundle)
        page = build_page(None, ranks[0][1], ranks=ranks, section=ranks_report(ranks),
                          kept=[read_diagnosis(b.path) for _, b in ranks])
        write_output(html_path, render(None, page, graph_svg=graph_svgs(ranks[0][1], ranks)),
                     force=force, inputs=(bundle,), what="HTML report")
        _wrote(html_path, as_json or as_markdown)
        if not (as_json or as_markdown):  # the page is what was asked for: "Wrote PATH"
            return 0
    return _report_ranks(bundle, depth, as_json, as_markdown) if tables else 0


def _wrote(path: str, to_stderr: bool) -> None:
    """"Wrote PATH": on stderr where stdout holds a document (JSON, Markdown)."""
    if path != "-":
        click.echo(f"Wrote {path}", err=to_stderr)


def _report_ranks(path: str, depth: Optional[int], as_json: bool,
                  as_markdown: bool = False) -> int:
    """The ranks section: per-rank and merged totals, each rank's diagnosis and the rank that
    sets the step, collectives aligned across ranks and their stragglers, module skew, top
    kernels, DDP buckets and FSDP2 groups per rank."""
    from graphscope.analysis.ranks import ranks_report
    from graphscope.model.ranks import read_ranks

    section = ranks_report(read_ranks(path), depth)
    if as_json:
        from graphscope.analysis import plain

        click.echo(json.dumps(plain(section), sort_keys=True, indent=1))
        return 0
    from graphscope.render import ranks as view

    if as_markdown:
        click.echo(view.markdown(section, depth), nl=False)
        return 0
    from ..options import console

    console().print(view.terminal(section, depth))
    return 0


def _is_multirank(path: str) -> bool:
    """A multi-rank bundle (rank<r>/ bundles, no manifest of its own); a single bundle is
    told by its manifest without loading the ranks code."""
    import os

    if os.path.exists(os.path.join(path, "manifest.json")):
        return False
    from graphscope.model.ranks import is_multirank

    return is_multirank(path)
