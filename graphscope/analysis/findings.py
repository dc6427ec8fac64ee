"""Findings, ranked: what to try first, with the time each would save per replay, the evidence
and the command that tries it. One list per bundle.

What is found (per graph with timed replays)
    streams   independent chains serialized on one stream (stream-order-only edges): the
              saving is the measured span minus the contention-aware what-if (``whatif.py``),
              or, where ``capture --try-streams`` measured it, the measured gain.
    fusion    runs of small kernels along the critical path (each < SMALL_KERNEL_NS, no library
              kernel: GEMM, convolution, attention, collectives, and no memset or memcpy)
              inside one compiled region (a module at depth REGION_DEPTH, or the whole graph
              where nodes carry no module; graphscope's pseudo modules, ``(loss)`` and
              ``(optimizer)``, are code that compiling the model's modules does not reach):
              fusing a run of k kernels into one removes k - 1 kernel floors and k - 1
              dependency gaps. The floor is the shortest kernels' time (the
              FLOOR_PERCENTILE-th percentile of the graph's kernel durations: what a kernel
              costs that does next to nothing); a kernel shorter than the floor saves its own
              duration. Per fused kernel: min(duration, floor) + its measured dependency gap;
              the low end of the interval keeps half the floors.
    host      (``graphscope run`` bundles traced back to back) the gap between replays (the GPU
              runs no graph node) longer than a replay (the host-bound verdict): per replay
              the median gap, never more than the mean gap (the time between replays per
              replay), as a share of the median time from one replay's first node to the
              next's. It lies outside the span, so it is claimed from the gaps, not from the
              span. Listed only from HOST_MIN_GAPS gaps on, and above the gaps' spread.

Time is claimed once
    Each graph's span is a pool of time by node: every node on the critical path (with its
    measured latencies) holds its duration plus its dependency gap. Findings claim, largest
    first, from the nodes their saving comes from (streams: the nodes the what-if takes off
    the critical path, in proportion to their time; fusion: each fused node's floor and gap);
    a later finding gets only what is left there (``shared_ns`` says how much it lost). The
    savings of one graph therefore never add up to more than its span.

Floor
    A finding saving less than FLOOR_PCT % of its graph's span, or less than the spread of the
    measured spans (half their IQR), is not listed: it is kept in ``under_floor`` with its
    figures and its floor (``threshold_ns``), and ``below_floor`` counts them; with none
    listed, ``nothing_above_noise`` is true. The verdicts that claim a gain (serialized, the
    streams measured, host bound) carry the figure of their finding, listed or not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..model.graph import UNATTRIBUTED, Node
from .diagnosis.types import (
    LISTED,
    Action,
    BetweenReplays,
    Evidence,
    Finding,
    Findings,
    WhatIf,
)
from .stats import module_at
from .whatif import Schedule

FLOOR_PCT = 2.0
HOST_MIN_GAPS = 5  # the host finding: gaps between replays observed, at least
SMALL_KERNEL_NS = 5_000
FLOOR_PERCENTILE = 5
REGION_DEPTH = 2  # "L.blocks.3": a module of the root's children's children
LIBRARY = re.compile(r"gemm|gemv|cutlass|xmma|cublas|cudnn|conv|flash|fmha|attention|nccl|"
                     r"splitk|sm\d\d_|dot_kernel|winograd|implicit", re.IGNORECASE)


@dataclass
class Basis:
    """What one graph's diagnosis hands the findings (positions are node indices)."""

    graph: str
    span_ns: float
    noise_ns: float
    path: np.ndarray  # the critical path with latencies (positions)
    duration_ns: np.ndarray
    latency_ns: np.ndarray
    lids: np.ndarray
    module_codes: tuple[list[str], np.ndarray]  # (distinct modules, per node its index)
    types: Sequence[str]
    nodes: Sequence[Node]
    whatif: Optional[WhatIf] = None
    schedule: Optional[Schedule] = None
    cut_edges: tuple[tuple[int, int], ...] = ()
    cut_count: int = 0
    measured_gain_ns: Optional[float] = None
    measured_range_ns: Optional[tuple[float, float]] = None  # its spread (the spans' quartiles)
    chain_modules: tuple[str, ...] = ()


@dataclass
class _Candidate:
    kind: str
    claims: dict[int, float]  # position -> ns
    predicted: float  # what it claims (the measured saving where there is one)
    model: float  # the model's prediction
    low: float
    high: float
    measured: Optional[float]
    evidence: Evidence
    action: Action
    kernels: int = 0
    floor_ns: float = 0.0
    gap_ns: float = 0.0


