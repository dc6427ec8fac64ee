"""graphscope report: module tree, top kernels, fwd/bwd split and per-op rows of a bundle."""

from __future__ import annotations

import json
from typing import Optional

import click

from ..options import bundle_argument, command, depth_option, force_option, json_option, not_empty

DEFAULT_TOP = 10
DIAGNOSIS_AUTO_BYTES = 8 << 20  # larger graph.json: the summary.json fast path skips diagnosis
DIAGNOSIS_AUTO_GRAPHS = 1000  # more graphs: the diagnosis (seconds per 10,000) only on request


# Long on purpose (~80 lines): multi-rank, summary.json fast path, HTML, JSON, tables.
@command()
@bundle_argument
@depth_option("Module levels to show.")
@click.option("--top", type=click.IntRange(min=0), default=DEFAULT_TOP, show_default=True,
              help="Top kernels/ops rows (0: every row).")
@click.option("--recompute", is_flag=True,
              help="Recompute the tables from the nodes instead of the bundle's summary.json.")
@click.option("--html", "html_path", type=click.Path(), default=None,
              help="Also write a self-contained HTML report (tables, timeline, graph) here; "
              "'-' writes it to stdout instead of the tables.")
@click.option("--diagnosis/--no-diagnosis", default=None,
              help="The Diagnosis section: critical path, gaps, false serialization, "
              "concurrency. It reads every node: by default it is left out (and said so) only "
              "where the tables come from summary.json of a bundle over "
              f"{DIAGNOSIS_AUTO_BYTES >> 20} MB of graph.json.")
@click.option("--graph", "graph_name", default=None, callback=not_empty,
              metavar="NAME",
              help="Only this graph (names as listed in the Graphs table; an ordinal such "
              "as '#1', a unique prefix or a regex that matches one graph).")
@click.option("--ladder", is_flag=True,
              help="The bucket ladder of every capture site with several graphs (per bucket: "
              "replays, time per replay and per batch row, memory, capture cost); shown "
              "without it for bundles that recorded capture cost.")
@force_option()
@json_option()
def report(bundle: str, depth: Optional[int], top: int, recompute: bool,
           html_path: Optional[str], diagnosis: Optional[bool], graph_name: Optional[str],
           ladder: bool, force: bool, as_json: bool) -> int:
    """Print the tables of BUNDLE (works on any machine, no GPU)."""
    from graphscope.model.bundle_io import read_bundle, read_summary
    from graphscope.model.ranks import is_multirank

    if html_path:  # refused before any work if it would destroy data
        from graphscope.model.outputs import check_output, one_stdout_document

        one_stdout_document({"--html": html_path}, json_on_stdout=as_json)
        check_output(html_path, force=force, inputs=[bundle], what="HTML report")
    tables = html_path != "-"  # the page is stdout's one document
    if is_multirank(bundle):
        # the ranks' view compares ranks; one graph, or a site's buckets, are each rank's
        for opt, given in (("--graph", graph_name), ("--ladder", ladder)):
            if given:
                from graphscope._errors import GraphscopeError

                raise GraphscopeError(f"{bundle}: a multi-rank bundle: {opt} takes one rank's "
                                      f"bundle ({bundle.rstrip('/')}/rank0 ...)")
        if html_path:
            from graphscope.model.ranks import read_ranks
            from graphscope.render.dot import graph_svgs
            from graphscope.render.html import write_html

            ranks = read_ranks(bundle)
            write_html(ranks[0][1], html_path, force=force, inputs=(bundle,), ranks=ranks,
                       graph_svg=graph_svgs(ranks[0][1], ranks))
            _wrote(html_path, as_json)
        if diagnosis and tables:  # asked for: said where it is, not dropped in silence
            click.echo(f"Diagnosis is per rank's graphs: graphscope report "
                       f"{bundle.rstrip('/')}/rank<r> --diagnosis", err=True)
        return _report_ranks(bundle, depth, as_json) if tables else 0
    # summary.json holds exactly what summarize() gives with the default --top: no need to
    # load every node for it.
    full = recompute or html_path or top != DEFAULT_TOP or graph_name or ladder
    s = read_summary(bundle) if not full else None
    b = None
    if s is None:
        b = read_bundle(bundle)
        if graph_name:
            from graphscope.model.bundle import only_graph

            b = only_graph(b, graph_name)
        if html_path:
            from graphscope.render.dot import graph_svgs
            from graphscope.render.html import write_html

            write_html(b, html_path, force=force, graph_svg=graph_svgs(b))
            _wrote(html_path, as_json)
            if not tables:
                return 0
        from graphscope.analysis.summary import summarize

        s = summarize(b, top=top)
        if ladder:
            from graphscope.analysis.ladder import ladder as ladder_of
            from graphscope.analysis.summary import graph_rows

            s = {**s, "ladder": ladder_of(b, graph_rows(b))}
    eager = _eager(bundle, b, graph_name, depth)
    skipped = diagnosis is None and (
        _big(bundle) if b is None else len(b.graphs) > DIAGNOSIS_AUTO_GRAPHS)
    diag = _diagnosis(bundle, b, graph_name) if diagnosis is not False and not skipped else None
    counters = _counters(bundle, b, graph_name, top)
    if as_json:
        if diag is not None:
            from graphscope.analysis.diagnosis import to_json

            s = {**s, "diagnosis": to_json(diag)}
        if counters is not None:
            s = {**s, "counters": counters}
        s = {**s, **eager}
        if depth is not None:  # the module rows to that depth, as the tables show them
            s = {**s, "modules": [r for r in s["modules"] if r["level"] <= depth]}
            if s.get("by_graph"):
                s["by_graph"] = {**s["by_graph"], "rows": [
                    r for r in s["by_graph"]["rows"] if r["level"] <= depth]}
        from graphscope.analysis.summary import untimed_as_null

        click.echo(json.dumps(untimed_as_null(s), sort_keys=True, indent=1))
        return 0
    from graphscope.render.table import print_summary

    from ..options import console, depth_that_fits

    con = console()
    if depth is None:  # a huge tree: show the levels that fit in MAX_ROWS, and say so
        depth = depth_that_fits(s["modules"])
        if depth is not None:
            con.print(f"note: {len(s['modules'])} module rows; showing {depth + 1} level(s) "
                      "(pass --depth N for more)")
    print_summary(s, con, depth)
    if ladder and not s.get("ladder"):
        con.print("Bucket ladder: not shown with --graph (it compares a site's graphs)"
                  if graph_name else
                  "Bucket ladder: no capture site captured several graphs in this bundle")
    _print_eager(eager, con)
    if diag is not None:
        from graphscope.render.diagnosis import print_diagnosis

        print_diagnosis(diag, con)
    elif skipped:
        con.print("Diagnosis left out for a bundle this large (it reads every node of every "
                  "graph): pass --diagnosis")
    if counters is not None:
        from graphscope.render.table import print_counters

        print_counters(counters, con, depth if depth is not None else 2)
    return 0


