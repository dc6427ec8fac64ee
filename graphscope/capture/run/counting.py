"""Which of a program's captures are recorded by node counts (graphscope.native.nodecount,
no CUPTI subscription in the capture) and what the watch learns from each capture about a
site's next ones.

A capture begun with grad off may be counted, ops included (no backward can run on autograd's
thread there; one that runs anyway is caught), unless ``GRAPHSCOPE_NODE_COUNTS=learned``; so may
a site's captures past its op captures once its CUPTI captures made every node on the capturing
thread. A counted capture in which a backward ran or another thread changed its scope keeps its
nodes unscoped and sends the site back to CUPTI. Counts by the capture stream's dependencies
(``DEPS``) are used once a capture that walked the graph at every note (``VERIFY``) found both
counts equal at each.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from ...native import nodecount
from .graphs import ProgramGraph


@dataclass
class CountPolicy:
    """What the watch knows per capture site about counting its captures."""

    # site -> its CUPTI captures so far made every node on the capturing thread: the next
    # ones may be counted (False: a site that must stay on CUPTI)
    countable: dict[str, bool] = field(default_factory=dict)
    # site -> whether its counted captures may count by the stream's dependencies (True:
    # a capture that walked the graph at every note found the two counts equal at each;
    # False: they differed, walk; absent: the next counted capture compares them)
    deps_ok: dict[str, bool] = field(default_factory=dict)
    # the environment's node-count settings, read as a batch opens, not per capture
    mode: str = field(default_factory=nodecount.mode)
    deps_allowed: bool = field(default_factory=nodecount.deps_allowed)

    def reread(self) -> None:
        """Read the environment's settings again (a batch opens)."""
        self.mode = nodecount.mode()
        self.deps_allowed = nodecount.deps_allowed()

    def counts(self, site: str, kind: str, record_ops: bool) -> bool:
        """Whether this capture records by node counts (see the module's docstring)."""
        known = self.countable.get(site)
        if kind != "eager" or self.mode == "off" or known is False:
            return False
        if not record_ops and known:
            return True
        if self.mode == "all":
            import torch

            return not torch.is_grad_enabled()
        return False

    def how(self, site: str) -> int:
        """How a counted capture of ``site`` counts: VERIFY until the stream's dependencies
        were checked against walks, then DEPS where they agreed, else WALK."""
        if not self.deps_allowed:
            return nodecount.WALK
        ok = self.deps_ok.get(site)
        return nodecount.VERIFY if ok is None else nodecount.DEPS if ok else nodecount.WALK

    def learn(self, rec: ProgramGraph, records: Any, backward_calls: int,
              warnings: list[str]) -> Optional[Any]:
        """Learn whether the site's next captures may be counted: every CUPTI window so far made
        all its nodes on the capturing thread (this one: the capture ends where it runs).
        Returns the window's records to keep, or None when a counted window is unrecorded; a
        counted window where other threads made nodes keeps them unscoped."""
        site = rec.site
        if not isinstance(records, nodecount.CountedNodes):
            own = set(records.thread.tolist()) <= {threading.get_native_id()}
            self.countable[site] = self.countable.get(site, True) and own
            return records
        why = records.problem()
        if why:
            self.countable[site] = False
            rec.failed = rec.failed or f"not recorded: {why}"
            warnings.append(f"{site}: {rec.failed}")
            return None
        if records.how == nodecount.VERIFY:
            self.deps_ok[site] = records.mismatches == 0
        others = []
        if backward_calls:
            others.append(f"{backward_calls} backward call(s) (autograd's thread makes nodes)")
        if records.foreign:
            others.append(f"{records.foreign} scope change(s) on other threads")
        missed = records.how == nodecount.DEPS and records.mismatches
        if missed:
            # another stream's newest work was unjoined where the stream's dependencies were
            # read: nodes may carry a later scope than theirs, so none is given one
            self.deps_ok[site] = False
        if not others and not missed:
            return records
        if others:
            self.countable[site] = False
        later = "are recorded by CUPTI" if others else "walk the graph"
        rec.scopes_unknown = "; ".join(others + (
            ["the capture stream's dependencies missed nodes made on another stream"]
            if missed else []))
        warnings.append(
            f"{site}: a capture recorded by node counts saw {rec.scopes_unknown}: its "
            f"nodes are left without module scopes (the site's later captures {later})")
        return records.unplaced()
