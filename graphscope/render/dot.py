"""Annotated DOT of a captured graph, built with pydot; rendering needs Graphviz's `dot`."""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional

from .._errors import GraphscopeError
from ..model.bundle import Bundle, display_source, source_base
from ..model.graph import UNATTRIBUTED, CapturedGraph, Node, NodeKind
from .fmt import fmt_ns, svg_key

PALETTE = ["#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6", "#ffff99", "#8dd3c7",
           "#bebada", "#80b1d3", "#fccde5", "#d9d9d9", "#ccebc5"]
AUTO_COLLAPSE_NODES = 2000
MAX_GRAPH_SVG_NODES = 1500  # the expanded (clustered) graph view is embedded up to this size


@dataclass(frozen=True)
class DotOptions:
    graph: Optional[str] = None  # None: the first graph
    group: str = "module"  # module | phase | stream | none
    depth: Optional[int] = None  # cluster levels below the root
    collapse: Optional[bool] = None  # None: automatic above AUTO_COLLAPSE_NODES
    filter: Optional[str] = None  # regex on module / kernel name; others are dropped
    work_only: bool = False


def _pydot() -> Any:
    try:
        import pydot
    except ImportError:
        raise GraphscopeError(
            "DOT output needs pydot, a dependency of graphscope: pip install pydot"
        ) from None
    return pydot


def _module_path(n: Node, depth: Optional[int]) -> list[str]:
    m = n.module
    if m == UNATTRIBUTED:
        return [m]
    parts = m.split(".")
    paths = [".".join(parts[: i + 1]) for i in range(len(parts))]
    return paths[: depth + 1] if depth is not None else paths


def _label(n: Node) -> str:
    if n.type == NodeKind.KERNEL:
        lines = [n.short_name, f"grid {tuple(n.grid)} block {tuple(n.block)}"]
    elif n.type in (NodeKind.MEMCPY, NodeKind.MEMSET):
        lines = [n.type, f"{n.bytes} B"]
    else:
        lines = [n.type]
    if n.median_ns is not None:
        lines.append(fmt_ns(n.median_ns))
    return "\\n".join(lines)


def _top_colour(paths: list[str], colours: dict[str, str]) -> str:
    key = paths[1] if len(paths) > 1 else paths[0]
    if key not in colours:
        colours[key] = PALETTE[len(colours) % len(PALETTE)]
    return colours[key]


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n") + '"'


def build_dot(bundle: Bundle, opts: DotOptions = DotOptions()) -> tuple[str, list[str]]:
    """DOT text of one graph and notes for the user (e.g. that it was collapsed)."""
    pydot = _pydot()
    g = bundle.graphs[0] if opts.graph is None else _find(bundle, opts.graph)
    notes: list[str] = []
    nodes = [n for n in g.nodes if n.is_work or not opts.work_only]
    if opts.filter:
        from ..model.userregex import compile_user_regex, time_limit

        rx = compile_user_regex(opts.filter, "--filter")
        with time_limit("--filter"):
            kept = [n for n in nodes if rx.search(n.module) or rx.search(n.short_name)]
        if not kept:  # an empty graph written with exit 0 would look like a result
            from .._errors import ConfigError

            raise ConfigError(f"--filter {opts.filter!r}: no node of graph {g.name!r} has a "
                              f"module or kernel name that matches ({len(nodes)} nodes)")
        nodes = kept
    collapse = opts.collapse
    if collapse is None:
        collapse = len(nodes) > AUTO_COLLAPSE_NODES
        if collapse:
            notes.append(
                f"{len(nodes)} nodes > {AUTO_COLLAPSE_NODES}: collapsed into modules "
                "(pass --no-collapse for every node)"
            )
    dot = pydot.Dot(graph_name=_q(f"graphscope_{g.name}"), graph_type="digraph", rankdir="TB",
                    compound="true")
    dot.set_node_defaults(shape="box", style="filled,rounded", fontname="Helvetica",
                          fontsize="10")
    if collapse:
        _collapsed(pydot, dot, g, nodes, opts, bundle)
    else:
        _full(pydot, dot, g, nodes, opts, source_base(bundle))
    return dot.to_string(), notes


def _find(bundle: Bundle, name: str) -> CapturedGraph:
    try:
        return bundle.graph(name)
    except KeyError:
        names = ", ".join(x.name for x in bundle.graphs)
        raise GraphscopeError(f"{bundle.path}: no graph {name!r} (graphs: {names})") from None


def _group_key(n: Node, opts: DotOptions) -> list[str]:
    if opts.group == "module":
        return _module_path(n, opts.depth)
    if opts.group == "phase":
        return [n.phase if n.annotation else "unannotated"]
    if opts.group == "stream":
        return [str(n.annotation.get("stream", "default"))]
    return []