def _eager(path: str, b: object, graph_name: Optional[str], depth: Optional[int] = None
           ) -> dict:
    """{"eager": eager vs graph} when the bundle has eager.json, {"graph_coverage": ...} when
    its timeline records the eager time of the traced windows (analysis/eager.py)."""
    from graphscope.model.bundle import Bundle, only_graph
    from graphscope.model.bundle_files import read_eager, read_outside, read_trees
    from graphscope.model.bundle_io import read_bundle

    doc = read_eager(path)
    # coverage is a program's question (graphscope run): a model file's step is all graph
    run = _mode(path) == "run"
    outside = read_outside(path) if run else {}
    trees = read_trees(path) if run else None
    if doc is None and not outside and trees is None:
        return {}
    from graphscope.analysis.eager import compare, graph_coverage, tree_summary

    if not isinstance(b, Bundle):
        b = read_bundle(path)
        if graph_name:
            b = only_graph(b, graph_name)
    out: dict = {}
    # the program's share of GPU time in graphs: not a figure of one graph's view (--graph)
    cov = graph_coverage(b, outside) if not graph_name else None
    if cov is not None:
        out["graph_coverage"] = cov
    if doc is not None:
        out["eager"] = compare(b, doc, depth)
    if trees is not None:
        out["cudagraph_trees"] = tree_summary(trees)
    return out


def _mode(path: str) -> object:
    import os

    try:
        with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
            return json.load(f).get("mode")
    except (OSError, ValueError, AttributeError):
        return None  # read_bundle says what is wrong with it


def _print_eager(eager: dict, con: object) -> None:
    if not eager:
        return
    from graphscope.render.eager import coverage_line, render_eager, tree_lines

    if "graph_coverage" in eager:
        con.print(coverage_line(eager["graph_coverage"]), highlight=False)  # type: ignore
    for line in tree_lines(eager["cudagraph_trees"]) if "cudagraph_trees" in eager else []:
        con.print(line, highlight=False, markup=False)  # type: ignore[attr-defined]
    if "eager" in eager:
        con.print(render_eager(eager["eager"]))  # type: ignore[attr-defined]


def _wrote(path: str, as_json: bool) -> None:
    if path != "-":
        click.echo(f"Wrote {path}", err=as_json)


def _big(path: str) -> bool:
    import os

    try:
        return os.path.getsize(os.path.join(path, "graph.json")) > DIAGNOSIS_AUTO_BYTES
    except OSError:
        return False


def _diagnosis(path: str, b: object, graph_name: Optional[str]) -> dict:
    """The diagnosis of the bundle at ``path`` (``b`` when it is loaded already)."""
    from graphscope.analysis.diagnosis import diagnose
    from graphscope.model.bundle import Bundle, only_graph
    from graphscope.model.bundle_io import read_bundle

    if not isinstance(b, Bundle):
        b = read_bundle(path)
        if graph_name:
            b = only_graph(b, graph_name)
    return diagnose(b)


def _counters(path: str, b: object, graph_name: Optional[str], top: int) -> Optional[dict]:
    """The Counters section (analysis.counters) when the bundle has counters.json."""
    from graphscope.model.bundle import Bundle, only_graph
    from graphscope.model.bundle_files import read_counters
    from graphscope.model.bundle_io import read_bundle

    data = read_counters(path)
    if data is None:
        return None
    from graphscope.analysis.counters import analyze

    if not isinstance(b, Bundle):
        b = read_bundle(path)
        if graph_name:
            b = only_graph(b, graph_name)
    c = analyze(b, data, top=top)
    if graph_name:  # the other graphs' nodes are left out on purpose: nothing to note
        c["unmatched_nodes"] = 0
    return c


def _report_ranks(path: str, depth: Optional[int], as_json: bool) -> int:
    """Per-module time per rank, skew (max / median over ranks), time in collectives."""
    from graphscope.analysis.ranks import merge
    from graphscope.model.ranks import read_ranks
    from graphscope.render.table import render_ranks

    from ..options import console

    m = merge(read_ranks(path))
    if as_json:
        click.echo(json.dumps(m, sort_keys=True, indent=1))
        return 0
    con = console()
    con.print(render_ranks(m, depth))
    con.print(f"replay time skew across ranks (max / median): {m['replay_skew']:.2f}")
    return 0
