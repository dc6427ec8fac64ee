"""torch.compile's cudagraph trees as a program runs (``graphscope run``), from torch's own
signals: each recording and re-recording with its reason, each region torch skipped with the
message torch gives, warm-up and eager runs, and torch's ``cudagraph*`` counters.

Sources, all torch's: ``CUDAGraphTreeManager.record_function`` (a recording), ``run_eager``
(a warm-up, or an eager run of a warmed-up function), ``CUDAGraphNode.check_invariants`` (the
status and message of a recorded graph that cannot run these inputs: the re-record's reason),
``log_cudagraph_skip_and_bump_counter`` (a skipped region: "skipping cudagraphs due to ...")
and ``torch._dynamo.utils.counters["inductor"]``. A recording of a compiled callable recorded
before with other input shapes (each size of a dynamic-shape graph is a tree function of its
own on one callable; a recompile is a new callable, so a new recording) is a re-record for
"input shapes" with both shape lists. The wrappers call torch's functions unchanged and are
removed when the program ends; where this torch lacks one of them, that signal is absent and
the document says which (``missing``).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Optional

TREES_VERSION = 1
MAX_EVENTS = 10_000  # recordings and skips kept (counted beyond)
SKIP_FN = "log_cudagraph_skip_and_bump_counter"


def _shapes(inputs: Any) -> str:
    out = []
    for x in inputs if isinstance(inputs, (list, tuple)) else ():
        shape = getattr(x, "shape", None)
        if shape is not None:
            out.append("x".join(str(int(d)) for d in shape) or "scalar")
    return ", ".join(out)


def _counters() -> dict[str, int]:
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001 - a torch without dynamo has no trees either
        return {}
    return {k: int(v) for k, v in counters["inductor"].items() if "cudagraph" in k}


class TreeEvents:
    """Install once torch.compile is used; :meth:`doc` is the file's content (None: nothing
    happened)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self.warmups: dict[str, int] = {}
        self.eager_runs: dict[str, int] = {}
        self.missing: list[str] = []
        self._undo: list[Callable[[], None]] = []
        self._base: Optional[dict[str, int]] = None  # the counters when installed
        self._t0 = time.perf_counter()
        self._local = threading.local()
        # the compiled callable's id -> input shapes of its last recording (each input size of
        # a dynamic-shape graph is a function of its own in the tree, on the same callable)
        self._recorded: dict[int, str] = {}

    def _add(self, event: dict[str, Any]) -> None:
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return
        self.events.append({**event, "t_s": round(time.perf_counter() - self._t0, 6)})

    def install(self) -> None:
        if self._base is not None:  # installed (each torch.compile call asks again)
            return
        try:
            from torch._inductor import cudagraph_trees as ct
            from torch._inductor import cudagraph_utils as cu
        except Exception:  # noqa: BLE001 - no inductor here: no trees to watch
            return
        self._base = _counters()
        mgr = getattr(ct, "CUDAGraphTreeManager", None)
        node = getattr(ct, "CUDAGraphNode", None)
        self._wrap(mgr, "record_function", self._record)
        self._wrap(mgr, "run_eager", self._eager)
        self._wrap(node, "check_invariants", self._check)
        real = getattr(cu, SKIP_FN, None)
        if real is None:
            self.missing.append(SKIP_FN)
        else:
            def skip(msg: str, *a: Any, **k: Any) -> Any:
                self._add({"event": "skip", "reason": str(msg)})
                return real(msg, *a, **k)

            # bound by name where inductor imported it: replace it in each such module
            for mod in [m for n, m in list(sys.modules.items())
                        if n.startswith("torch._inductor") and m is not None]:
                if getattr(mod, SKIP_FN, None) is real:
                    setattr(mod, SKIP_FN, skip)
                    self._undo.append(_restore(mod, SKIP_FN, real))

    def _wrap(self, cls: Any, name: str, make: Callable[[Any], Callable[..., Any]]) -> None:
        real = getattr(cls, name, None) if cls is not None else None
        if real is None:
            self.missing.append(name)
            return
        setattr(cls, name, make(real))
        self._undo.append(_restore(cls, name, real))

    def _record(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def record_function(mgr: Any, new_inputs: Any, function_id: Any) -> Any:
            name, mode = _name(mgr, function_id)
            shapes = _shapes(new_inputs)
            try:
                key = id(mgr.ids_to_funcs[function_id].model)
            except Exception:  # noqa: BLE001 - another torch: no shape-based re-records
                key = None
            why = getattr(self._local, "mismatch", None)
            self._local.mismatch = None
            ev: dict[str, Any] = {"event": "record", "function": name, "mode": mode,
                                  "shapes": shapes}
            if why is not None:
                ev.update(event="re-record", reason=why)
            elif key in self._recorded and self._recorded[key] != shapes:
                ev.update(event="re-record",
                          reason=f"input shapes {self._recorded[key]} -> {shapes}")
            if key is not None:
                self._recorded[key] = shapes
            self._add(ev)
            return real(mgr, new_inputs, function_id)

        return record_function

    def _eager(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def run_eager(mgr: Any, new_inputs: Any, function_id: Any) -> Any:
            name, _ = _name(mgr, function_id)
            self._local.mismatch = None
            warm = function_id in getattr(mgr, "warmed_up_functions", ())
            into = self.eager_runs if warm else self.warmups
            into[name] = into.get(name, 0) + 1
            return real(mgr, new_inputs, function_id)

        return run_eager

    def _check(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def check_invariants(node: Any, inputs: Any) -> Any:
            out = real(node, inputs)
            status, logger = out
            if getattr(status, "name", str(status)) == "SUCCESS":
                self._local.mismatch = None
            else:
                try:
                    msg = str(logger())
                except Exception:  # noqa: BLE001 - torch's message maker; its status stays
                    msg = ""
                self._local.mismatch = f"{getattr(status, 'name', status)}: {msg}".rstrip(": ")
            return out

        return check_invariants

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def doc(self) -> Optional[dict[str, Any]]:
        base = self._base
        counters = {} if base is None else {k: v - base.get(k, 0) for k, v in
                                            _counters().items() if v != base.get(k, 0)}
        if not (self.events or self.warmups or self.eager_runs or counters):
            return None
        return {"trees_version": TREES_VERSION, "events": self.events, "dropped": self.dropped,
                "warmups": dict(sorted(self.warmups.items())),
                "eager_runs": dict(sorted(self.eager_runs.items())),
                "counters": dict(sorted(counters.items())), "missing": self.missing}


def _name(mgr: Any, function_id: Any) -> tuple[str, str]:
    try:
        name = str(mgr.get_func_name(function_id))
    except Exception:  # noqa: BLE001
        name = "unknown"
    mode = getattr(getattr(mgr, "id_to_mode", {}).get(function_id), "name", "")
    return name, str(mode)


def _restore(owner: Any, name: str, real: Any) -> Callable[[], None]:
    return lambda: setattr(owner, name, real)