def findings(bases: Sequence[Basis], manifest: Mapping[str, Any],
             host: Optional[BetweenReplays] = None) -> Findings:
    """The ranked findings of a bundle's graphs, and the candidates under the floor (with
    their figures). ``host``: the gaps between replays where they are the program's own (the
    host finding applies)."""
    out: list[Finding] = []
    under: list[Finding] = []
    for b in bases:
        got, low = _graph_findings(b, manifest)
        out += got
        under += low
    if host is not None:
        f = _host(host)
        if f is not None:
            listed = f.gaps >= HOST_MIN_GAPS and f.saving_ns >= f.threshold_ns > 0
            (out if listed else under).append(f)
    out.sort(key=lambda f: (-f.saving_ns, f.graph, f.kind))
    refuted = tuple((b.graph, b.whatif.gain_pct, 100.0 * b.measured_gain_ns / b.span_ns)
                    for b in bases if b.whatif is not None and b.cut_count and b.span_ns
                    and b.measured_gain_ns is not None and b.measured_gain_ns <= 0
                    and b.whatif.gain_ns > 0)
    return Findings(tuple(out), FLOOR_PCT, len(under), not out, refuted,
                    timed=bool(bases) or host is not None, under_floor=tuple(under),
                    min_gaps=HOST_MIN_GAPS)


def _host(btw: BetweenReplays) -> Optional[Finding]:
    """The host finding where the GPU idles between replays for longer than a replay: per
    replay, the median gap, never more than the mean gap (the time between replays per
    replay); its share is of the time from one replay's start to the next's; its floor the
    gaps' spread. None where the gaps are not longer than a replay."""
    gap, span = btw.median_gap_ns, btw.median_span_ns
    if gap is None or not span or gap <= span or not btw.pairs:
        return None
    saving = min(gap, btw.total_gap_ns / btw.pairs)
    cycle = btw.median_cycle_ns or (gap + span)
    # the low end keeps each replay's launch (the host wait is what capturing more of the loop
    # removes), else the gaps' spread
    wait = btw.host_wait_median_ns
    low = min(saving, max(0.0, wait if wait is not None else saving - btw.gap_spread_ns))
    return Finding("host", "", saving, 100.0 * saving / cycle, low, saving, saving, 0.0,
                   None, Evidence((), 0, (), (), 0),
                   Action("by_hand", by_hand="capture_more_of_the_loop"),
                   threshold_ns=max(btw.gap_spread_ns, 1.0), spread_ns=btw.gap_spread_ns,
                   gaps=btw.pairs)


def _graph_findings(b: Basis, manifest: Mapping[str, Any]) -> tuple[list[Finding], list[Finding]]:
    """One graph's findings over its floor, and its candidates under it."""
    cands = [c for c in (_streams(b, manifest), _fusion(b, manifest)) if c is not None]
    # per node: the time of it not yet claimed (its duration and latency on the path)
    pool = np.zeros(len(b.duration_ns))
    pool[b.path] = b.duration_ns[b.path] + b.latency_ns[b.path]
    left = b.span_ns
    floor = max(FLOOR_PCT / 100.0 * b.span_ns, b.noise_ns)
    out: list[Finding] = []
    under: list[Finding] = []
    for c in sorted(cands, key=lambda c: -c.predicted):
        at = np.fromiter(c.claims, np.int64, len(c.claims))
        t = np.minimum(np.fromiter(c.claims.values(), float, len(c.claims)), pool[at])
        pool[at] -= t
        taken = float(np.cumsum(t)[-1]) if len(t) else 0.0  # added in order, as a loop would
        saving = max(0.0, min(taken, left))
        left -= saving
        share = saving / c.predicted if c.predicted else 1.0
        f = Finding(
            c.kind, b.graph, saving, 100.0 * saving / b.span_ns if b.span_ns else 0.0,
            max(0.0, c.low * share), c.high * share, c.model, c.predicted - saving,
            c.measured, c.evidence, c.action, c.kernels, c.floor_ns, c.gap_ns,
            threshold_ns=floor, spread_ns=b.noise_ns)
        (under if saving < floor or saving <= 0 else out).append(f)
    return out, under


# the options of a recorded capture that pick what is captured: a suggested try keeps them
_WHAT = ("--entry", "--config")


def _model_arg(manifest: Mapping[str, Any]) -> Optional[tuple[str, ...]]:
    """(model file as the user gave it, "--mode", mode, and the options that picked the model
    and inputs: ``--entry``...) of a ``graphscope capture`` bundle: what a try runs again."""
    cmd = manifest.get("command")
    mode = manifest.get("mode")
    if (not isinstance(cmd, list) or len(cmd) < 3 or cmd[1] != "capture"
            or not isinstance(mode, str) or mode == "run"):
        return None
    args = [str(x) for x in cmd[3:]]
    keep: list[str] = []
    for i, a in enumerate(args):
        if a in _WHAT and i + 1 < len(args):
            keep += [a, args[i + 1]]
        elif a.startswith(tuple(w + "=" for w in _WHAT)):
            keep.append(a)
    return (str(cmd[2]), "--mode", mode, *keep)


