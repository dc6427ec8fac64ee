"""A loaded bundle: manifest, graphs and replay data, and the views of some of its graphs."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from .graph import CapturedGraph, Node, NodeKind, unique_short_names


@dataclass(frozen=True)
class Bundle:
    """A loaded bundle: manifest, graphs and replay data."""

    path: str
    manifest: Mapping[str, Any]
    graphs: tuple[CapturedGraph, ...]
    replays: int
    replay_kernel_ns: tuple[int, ...] = ()  # per replay: sum of graph work durations
    replay_span_ns: tuple[int, ...] = ()  # per replay: first start to last end
    events: tuple[Mapping[str, Any], ...] = ()
    unjoined_records: int = 0
    # per traced replay: the host's cudaGraphLaunch call {graph, replay, start_ns, end_ns}
    launches: tuple[Mapping[str, Any], ...] = ()
    # a view of some graphs (only_graph): the bundle it was taken from, so that a launch queued
    # behind other graphs' replays stays queued time (analysis/diagnosis.py)
    parent: Optional[Bundle] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # kernel names unique over the whole bundle; a view of some graphs keeps them
        assign_short_names(self.graphs)

    def nodes(self) -> Iterator[Node]:
        for g in self.graphs:
            yield from g.nodes

    def work_nodes(self) -> Iterator[Node]:
        return iter(self.work)

    @functools.cached_property
    def work(self) -> tuple[Node, ...]:
        """Kernel, memcpy and memset nodes of every graph, in graph and node order."""
        return tuple(n for n in self.nodes() if n.is_work)

    @functools.cached_property
    def durations(self) -> Any:
        """(work nodes x replays) numpy matrix of per-replay durations, 0 where missing."""
        import numpy as np

        r = max(self.replays, 0)
        rows = [n.durations_ns for n in self.work]
        if r == 0 or not rows:
            return np.zeros((len(rows), r), dtype=np.int64)
        if all(len(d) == r for d in rows):
            return np.asarray(rows, dtype=np.int64).reshape(len(rows), r)
        out = np.zeros((len(rows), r), dtype=np.int64)
        for i, d in enumerate(rows):
            k = min(len(d), r)
            out[i, :k] = d[:k]
        return out

    @functools.cached_property
    def graph_index(self) -> dict[str, CapturedGraph]:
        """Graphs by name (names are unique: bundle.py refuses a bundle that repeats one)."""
        return {g.name: g for g in reversed(self.graphs)}  # the first of a repeated name

    @functools.cached_property
    def events_by_graph(self) -> dict[Any, tuple[Mapping[str, Any], ...]]:
        """The kept events of each graph (one pass: views of 100,000 graphs stay linear)."""
        out: dict[Any, list[Mapping[str, Any]]] = {}
        for e in self.events:
            out.setdefault(e.get("graph"), []).append(e)
        return {k: tuple(v) for k, v in out.items()}

    @functools.cached_property
    def graph_names(self) -> list[str]:
        return [g.name for g in self.graphs]

    def graph(self, name: str) -> CapturedGraph:
        try:
            return self.graph_index[name]
        except KeyError:
            raise KeyError(name) from None

    @property
    def has_timings(self) -> bool:
        return self.replays > 0

    def annotation_map(self) -> dict[int, list[dict[str, Any]]]:
        """PyTorch's shape: ``{exec node id: [annotation dict]}`` for annotated work nodes."""
        return {
            n.exec_node_id: [dict(n.annotation)]
            for n in self.work_nodes()
            if n.annotation
        }


def assign_short_names(graphs: Sequence[CapturedGraph]) -> None:
    """Give every kernel node of ``graphs`` its name as the bundle shows it (unique per
    distinct kernel, see :func:`unique_short_names`)."""
    kernels = [n for g in graphs for n in g.nodes if n.type == NodeKind.KERNEL]
    if all("_short" in n.__dict__ for n in kernels):
        return
    names = unique_short_names([n.demangled or n.kernel or "?" for n in kernels])
    for n in kernels:
        n.__dict__["_short"] = names[n.demangled or n.kernel or "?"]


_ORDINAL = re.compile(r"#\d+")


