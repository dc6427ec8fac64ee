// graphscope._native: the bindings. One file per concern beside this one:
//   dl.*        libcuda/libcupti opened at run time     scopes.*   per-thread scope/op state
//   recorder.*  CUPTI resource callbacks (capture)       inspect.*  template graph walk, ids
//   tracer.*    CUPTI activity records (replays)         join.*     records -> nodes (no CUDA)
//   tracejson.* annotate-trace (no CUDA): jsonscan.h the JSON scanner, tracejson.cpp its events,
//               tracerewrite.cpp their rewrite, modulespans.cpp the module-span track
//   markscope.* mark_kernels as a C type, with its scope cache
//   modulecall.* nn.Module.__call__ as a C type: module scopes in graphscope run's captures
//   store.*     the exec-id annotation map's per-node loop
//   pmsampling.* CUPTI PM sampling: hardware counters at a fixed GPU-time interval
// No C++ exception crosses the CUPTI/C boundary; the ones thrown here become RuntimeError.
// The module's functions are bound by concern, one function each (NB_MODULE calls them).

#include <cstdlib>

#include <cuda.h>
#include <cupti.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "dl.h"
#include "inspect.h"
#include "join.h"
#include "markscope.h"
#include "modulecall.h"
#include "nodecount.h"
#include "pmsampling.h"
#include "recorder.h"
#include "scopes.h"
#include "store.h"
#include "tracejson.h"
#include "tracer.h"