def _streams(b: Basis, manifest: Mapping[str, Any]) -> Optional[_Candidate]:
    wi, sch = b.whatif, b.schedule
    if wi is None or sch is None or not b.cut_count:
        return None
    gain = wi.gain_ns if b.measured_gain_ns is None else b.measured_gain_ns
    if gain <= 0:  # nothing to gain (the model's or the measurement's word)
        return None
    # the nodes the what-if takes off the critical path hold the saving, by their time
    on_wi = np.zeros(len(b.nodes), bool)
    on_wi[sch.path] = True
    off = b.path[~on_wi[b.path]]
    if not len(off):
        off = b.path
    w = b.duration_ns[off] + b.latency_ns[off]
    w = w / w.sum() * gain if w.sum() > 0 else np.full(len(off), gain / max(1, len(off)))
    model = _model_arg(manifest)
    action = (Action("try_streams", ("graphscope", "capture", *model,
                                     "--try-streams", str(wi.max_streams)))
              if model else Action("by_hand", by_hand="side_streams",
                                   target=", ".join(b.chain_modules[:4])))
    ev = Evidence(tuple(int(x) for x in b.lids[np.sort(off)][:LISTED]), len(off),
                  b.chain_modules[:LISTED], b.cut_edges[:LISTED], b.cut_count)
    # the interval of what the finding claims: the measurement's spread where it was measured
    low, high = (b.measured_range_ns or (gain, gain)) if b.measured_gain_ns is not None else (
        wi.measured_span_ns - wi.high_ns, wi.measured_span_ns - wi.low_ns)
    return _Candidate("streams", dict(zip(off.tolist(), w.tolist())), gain, wi.gain_ns,
                      low, high, b.measured_gain_ns, ev, action, kernels=wi.chains)


def _fusion(b: Basis, manifest: Mapping[str, Any]) -> Optional[_Candidate]:
    d, lat = b.duration_ns, b.latency_ns
    kern = np.fromiter(map("kernel".__eq__, b.types), bool, len(b.types))
    if not kern.any():
        return None
    floor = float(np.percentile(d[kern], FLOOR_PERCENTILE))
    path = b.path
    # per node of the path: its compile region (-1: compiling does not reach it)
    names, codes = b.module_codes
    regions = [module_at(m, REGION_DEPTH) for m in names]
    first: dict[str, int] = {}  # each region numbered by its first module
    for i, r in enumerate(regions):
        first.setdefault(r, i)
    region_of = np.array([first[r] if _compiled(m) else -1
                          for m, r in zip(names, regions)] or [-1], np.int64)
    region = region_of[codes[path]]
    fusable = kern[path] & (d[path] < SMALL_KERNEL_NS) & (region >= 0)
    at = np.flatnonzero(fusable)  # library kernels (GEMMs, ...) do not fuse
    lib = list(map(_library, map(_kernel_name, map(b.nodes.__getitem__, path[at].tolist()))))
    fusable[at[np.asarray(lib, bool)]] = False
    # a fused kernel is one that follows a fusable kernel of its region on the path
    same = np.r_[False, fusable[1:] & fusable[:-1] & (region[1:] == region[:-1])]
    fused = path[same]
    if not len(fused):
        return None
    part = np.minimum(d[fused], floor)
    saving_by = part + lat[fused]
    claims = dict(zip(fused.tolist(), saving_by.tolist()))
    by_region = np.bincount(region[same], weights=saving_by, minlength=len(regions))
    top = [regions[r] for r in np.argsort(-by_region, kind="stable").tolist()
           if by_region[r] > 0]
    saving = float(saving_by.sum())
    pos = np.sort(fused)
    ev = Evidence(tuple(int(x) for x in b.lids[pos][:LISTED]), len(pos), tuple(top[:LISTED]),
                  (), 0)
    return _Candidate("fusion", claims, saving, saving, saving - 0.5 * float(part.sum()), saving,
                      None,
                      ev, _compile_action(top, manifest), kernels=len(fused),
                      floor_ns=floor, gap_ns=float(np.median(lat[fused])))


def _kernel_name(nd: Any) -> str:
    return nd.demangled or nd.kernel or ""


@functools.lru_cache(maxsize=4096)
def _library(name: str) -> bool:
    return bool(LIBRARY.search(name))


def _compiled(module: str) -> bool:
    """Whether compiling would reach a node of this module: a module of the model, or no
    module at all (a program's code, compiled as a function); not graphscope's pseudo modules
    (``(loss)``, ``(optimizer)``: code outside the model's modules)."""
    return module == UNATTRIBUTED or not module.startswith("(")


def _compile_action(regions: list[str], manifest: Mapping[str, Any]) -> Action:
    """``--try-compile GLOB`` over the regions (their common parent and ``*``, or the one
    region), where the bundle is a capture's and its nodes carry modules; else by hand."""
    named = [r for r in regions if r != UNATTRIBUTED and not r.startswith("(")]
    model = _model_arg(manifest)
    if not named:
        return Action("by_hand", by_hand="compile_function")
    if len(named) == 1:
        glob = named[0]
    else:
        parts = [r.split(".") for r in named]
        common = []
        for level in zip(*parts):
            if len(set(level)) > 1:
                break
            common.append(level[0])
        glob = ".".join(common) + ".*" if common else "*"
    if model is None:
        return Action("by_hand", by_hand="compile_function", target=glob)
    return Action("try_compile", ("graphscope", "capture", *model, "--try-compile", glob),
                  target=glob)