def _full(pydot: Any, dot: Any, g: CapturedGraph, nodes: list[Node], opts: DotOptions,
          base: Optional[str] = None) -> None:
    clusters: dict[str, Any] = {}
    colours: dict[str, str] = {}
    keep = {n.local_id for n in nodes}

    def cluster(path: list[str]) -> Any:
        parent = dot
        for i, p in enumerate(path):
            if p not in clusters:
                c = pydot.Cluster(
                    # pydot prefixes "cluster_": the name must stay a bare ID
                    graph_name="c" + str(len(clusters)), label=_q(p.rsplit(".", 1)[-1]),
                    style="rounded", color="#888888", fontname="Helvetica", fontsize="11",
                )
                (clusters[path[i - 1]] if i else parent).add_subgraph(c)
                clusters[p] = c
        return clusters[path[-1]] if path else dot

    for n in nodes:
        path = _group_key(n, opts)
        bwd = n.phase == "backward"
        attrs = {
            "label": _q(_label(n)),
            "fillcolor": _q(_top_colour(path, colours) if path else "#eeeeee"),
            "tooltip": _q(_tooltip(n, base)),
        }
        if bwd:
            attrs["style"] = _q("filled,rounded,dashed")
            attrs["penwidth"] = "2"
        if not n.is_work:
            attrs["shape"] = "ellipse"
            attrs["fillcolor"] = _q("#ffffff")
        cluster(path).add_node(pydot.Node(f"n{n.local_id}", **attrs))
    for a, b in g.edges:
        if a in keep and b in keep:
            dot.add_edge(pydot.Edge(f"n{a}", f"n{b}"))


def _tooltip(n: Node, base: Optional[str] = None) -> str:
    bits = [n.demangled or n.type]
    for k in ("op", "shapes", "source"):
        v = display_source(n.source, base) if k == "source" else getattr(n, k)
        if v:
            bits.append(f"{k}: {v}")
    if n.annotation:
        bits.append(", ".join(f"{k}={v}" for k, v in sorted(n.annotation.items())))
    return " | ".join(bits)[:1000]


def _collapsed(pydot: Any, dot: Any, g: CapturedGraph, nodes: list[Node], opts: DotOptions,
               bundle: Bundle) -> None:
    import numpy as np

    from ..analysis.summary import counted_view

    depth = 1 if opts.depth is None else opts.depth
    key_opts = DotOptions(group=opts.group, depth=depth)
    # a box's time is its nodes' durations summed in each counted replay, the median: the
    # module table's figure (its fwd or bwd column), not a sum of the nodes' medians
    counted = counted_view(bundle)
    row: dict[int, int] = {}
    dur = None
    if counted.replays and counted.work:
        dur = counted.durations
        row = {n.exec_node_id: i for i, n in enumerate(counted.work)}
    members: dict[str, list[int]] = defaultdict(list)
    group: dict[int, str] = {}  # local id -> collapsed node
    keys: dict[tuple[str, str, str], str] = {}  # (module, phase, stream) -> collapsed node
    stats: dict[str, dict[str, Any]] = defaultdict(lambda: {"n": 0, "t": 0.0, "bwd": 0})
    for n in nodes:
        bwd = n.phase == "backward"
        ck = (n.module, n.phase, str(n.annotation.get("stream", "")))
        key = keys.get(ck)
        if key is None:
            key = "/".join(_group_key(n, key_opts)[-1:]) or "all"
            if bwd and opts.group == "module":
                key += " (bwd)"
            keys[ck] = key
        group[n.local_id] = key
        s = stats[key]
        s["n"] += 1
        if n.exec_node_id in row:
            members[key].append(row[n.exec_node_id])
        s["bwd"] |= bwd
    for key, idx in members.items():
        if dur is not None:
            stats[key]["t"] = float(np.median(dur[idx].sum(axis=0)))
    ids = {k: f"m{i}" for i, k in enumerate(sorted(stats))}
    colours: dict[str, str] = {}
    for k in sorted(stats):
        s = stats[k]
        label = (f"{k}\\n{s['n']} node{'' if s['n'] == 1 else 's'}"
                 + (f"\\n{fmt_ns(s['t'])}" if s["t"] else ""))
        attrs = {"label": _q(label), "fillcolor": _q(_top_colour([k], colours))}
        if s["bwd"]:
            attrs["style"] = _q("filled,rounded,dashed")
        dot.add_node(pydot.Node(ids[k], **attrs))
    by_local = group
    seen = set()
    for a, b in g.edges:
        ka, kb = by_local.get(a), by_local.get(b)
        if ka and kb and ka != kb and (ka, kb) not in seen:
            seen.add((ka, kb))
            dot.add_edge(pydot.Edge(ids[ka], ids[kb]))


