"""graphscope dump: a bundle as annotated DOT, the driver's raw DOT, a trace or annotations."""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import click

from ..options import bundle_argument, command, depth_option, force_option, not_empty, output_option


# Long on purpose (~80 lines): the five outputs of dump and the one-file-per-graph rule.
@command()
@bundle_argument
@click.option("--dot", "as_dot", is_flag=True, help="Annotated DOT (the default).")
@click.option("--raw", "as_raw", is_flag=True, help="The driver's verbose DOT (debug_dump).")
@click.option("--trace", "as_trace", is_flag=True, help="Chrome/Perfetto trace JSON.")
@click.option("--annotations", "as_annotations", is_flag=True,
              help="The {exec node id: [dict]} map as JSON.")
@output_option("Output file (default: BUNDLE.GRAPH.dot and the like in the current "
               "directory; '-' for stdout).")
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "png", "pdf"]), default="dot",
              show_default=True, help="Render the annotated DOT with Graphviz's `dot`.")
@click.option("--graph", default=None, callback=not_empty,
              help="Graph name (step, forward, backward, or a run bundle's graph: exact name, "
              "ordinal such as '#1', unique prefix or regex).")
@click.option("--group", type=click.Choice(["module", "phase", "stream", "none"]),
              default="module", show_default=True, help="Cluster nodes by.")
@depth_option("Cluster/collapse module depth.")
@click.option("--collapse/--no-collapse", default=None,
              help="One node per module with counts and time (default: above 2000 nodes).")
@click.option("--filter", "regex", default=None, help="Keep nodes whose module/kernel matches.")
@force_option()
def dump(bundle: str, as_dot: bool, as_raw: bool, as_trace: bool, as_annotations: bool,
         output: Optional[str], fmt: str, graph: Optional[str], group: str,
         depth: Optional[int], collapse: Optional[bool], regex: Optional[str],
         force: bool) -> int:
    """Write BUNDLE as DOT, a trace or an annotation map.

    Annotated DOT (the default; --format renders it), the driver's raw DOT, a Chrome/Perfetto
    trace or the annotation map. Without -o it writes into the current directory, named by
    the bundle and graph (./BUNDLE.GRAPH.dot), and says where."""
    from graphscope.model.bundle_io import read_bundle
    from graphscope.model.outputs import check_output
    from graphscope.model.ranks import is_multirank

    what, fmt = _what_and_format(as_dot, as_raw, as_trace, as_annotations, output, fmt)
    if output:  # refused before any work if it would destroy data
        check_output(output, force=force, inputs=[bundle])
    if regex is not None:
        from graphscope.model.userregex import compile_user_regex

        compile_user_regex(regex, "--filter")  # refused before the bundle is read
    if is_multirank(bundle):
        return _dump_ranks(bundle, what, output, force)
    b = read_bundle(bundle)
    shape = (fmt, group, depth, collapse, regex)
    if what in ("dot", "raw") and graph is None and len(b.graphs) > 1:
        return _dump_each_graph(b, bundle, what, output, shape, force)
    return _dump_one(b, bundle, what, output, graph, shape, force)


def _what_and_format(as_dot: bool, as_raw: bool, as_trace: bool, as_annotations: bool,
                     output: Optional[str], fmt: str) -> tuple[str, str]:
    """What dump writes and the format, from its flags and ``-o``'s extension; a usage error
    for flags that contradict each other or options the output would silently drop."""
    from click.core import ParameterSource

    asked = [w for w, on in (("dot", as_dot), ("raw", as_raw), ("trace", as_trace),
                             ("annotations", as_annotations)) if on]
    if len(asked) > 1:
        raise click.UsageError("--" + ", --".join(asked) + ": dump writes one of them")
    what = asked[0] if asked else "dot"
    if fmt != "dot" and what != "dot":
        raise click.UsageError(f"--format {fmt} renders the annotated DOT; --{what} writes "
                               "text as it is")
    ctx = click.get_current_context()
    if what != "dot":  # the annotated DOT's options are not silently dropped
        for name, flag in (("group", "--group"), ("depth", "--depth"),
                           ("collapse", "--collapse/--no-collapse"), ("regex", "--filter")):
            if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                                  ParameterSource.ENVIRONMENT):
                raise click.UsageError(f"{flag} shapes the annotated DOT; --{what} writes "
                                       "every node as it is")
    ext = os.path.splitext(output or "")[1].lower().lstrip(".")
    if (what == "dot" and ext in ("svg", "png", "pdf")
            and ctx.get_parameter_source("fmt") == ParameterSource.DEFAULT):
        fmt = ext  # -o graph.svg: rendered as its name says
    if what == "dot" and ext in ("dot", "gv", "svg", "png", "pdf") and (
            ext != fmt and not (ext == "gv" and fmt == "dot")):
        raise click.UsageError(f"-o {output}: --format {fmt} writes {fmt.upper()}, not "
                               f"{ext.upper()}: name the file .{fmt} or pass --format {ext}"
                               .replace("--format gv", "--format dot"))
    return what, fmt