def resolve_graph(bundle: Bundle, name: str) -> str:
    """The one graph ``name`` means, whatever the number of graphs: an exact name, else an
    ordinal ``#1`` (the graph whose name holds ``#1``, never ``#10``), else a prefix that ends
    where a word ends (``decode.py:71 #1``, never ``... #10``), else a plain prefix, else a part
    of the name as written (``[16]``, a bucket's shapes: brackets are not a character class
    there), else a regex (matched in bounded time). The first of these that matches anything
    decides: two or more graphs there is an error listing them."""
    from .._errors import BundleError

    names = bundle.graph_names
    if name in bundle.graph_index:
        return name

    def cut(n: str) -> bool:  # ``name`` ends a word in ``n``
        return len(n) == len(name) or not (name[-1].isalnum() and n[len(name)].isalnum())

    tiers: list[Any] = []
    if _ORDINAL.fullmatch(name):
        token = re.compile(r"(?:^|\s)" + re.escape(name) + r"(?!\d)")
        tiers.append(lambda: [n for n in names if token.search(n)])
    tiers.append(lambda: [n for n in names if n.startswith(name) and cut(n)])
    tiers.append(lambda: [n for n in names if n.startswith(name)])
    tiers.append(lambda: [n for n in names if name in n])

    def by_regex() -> list[str]:
        from .userregex import compile_user_regex, time_limit

        rx = compile_user_regex(name, f"--graph {name!r:.80}")
        with time_limit(f"--graph {name!r:.80}"):
            return [n for n in names if rx.search(n)]
    tiers.append(by_regex)
    hits: list[str] = []
    for tier in tiers:
        hits = tier()
        if hits:
            break
    if len(hits) != 1:
        listed = hits or names
        what = "no graph" if not hits else f"{len(hits)} graphs"
        more = f" ... ({len(listed) - 20} more)" if len(listed) > 20 else ""
        raise BundleError(f"{bundle.path}: --graph {name!r:.80} matches {what}; "
                          f"{'they are' if hits else 'graphs'}: " + "; ".join(listed[:20])
                          + more)
    return hits[0]


def only_graph(bundle: Bundle, name: str) -> Bundle:
    """``bundle`` restricted to one graph (see :func:`resolve_graph`).

    Per-replay totals are recomputed from that graph's nodes; events keep that graph's only;
    spans are the bundle's when it holds just this graph, else this graph's own over the
    replays whose events were kept. A graph no traced replay ran (a program's bucket it never
    replayed while traced) is a view without timed replays, as an annotate bundle is: its
    figures read "-", not 0 ns.
    """
    g = bundle.graph(resolve_graph(bundle, name))
    import numpy as np

    work = [n for n in g.nodes if n.is_work]
    if work and not any(n.durations_ns for n in work):
        return dataclasses.replace(bundle, graphs=(g,), replays=0, replay_kernel_ns=(),
                                   replay_span_ns=(), events=(), launches=())
    r = bundle.replays
    mat = np.zeros((len(work), r), dtype=np.int64)
    for i, n in enumerate(work):
        k = min(len(n.durations_ns), r)
        mat[i, :k] = n.durations_ns[:k]
    per_replay = mat.sum(axis=0).tolist()
    events = bundle.events_by_graph.get(g.name, ())
    if len(bundle.graphs) == 1:
        spans = bundle.replay_span_ns
    else:  # the graph's own span in each replay whose events were kept
        lo: dict[Any, int] = {}
        hi: dict[Any, int] = {}
        for e in events:
            r_, s_ = e.get("replay"), int(e.get("start_ns", 0))
            lo[r_] = min(lo.get(r_, s_), s_)
            hi[r_] = max(hi.get(r_, s_), s_ + int(e.get("dur_ns", 0)))
        spans = tuple(hi[k] - lo[k] for k in lo)
    return dataclasses.replace(
        bundle, graphs=(g,), replay_kernel_ns=tuple(int(x) for x in per_replay),
        replay_span_ns=spans, events=events, parent=bundle.parent or bundle)


def source_base(bundle: Bundle) -> Optional[str]:
    """The directory a bundle's source locations are shown relative to: the model file's
    (``capture``), else the program's (``run``: the directory of the recorded source path
    that ends with the program named on the command line)."""
    import os

    model = bundle.manifest.get("model")
    if isinstance(model, Mapping) and isinstance(model.get("path"), str) and os.path.isabs(
            model["path"]):
        return os.path.dirname(model["path"])
    cmd = bundle.manifest.get("command")
    progs = [a for a in cmd if isinstance(a, str) and a.endswith(".py")] if isinstance(
        cmd, list) else []
    if not progs:
        return None
    tail = "/" + os.path.basename(progs[-1]) + ":"
    for n in bundle.nodes():
        src = n.source
        if src and src.startswith("/") and tail in src:
            return src[:src.index(tail)]
    return None


def display_source(source: Optional[str], base: Optional[str]) -> Optional[str]:
    """``source`` (``/abs/dir/prog.py:12 (fn)``) relative to ``base`` where it lies under it
    (``prog.py:12 (fn)``); other locations stay as recorded. Bundles keep absolute paths."""
    if not source or not base:
        return source
    prefix = base.rstrip("/") + "/"
    return source[len(prefix):] if source.startswith(prefix) else source