def render(dot_text: str, fmt: str) -> bytes:
    """Render DOT to svg/png/pdf with Graphviz's `dot` (through the graphviz package); a
    clear error when it is missing or rejects the input."""
    try:
        import graphviz
    except ImportError:
        raise GraphscopeError("rendering needs the graphviz package: pip install graphviz"
                              ) from None
    try:
        return bytes(graphviz.pipe("dot", fmt, dot_text.encode("utf-8"), quiet=True))
    except graphviz.ExecutableNotFound:
        raise GraphscopeError(
            f"rendering {fmt} needs Graphviz's `dot`, which is not on PATH: install Graphviz "
            "(apt-get install graphviz / brew install graphviz / conda install graphviz) or "
            "write DOT with --format dot"
        ) from None
    except graphviz.CalledProcessError as exc:
        err = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        raise GraphscopeError(f"dot -T{fmt} failed: {err[0] if err else exc}") from None


MAX_GRAPH_SVGS = 24  # graphs drawn with Graphviz per HTML report (each is a `dot` run)
TALL = 2.0  # height / width above which a drawing is laid out left to right


def _aspect(svg: str) -> float:
    """height / width of Graphviz's SVG (0 when it does not say)."""
    m = re.search(r'<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"', svg)
    return float(m.group(2)) / float(m.group(1)) if m and float(m.group(1)) else 0.0


MAX_COLLAPSED_BOXES = 40  # the page's collapsed view: the deepest module level this fits


def collapse_depth(nodes: list[Node]) -> int:
    """The module depth the page's collapsed view draws: the deepest at which the boxes (one
    per module cut to that depth, and phase) number at most MAX_COLLAPSED_BOXES, at least 1:
    a model's blocks, not one box holding them all."""
    deepest = max((len(n.module.split(".")) for n in nodes if n.module != UNATTRIBUTED),
                  default=1)
    depth = 1
    for d in range(2, deepest):
        boxes = {(_module_path(n, d)[-1], n.phase == "backward") for n in nodes}
        if len(boxes) > MAX_COLLAPSED_BOXES:
            break
        depth = d
    return depth


def _svgs(bundle: Bundle, name: str) -> dict[str, Optional[str]]:
    """Graph ``name`` as SVG: modules collapsed (:func:`collapse_depth`), and as clusters
    when small enough."""
    out: dict[str, Optional[str]] = {}
    nodes = list(bundle.graph(name).nodes)
    size, depth = len(nodes), collapse_depth(nodes)
    for key, opts in (("collapsed", DotOptions(graph=name, collapse=True, depth=depth)),
                      ("clusters", DotOptions(graph=name, collapse=False, depth=2))):
        if key == "clusters" and size > MAX_GRAPH_SVG_NODES:
            out[key] = None
            continue
        try:
            text, _ = build_dot(bundle, opts)
            svg = render(text, "svg").decode("utf-8", errors="replace")
            if _aspect(svg) > TALL and "\nrankdir=TB;" in text:
                # a long chain is a narrow column that runs off the page: left to right it
                # fits the page's width
                svg = render(text.replace("\nrankdir=TB;", "\nrankdir=LR;", 1),
                             "svg").decode("utf-8", errors="replace")
            out[key] = svg[svg.find("<svg"):]
        except Exception:  # the page says how to get it instead
            out[key] = None
    return out


def graph_svgs(bundle: Bundle, ranks: Optional[list[tuple[int, Bundle]]] = None
               ) -> dict[str, dict[str, Optional[str]]]:
    """Drawings for the HTML report, keyed by ``fmt.svg_key(rank, graph)``: the slowest
    ``MAX_GRAPH_SVGS`` graphs (the report's views refer to them), each modules-collapsed and,
    when small enough, as clusters. Empty without Graphviz."""
    if shutil.which("dot") is None:
        return {}
    from ..analysis.summary import graph_rows

    cands: list[tuple[float, Optional[int], Bundle, str]] = []
    sources: list[tuple[Optional[int], Bundle]] = list(ranks) if ranks else [(None, bundle)]
    for rank, b in sources:
        cands += [(-(row["median_ns"] or 0.0), rank, b, row["name"]) for row in graph_rows(b)]
    cands.sort(key=lambda c: (c[0], c[1] if c[1] is not None else -1))
    return {svg_key(rank, name): _svgs(b, name) for _, rank, b, name in cands[:MAX_GRAPH_SVGS]}