def _dump_ranks(bundle: str, what: str, output: Optional[str], force: bool) -> int:
    """A multi-rank bundle: every rank's timeline in one trace (nothing else applies)."""
    from graphscope.model.outputs import check_output, write_output
    from graphscope.model.ranks import read_ranks
    from graphscope.render.perfetto import build_multirank_trace

    if what != "trace":
        from graphscope._errors import GraphscopeError

        raise GraphscopeError(f"{bundle}: a multi-rank bundle: dump --trace (every rank's "
                              f"timeline), or dump one rank's bundle "
                              f"({bundle.rstrip('/')}/rank0 ...)")
    out = output or os.path.join(".", _bundle_name(bundle) + ".trace.json")
    check_output(out, force=force, inputs=[bundle])
    text = json.dumps(build_multirank_trace(read_ranks(bundle)), sort_keys=True) + "\n"
    write_output(out, text, force=force, inputs=[bundle])
    if out != "-":
        click.echo(f"Wrote {out}")  # stdout holds no data: as every "Wrote"
    return 0


def _default_out(b: Any, gname: Optional[str], ext: str) -> str:
    """./BUNDLE.<graph>.<ext> (./BUNDLE.<ext>: every graph's, gname None): in the current
    directory, never beside the bundle, which may be a checkout's fixture or read-only."""
    from graphscope.model.graph import safe_file_stem

    stem = f".{safe_file_stem(gname)}" if gname is not None else ""
    return os.path.join(".", f"{_bundle_name(b.path)}{stem}.{ext}")


def _bundle_name(path: str) -> str:
    """The bundle directory's own name (``.`` and a trailing ``/`` resolved)."""
    return os.path.basename(os.path.abspath(path.rstrip("/") or "/"))


def _dump_each_graph(b: Any, bundle: str, what: str, output: Optional[str],
                     shape: tuple[Any, ...], force: bool) -> int:
    """DOT of a bundle of several graphs: one file per graph, named by it (never the first
    graph alone)."""
    from graphscope.model.outputs import check_output, write_output

    names = [g.name for g in b.graphs]
    if output is not None:
        from graphscope._errors import GraphscopeError

        listed = "; ".join(names[:10]) + (f" ... ({len(names) - 10} more)"
                                          if len(names) > 10 else "")
        raise GraphscopeError(f"{b.path} has {len(names)} graphs ({listed}): pass --graph "
                              "NAME with -o, or leave -o out for one file per graph")
    fmt = shape[0]
    ext = "raw.dot" if what == "raw" else ("dot" if fmt == "dot" else fmt)
    if what == "raw":  # a run bundle has the driver's DOT of some graphs only
        names = _with_raw_dot(b, names)
    outs = [_default_out(b, n, ext) for n in names]
    for out in outs:  # every output refused before any is written
        check_output(out, force=bool(force), inputs=[bundle])
    for gname, out in zip(names, outs):
        one, said = _graph_text(b, what, gname, *shape)
        for n in said:
            click.echo(f"note: {gname}: {n}", err=True)
        write_output(out, one, force=bool(force), inputs=[bundle])
        click.echo(f"Wrote {out}")
    return 0


