"""The one door to the compiled extension ``graphscope.native._native``, split by concern:

- :mod:`.loader`: importing the extension, opening libcuda/libcupti, its errors as ours;
- :mod:`.recorder`: CUPTI's resource callbacks during a capture, the per-thread scope stack
  and the capture session the extension serves;
- :mod:`.inspect`: a graph's nodes and edges, graph and exec ids;
- :mod:`.tracer`: activity records of replays;
- :mod:`.observers`: the optional op observer and allocator tracker modules;
- :mod:`.profilers`: staying off CUPTI while torch.profiler holds it;
- :mod:`.nodecount` and :mod:`.pmsampling`: scopes without CUPTI, hardware counters.

Nothing outside this package imports a compiled module; this ``__init__`` re-exports what the
rest of graphscope calls (``from graphscope import native; native.recording()``).
"""

from __future__ import annotations

from .inspect import (
    ANNOTATED_TYPES,
    BODY_TYPES,
    GraphInspection,
    as_inspection,
    capture_graph,
    debug_dot_print,
    demangle,
    demangled,
    exec_id,
    graph_id,
    inspect_graph,
    positional_ids,
    read_capture,
    read_graph,
    warm_graph_ids,
)
from .loader import (
    NODE_IDS_ENV,
    PRIVILEGES_HINT,
    SUBSCRIBER_HINT,
    call,
    candidate_cupti_paths,
    column,
    ensure_loaded,
    extension,
    import_error,
    loaded_cupti_paths,
    maybe_extension,
    translate,
)
from .observers import (
    ALLOC_TRACKER_ENV,
    OP_OBSERVER_ENV,
    alloc_tracker,
    alloc_tracker_why,
    op_observer,
    op_observer_why,
)
from .profilers import BEFORE_PROFILER, profiler_active, watch_profiler
from .recorder import (
    CreatedNodes,
    HeldRecorder,
    active_session,
    close_session,
    current_scope,
    open_session,
    pop_scope,
    push_scope,
    recorder_active,
    recorder_held,
    recording,
    release_held,
    retire_slots,
    set_current_op,
)
from .tracer import ActivityRecords, cupti_detach, tracer_active, tracing

__all__ = [
    "ALLOC_TRACKER_ENV",
    "ANNOTATED_TYPES",
    "BEFORE_PROFILER",
    "BODY_TYPES",
    "NODE_IDS_ENV",
    "OP_OBSERVER_ENV",
    "PRIVILEGES_HINT",
    "SUBSCRIBER_HINT",
    "ActivityRecords",
    "CreatedNodes",
    "GraphInspection",
    "HeldRecorder",
    "active_session",
    "alloc_tracker",
    "alloc_tracker_why",
    "as_inspection",
    "call",
    "candidate_cupti_paths",
    "capture_graph",
    "close_session",
    "column",
    "cupti_detach",
    "current_scope",
    "debug_dot_print",
    "demangle",
    "demangled",
    "ensure_loaded",
    "exec_id",
    "extension",
    "graph_id",
    "import_error",
    "inspect_graph",
    "loaded_cupti_paths",
    "maybe_extension",
    "op_observer",
    "op_observer_why",
    "open_session",
    "pop_scope",
    "positional_ids",
    "profiler_active",
    "push_scope",
    "read_capture",
    "read_graph",
    "recorder_active",
    "recorder_held",
    "recording",
    "release_held",
    "retire_slots",
    "set_current_op",
    "tracer_active",
    "tracing",
    "translate",
    "warm_graph_ids",
    "watch_profiler",
]