namespace gs {
namespace {

nb::dict probe(bool try_subscribe) {
  nb::dict d;
  d["cupti_path"] = cupti.path;
  d["cupti_loaded"] = cupti.handle != nullptr;
  d["driver_loaded"] = drv.handle != nullptr;
  d["header_cupti_api_version"] = static_cast<uint32_t>(CUPTI_API_VERSION);
  d["header_cuda_version"] = static_cast<int>(CUDA_VERSION);
  if (drv.handle) {
    int v = 0;
    drv.Init(0);
    drv.DriverGetVersion(&v);
    d["driver_cuda_version"] = v;
    d["tools_id_api"] = drv.GraphNodeGetToolsId != nullptr;
  }
  if (cupti.handle) {
    uint32_t v = 0;
    cupti.GetVersion(&v);
    d["cupti_api_version"] = v;
    d["cupti_subscribe_v2"] = cupti.Subscribe_v2 != nullptr;
    d["recorder_active"] = static_cast<bool>(rec.active);
    d["tracer_active"] = static_cast<bool>(tracer.active);
    if (try_subscribe && !rec.active) {
      try {
        recorder_start(false);
        recorder_stop();
        d["subscribe"] = "ok";
      } catch (const std::exception& e) {
        d["subscribe"] = std::string(e.what());
      }
    }
  }
  return d;
}

// The per-thread op id setter as a plain function: graphscope._opwatch (a separate module,
// built against torch) calls it from its RecordFunction callbacks.
int64_t set_current_op_c(int64_t op) {
  int64_t prev = tls.op;
  tls.op = op;
  count_note(tls, true);
  return prev;
}
void push_scope_c(int64_t s) {
  tls.scopes.push_back(s);
  count_note(tls);
}
int64_t pop_scope_c() {
  if (tls.scopes.empty()) return -1;
  int64_t s = tls.scopes.back();
  tls.scopes.pop_back();
  count_note(tls);
  return s;
}
int64_t current_scope_c() { return tls.current(); }
void set_slot_c(int64_t s) {
  tls.slot = s;
  tls.slot_gen = g_slot_generation.load(std::memory_order_relaxed);
  count_note(tls);
}

void bind_loading(nb::module_& m) {
  m.def("load_driver", &load_driver, "Open libcuda.so.1; returns '' or why not.");
  m.def("load_cupti", &load_cupti, nb::arg("path"), "Open libcupti at path; '' or why not.");
  m.def("probe", &probe, nb::arg("try_subscribe") = false);
  m.def("cupti_detach", &cupti_detach,
        "Detach CUPTI (cuptiFinalize at a driver call's exit): '' or why it did not.");
}

void bind_scopes(nb::module_& m) {
  m.def("push_scope", &push_scope_c, nb::arg("scope"));
  m.def("pop_scope", &pop_scope_c);
  m.def("current_scope", &current_scope_c);
  m.def("scope_depth", []() -> size_t { return tls.scopes.size(); });
  m.def("set_slot", &set_slot_c, nb::arg("scope"),
        "Set this thread's backward slot (used when no scope is pushed).");
  m.def("retire_slots", []() {
    g_slot_generation.fetch_add(1);
    count_note(tls);
  }, "Retire every thread's backward slot.");
  m.def("set_current_op", &set_current_op_c, nb::arg("op"));
  m.def("current_op", []() -> int64_t { return tls.op; });
  m.def("set_op_address", []() -> uintptr_t {
    return reinterpret_cast<uintptr_t>(&set_current_op_c);
  }, "Address of int64_t set_current_op(int64_t) for graphscope._opwatch.");
  m.def("scope_fn_addresses", []() -> std::vector<uintptr_t> {
    return {reinterpret_cast<uintptr_t>(&push_scope_c), reinterpret_cast<uintptr_t>(&pop_scope_c),
            reinterpret_cast<uintptr_t>(&current_scope_c),
            reinterpret_cast<uintptr_t>(&set_slot_c)};
  }, "Addresses of push_scope, pop_scope, current_scope, set_slot for graphscope._opwatch.");
}

void bind_session(nb::module_& m) {
  m.attr("mark_kernels") = mark_kernels_type(
      "mark_kernels(annotation, *, backward=True)\n--\n\n"
      "Tag the GPU work captured inside the ``with`` body (MK1-MK15).\n\n"
      "Args:\n"
      "    annotation: a str ``s`` (stored as ``{\"name\": s}``) or a dict of picklable values.\n"
      "    backward: also tag the backward kernels of autograd nodes created in the scope,\n"
      "        adding ``\"autograd_phase\": \"backward\"``.\n\n"
      "Outside an annotated capture it does nothing (MK3), but bad annotations still raise.");
  m.def("mark_kernels_setup", &mark_kernels_setup, nb::arg("check"),
        "Python's check of an annotation entered outside a capture window.");
  m.def("session_open", &session_open, nb::arg("session"),
        "Hand over the running capture session (raises if one is held).");
  m.def("session_close", &session_close, "Take the capture session back.");
  m.def("active_session", &active_session, "The capture session held, or None.");
  m.def("mark_kernels_use_native", &mark_kernels_use_native, nb::arg("own_note"),
        "graphscope._opwatch's own_note address (0: the session's push/pop).");
  m.def("mark_kernels_cache_size", &mark_kernels_cache_size);
  m.attr("module_call") = module_call_type();
  m.def("module_call_stats", &module_call_stats, nb::arg("reset") = false,
        "(module calls scoped, graphscope's own seconds in them) since the last reset.");
  bind_mark_log(m);
  m.def("module_scope_cache", &module_scope_cache);
  m.def("module_scope_cache_size", &module_scope_cache_size, nb::arg("cache"));
  m.def("module_scope_cache_prune", &module_scope_cache_prune, nb::arg("cache"),
        "Drop the entries whose module or root is gone; returns how many.");
  m.def("annotate_live", &annotate_live, nb::arg("live"), nb::arg("nodes"), nb::arg("index"),
        nb::arg("anns"), "live[nodes[i]] = anns[index[i]]; nodes u64, index i32.");
}

void bind_counting(nb::module_& m) {
  m.def("count_start", &count_start, nb::arg("fake") = false, nb::arg("how") = kCountWalk,
        "Note the graph's node count at this thread's scope changes (nodecount.h).");
  m.def("count_attach", &count_attach, nb::arg("stream"),
        "The capture began on stream (this thread's): count its graph from now.");
  m.def("count_detach", []() { count_detach(); },
        "The capture is ending: no more notes (its graph may be destroyed if it fails).");
  m.def("count_fake_nodes", &count_fake_nodes, nb::arg("n"), nb::arg("deps") = -1,
        "count_start(fake=True)'s node count, and the stream dependencies' count when it "
        "differs (tests without a GPU).");
  m.def("count_stop", &count_stop,
        "Stop counting: {counts u8, scopes i8, ops i8, attached, foreign, errors, how, "
        "mismatches}.");
  m.def("counting", []() -> bool { return g_counting.load(); });
}

void bind_recorder(nb::module_& m) {
  m.def("recorder_start", &recorder_start, nb::arg("clear") = true, nb::arg("held") = false,
        "Subscribe to the resource callbacks (held: kept across capture windows).");
  m.def("recorder_stop", &recorder_stop);
  m.def("recorder_gate", &recorder_gate, nb::arg("open"), nb::arg("callbacks") = -1,
        "Let the subscribed recorder's callbacks record (or not); shut, CUPTI's callbacks are "
        "disabled too (callbacks -1: as the gate, 0/1: off/on whatever the gate).");
  m.def("recorder_clear", &recorder_clear, "Drop the records taken so far.");
  m.def("recorder_active", []() -> bool { return rec.active; });
  m.def("recorder_held", []() -> bool { return rec.active && rec.held; },
        "Whether the subscription is one kept across capture windows.");
  m.def("recorder_records", &recorder_records);
}

void bind_inspect(nb::module_& m) {
  m.def("inspect_graph", &inspect_graph, nb::arg("graph"), nb::arg("demangle") = true);
  m.def("positional_ids", &positional_ids,
        "Whether graph node ids are read as positions: -1 not checked yet, 0 no, 1 yes.");
  m.def("set_positional_ids", &set_positional_ids, nb::arg("state"));
  m.def("capture_graph", &capture_graph, nb::arg("stream"),
        "The graph being captured on stream (0: not capturing).");
  m.def("read_capture", &read_capture, nb::arg("stream"), nb::arg("detach_count"),
        "The graph being captured on stream, its nodes listed once: node counting detached "
        "(detach_count) and the graph inspected (inspect_graph(demangle=False)); None when "
        "the stream is not capturing.");
  m.def("exec_id", &exec_id, nb::arg("graph_exec"));
  m.def("graph_id", &graph_id, nb::arg("graph"));
  m.def("debug_dot_print", &debug_dot_print, nb::arg("graph"), nb::arg("path"));
  m.def("warm_graph_ids", &warm_graph_ids,
        "Read CUPTI's ids of an empty graph made and dropped: '' or why it could not.");
  m.def("demangle", [](const std::string& s) { return demangle(s.c_str()); }, nb::arg("name"));
}

void bind_tracer(nb::module_& m) {
  m.def("tracer_start", &tracer_start, nb::arg("decode") = true, nb::arg("buffer_kb") = 0);
  m.def("tracer_stop", &tracer_stop);
  m.def("tracer_active", []() -> bool { return tracer.active; });
  m.def("join_records", &join_records, nb::arg("graph_node_id"), nb::arg("correlation"),
        nb::arg("start"), nb::arg("end"), nb::arg("known"), nb::arg("keep_events"));
  m.def("pm_supported", &pm_supported, "'' when PM sampling can be used, else why not.");
  m.def("pm_setup", &pm_setup, nb::arg("device"), nb::arg("metrics"), nb::arg("interval_ns"),
        nb::arg("hw_buffer_bytes"), nb::arg("max_samples"));
  m.def("pm_start", &pm_start);
  m.def("pm_stop", &pm_stop);
  m.def("pm_decode", &pm_decode);
  m.def("pm_teardown", &pm_teardown);
  m.def("pm_active", &pm_active);
}

void bind_trace_annotate(nb::module_& m) {
  m.def("scan_events", &scan_events, nb::arg("data"), nb::arg("pos"),
        nb::arg("need_comma") = false, nb::arg("end") = 0);
  m.def("rewrite_events", &rewrite_events);
  nb::class_<ModuleSpans>(m, "ModuleSpans")
      .def(nb::init<nb::bytes, nb::bytes, nb::bytes, nb::bytes, nb::bytes, size_t,
                    std::vector<std::string>>(),
           nb::arg("corr"), nb::arg("leaf"), nb::arg("t0"), nb::arg("t1"), nb::arg("table"),
           nb::arg("depth"), nb::arg("heads"))
      .def("__len__", &ModuleSpans::size)
      .def("next_piece", &ModuleSpans::next_piece);
  m.def("module_spans", &module_spans, nb::arg("corr"), nb::arg("leaf"), nb::arg("t0"),
        nb::arg("t1"), nb::arg("table"), nb::arg("depth"), nb::arg("heads"));
}

}  // namespace
}  // namespace gs

NB_MODULE(_native, m) {
  m.doc() = "graphscope native core: CUPTI recorder, graph inspector, activity tracer";
  // graphscope patches torch's classes (nn.Module.__call__ holds the meter's MarkLog while a
  // batch of captures is open); a program that exits with the patch in place (os._exit aside,
  // a crash in its own exit path) leaves those alive past interpreter teardown, which nanobind
  // would report as leaks on the program's stderr. GRAPHSCOPE_LEAK_WARNINGS=1 reports them.
  nb::set_leak_warnings(std::getenv("GRAPHSCOPE_LEAK_WARNINGS") != nullptr);
  gs::bind_loading(m);
  gs::bind_scopes(m);
  gs::bind_session(m);
  gs::bind_counting(m);
  gs::bind_recorder(m);
  gs::bind_inspect(m);
  gs::bind_tracer(m);
  gs::bind_trace_annotate(m);
}