def _with_raw_dot(b: Any, names: list[str]) -> list[str]:
    """The graphs of ``names`` whose driver DOT the bundle has (the others named on stderr);
    a bundle with none is refused."""
    from graphscope.model.bundle_io import RAW_DOT_WHICH, has_raw_dot

    without = [n for n in names if not has_raw_dot(b, n)]
    names = [n for n in names if n not in without]
    if not names:
        from graphscope._errors import BundleError

        raise BundleError(f"{b.path}: no graph has the driver's DOT ({RAW_DOT_WHICH})")
    if without:
        listed = "; ".join(without[:5]) + (f" ... ({len(without) - 5} more)"
                                           if len(without) > 5 else "")
        click.echo(f"note: {len(without)} graph(s) have no driver DOT, skipped: "
                   f"{listed} ({RAW_DOT_WHICH})", err=True)
    return names


def _dump_one(b: Any, bundle: str, what: str, output: Optional[str], graph: Optional[str],
              shape: tuple[Any, ...], force: bool) -> int:
    """One output: a graph's DOT, or the bundle's (or one graph's) trace or annotations."""
    from graphscope.model.bundle import resolve_graph
    from graphscope.model.outputs import check_output, write_output

    gname = resolve_graph(b, graph) if graph else b.graphs[0].name
    notes: list[str] = []
    data: str | bytes
    if what in ("raw", "dot"):
        data, notes = _graph_text(b, what, gname, *shape)
        ext = "raw.dot" if what == "raw" else ("dot" if shape[0] == "dot" else shape[0])
    elif what == "trace":
        data, ext = _trace_text(b, gname, graph), "trace.json"
    else:
        amap = (_one_graph(b, gname) if graph else b).annotation_map()
        text = json.dumps({str(k): v for k, v in sorted(amap.items())}, sort_keys=True, indent=1)
        data, ext = text + "\n", "annotations.json"
    for n in notes:
        click.echo(f"note: {n}", err=True)
    # every graph's trace or annotations: named by the bundle, not by its first graph
    whole = graph is None and what in ("trace", "annotations") and len(b.graphs) > 1
    out = output or _default_out(b, None if whole else gname, ext)
    check_output(out, force=bool(force), inputs=[bundle])
    write_output(out, data, force=bool(force), inputs=[bundle])
    if out != "-":
        click.echo(f"Wrote {out}", err=output == "-")
    return 0


def _trace_text(b: Any, gname: str, graph: Optional[str]) -> str:
    """The Perfetto trace of the bundle (or of ``graph``); a bundle without replay events is
    refused, saying why."""
    from graphscope.render.perfetto import build_trace

    view = _one_graph(b, gname) if graph else b
    if not view.events:
        from graphscope._errors import BundleError

        if graph and b.events:
            raise BundleError(f"{b.path}: {gname} has no replay events (never replayed "
                              "while traced, or its replays were not kept as events)")
        raise BundleError(f"{b.path}: no replay events (recorded by `graphscope annotate`?);"
                          " capture with `graphscope capture` for a timeline")
    return json.dumps(build_trace(view), sort_keys=True) + "\n"


def _one_graph(b: Any, gname: str) -> Any:
    """``b`` holding only the graph ``gname`` (dump --graph for the trace and annotations)."""
    from graphscope.model.bundle import only_graph

    return only_graph(b, gname)


def _graph_text(b: Any, what: str, gname: str, fmt: str, group: str, depth: Optional[int],
                collapse: Optional[bool], regex: Optional[str]) -> tuple[Any, list[str]]:
    """One graph's raw DOT, or its annotated DOT rendered as ``fmt``; and notes for the user."""
    from graphscope.model.bundle_io import raw_dot
    from graphscope.render.dot import DotOptions, build_dot, render

    if what == "raw":
        return raw_dot(b, gname), []
    opts = DotOptions(graph=gname, group=group, depth=depth, collapse=collapse, filter=regex)
    text, notes = build_dot(b, opts)
    return (render(text, fmt) if fmt != "dot" else text), notes
