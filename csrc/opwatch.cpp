// graphscope._opwatch: the aten op, input shapes and user source line of every captured node,
// from a native RecordFunction observer instead of a Python TorchDispatchMode.
//
// Built only where torch's headers are present at build time (`--no-build-isolation` builds:
// `make install`, the GPU machine); linked against that torch's libc10/libtorch_cpu. The
// Python side (graphscope/native.py) uses it only when torch.__version__ matches TORCH_VERSION,
// and falls back to the dispatch mode otherwise.
//
// What it records matches the dispatch mode point by point (tests/unit/test_opwatch.py compares
// the two op by op): the op is the outermost op on the thread that is not
// CompositeImplicitAutograd (those decompose above the Python dispatch key, where the mode sits);
// the shapes are the positional arguments the mode's __torch_dispatch__ receives (trailing
// defaults dropped, kwarg-only ones never), formatted like ops._describe; the source line is the
// innermost Python frame outside the skipped directories, on the capturing thread only.
//
// The op id handed to graphscope._native's per-thread state is OP_BASE + the index in this
// module's table (ops.OpTable resolves it); the table only grows.
//
// Cost (every eager op pays it): per thread, a recorded op's start finds its OpInfo and its
// (op, source line, input signature) -> op id without a lock; only a first sight formats the
// shapes and takes the table's mutex. An op whose first calls on a thread averaged 1.5 or more
// nested ops turns RecordFunction off for the thread (at::enableRecordFunction(false), what
// DisableRecordFunctionGuard sets) from its start to its end callback, so that its nested ops
// take the dispatcher's fast path instead of boxing their inputs for a callback that ignores
// them. Its own RecordFunction keeps the callbacks it was built with, so its end still runs.
// While the flag is off, other RecordFunction observers (torch.profiler, other global
// callbacks) miss that op's nested ops on that thread, as does work that copies the thread's
// state there (at::launch inside a kernel); a backward call made inside an op's kernel would
// lose its BACKWARD_FUNCTION records (the engine copies the flag when the call starts).
//
// Backward attribution (what annotate/backward.py does with one Python pre-hook per autograd
// node) is done here from the engine's own RecordFunctions: a BACKWARD_FUNCTION record carries
// the node's sequence number, whose owner scope the forward noted (own_note: the autograd
// sequence counter at every scope push and pop on the capturing thread), so the
// thread's backward slot is set to that scope's backward scope as the node starts. Gradient
// accumulation is the add the engine runs after a node's apply when the input slot it feeds is
// fed by several nodes (InputBuffer::add): from such a producer's end until the next node
// starts, the slot is the node's scope with grad_accumulation, encoded as -(scope + 2) and
// resolved by annotate/session.py. The producers come from one walk of the graph (next_edges)
// when a backward call's first node starts. Only BACKWARD_FUNCTION records are observed: the
// ops inside backward never build a RecordFunction for graphscope.

#include "opwatch.h"
#include "pyfloat.h"

namespace nb = nanobind;

namespace gs::opwatch {

State st;

namespace {

// An op's calls on one thread: whether its start turns RecordFunction off (see the top).
// Turning it off and on rebuilds the thread's callback cache twice (~0.35 us on CPU), about
// what 1.5 nested ops cost with it on; the op's first kProbeCalls calls count them.
constexpr uint32_t kProbeCalls = 8;
struct OpStat {
  const OpInfo* info = nullptr;
  uint32_t calls = 0;   // probed calls, up to kProbeCalls
  uint32_t nested = 0;  // nested ops seen in them
  bool rf_off() const { return calls >= kProbeCalls && 2 * nested >= 3 * calls; }
};

// Per thread: the depth of recorded (outermost non-composite) ops open here.
struct ThreadOps {
  int depth = 0;          // >0: inside a recorded op; nested ops are the op's own business
  int64_t prev = -1;      // the op id to restore when the outermost recorded op ends
  int64_t call = -1;      // its row in st.calls (record_memory), for the outputs at its end
  uint32_t nested = 0;    // nested ops started in it (while RecordFunction is on)
  OpStat* probe = nullptr;  // its OpStat while probing (stable: see op_stat)
  bool rf_off = false;    // its start turned RecordFunction off for the thread...
  bool rf_prev = true;    // ...from this
};
thread_local ThreadOps tops;

// Per thread: what a recorded op's start reuses (no lock, no allocation once warm).
struct ThreadCache {
  uint64_t gen = 0;                               // st.generation the infos are from
  std::unordered_map<const char*, OpStat> infos;  // st.ops, by RecordFunction::name()
  // (name id, source id, signature) -> op id: never stale (ids, name and source ids are
  // permanent and a signature determines its shapes string), so hits take no lock
  std::unordered_map<std::string, int64_t> ids;
  std::string sig, shapes, key;                   // scratch
};
thread_local ThreadCache tcache;

const OpInfo* find_op_info(const at::RecordFunction& fn) {
  const char* key = fn.name();
  {
    std::lock_guard<std::mutex> g(st.mu);
    auto it = st.ops.find(key);
    if (it != st.ops.end()) return &it->second;
  }
  auto opname = fn.operator_name();
  if (!opname) return nullptr;  // a named range, not a dispatcher op
  OpInfo info;
  auto handle = c10::Dispatcher::singleton().findOp(*opname);
  if (!handle) return nullptr;
  info.record = !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
  info.schema = &handle->schema();
  info.name = opname->name;  // as OpOverload.name(): "aten::add_.Tensor", "aten::t"
  if (!opname->overload_name.empty()) info.name += "." + opname->overload_name;
  const auto& args = info.schema->arguments();
  info.kwarg_only_start = args.size();
  while (info.kwarg_only_start > 0 && args[info.kwarg_only_start - 1].kwarg_only())
    --info.kwarg_only_start;
  info.skip_int.resize(args.size(), 0);
  info.is_write.resize(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* alias = args[i].alias_info();
    info.is_write[i] = alias != nullptr && alias->isWrite() ? 1 : 0;
    c10::TypePtr t = args[i].real_type();
    if (auto o = t->cast<c10::OptionalType>()) t = o->getElementType();
    auto k = t->kind();
    info.skip_int[i] = (k == c10::TypeKind::ScalarTypeType || k == c10::TypeKind::LayoutType ||
                        k == c10::TypeKind::MemoryFormatType ||
                        k == c10::TypeKind::QSchemeType) ? 1 : 0;
  }
  std::lock_guard<std::mutex> g(st.mu);
  info.name_id = st.name_ids.emplace(info.name, static_cast<uint32_t>(st.name_ids.size()))
                     .first->second;
  return &st.ops.emplace(key, std::move(info)).first->second;
}

// find_op_info through the thread's cache (st.ops is cleared, and the generation bumped, by
// enable(); named ranges, which have no OpInfo, are not cached: their name is the record's
// own). Only a start at depth 0 clears the cache, so the OpStat stays put while its op runs.
OpStat* op_stat(const at::RecordFunction& fn, ThreadCache& c) {
  const uint64_t g = st.generation.load(std::memory_order_relaxed);
  if (c.gen != g) {
    c.infos.clear();
    c.gen = g;
  }
  auto it = c.infos.find(fn.name());
  if (it != c.infos.end()) return &it->second;
  const OpInfo* info = find_op_info(fn);
  if (info == nullptr) return nullptr;
  return &c.infos.emplace(fn.name(), OpStat{info}).first->second;
}

bool starts_with(const char* s, const std::string& p) { return std::strncmp(s, p.data(), p.size()) == 0; }

// The user's source line: the innermost frame whose file is outside the skipped directories,
// as a source id (kNoSource: none).
uint32_t user_source() {
  PyGILState_STATE g = PyGILState_Ensure();
  uint32_t out = kNoSource;
  PyFrameObject* f = PyThreadState_GetFrame(PyThreadState_Get());  // new reference
  while (f != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    PyObject* key = reinterpret_cast<PyObject*>(code);
    auto it = st.code.find(key);
    if (it == st.code.end()) {
      const char* fn = PyUnicode_AsUTF8(code->co_filename);
      bool skip = fn == nullptr || fn[0] == '<';
      for (const auto& d : st.skip_dirs)
        if (!skip && fn && starts_with(fn, d)) skip = true;
      if (fn == nullptr) PyErr_Clear();
      Py_INCREF(key);  // the cache keeps its code objects alive until disable()
      it = st.code.emplace(key, State::CodeInfo{skip, {}}).first;
    }
    if (!it->second.skip) {
#if PY_VERSION_HEX >= 0x030B0000
      int lasti = PyFrame_GetLasti(f);
#else
      int lasti = PyFrame_GetLineNumber(f);  // no PyFrame_GetLasti before 3.11
#endif
      auto& lines = it->second.lines;
      auto lt = lines.find(lasti);
      if (lt == lines.end()) {
        int line = PyFrame_GetLineNumber(f);
        const char* fn = PyUnicode_AsUTF8(code->co_filename);
        const char* name = PyUnicode_AsUTF8(code->co_name);
        std::string s = std::string(fn ? fn : "?") + ":" + std::to_string(line) + " (" +
                        (name ? name : "?") + ")";
        if (!fn || !name) PyErr_Clear();
        auto sid = st.source_ids.emplace(s, static_cast<uint32_t>(st.sources.size()));
        if (sid.second) st.sources.push_back(std::move(s));
        lt = lines.emplace(lasti, sid.first->second).first;
      }
      out = lt->second;
      Py_DECREF(code);
      Py_DECREF(f);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference
    Py_DECREF(code);
    Py_DECREF(f);
    f = back;
  }
  PyGILState_Release(g);
  return out;
}

// The op id of (op, shapes, source), adding a table row on first sight. `key` is scratch.
int64_t intern(const OpInfo& info, const std::string& shapes, uint32_t src, std::string& key) {
  key.clear();
  key.append(reinterpret_cast<const char*>(&info.name_id), sizeof(info.name_id));
  key.append(reinterpret_cast<const char*>(&src), sizeof(src));
  key += shapes;
  std::lock_guard<std::mutex> g(st.mu);
  auto it = st.index.find(key);
  if (it != st.index.end()) return it->second;
  int64_t id = kOpBase + static_cast<int64_t>(st.table.size());
  // st.sources grows on the capturing thread only, the one that has source ids
  st.table.emplace_back(info.name, shapes,
                        src == kNoSource ? std::string("\x1e") : st.sources[src]);
  st.index.emplace(key, id);
  return id;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!st.enabled.load(std::memory_order_relaxed)) return nullptr;
  if (tops.depth > 0) {
    ++tops.depth;
    ++tops.nested;
    return nullptr;
  }
  try {
    ThreadCache& c = tcache;
    OpStat* stat = op_stat(fn, c);
    if (stat == nullptr || !stat->info->record) return nullptr;
    const OpInfo* info = stat->info;
    const auto inputs = fn.inputs();
    const size_t end = described_end(*info, inputs);
    uint32_t src = kNoSource;
    if (st.record_source && pthread_equal(pthread_self(), st.main_thread)) src = user_source();
    c.sig.clear();
    put(c.sig, info->name_id);
    put(c.sig, src);
    for (size_t i = 0; i < end; ++i) sign_value(c.sig, inputs[i], info->skip_int[i]);
    int64_t id;
    auto hit = c.ids.find(c.sig);
    if (hit != c.ids.end()) {
      id = hit->second;
    } else {
      c.shapes.clear();
      describe_inputs(c.shapes, *info, inputs, end);
      id = intern(*info, c.shapes, src, c.key);
      c.ids.emplace(c.sig, id);
    }
    tops.call = st.record_memory ? new_call(*info, id, fn.inputs()) : -1;
    tops.prev = st.set_op(tops.call >= 0 ? kCallBase + tops.call : id);
    if (st.logging) {
      std::lock_guard<std::mutex> g(st.mu);
      st.log.push_back(id);
    }
    // nothing below throws: on_end undoes all of it
    tops.depth = 1;
    tops.nested = 0;
    tops.probe = stat->calls < kProbeCalls ? stat : nullptr;
    if (tops.probe != nullptr) ++stat->calls;
    tops.rf_off = stat->rf_off();
    if (tops.rf_off) {
      tops.rf_prev = at::isRecordFunctionEnabled();
      at::enableRecordFunction(false);
    }
  } catch (...) {
    st.errors++;
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (tops.depth == 0) return;
  if (--tops.depth == 0) {
    st.set_op(tops.prev);
    if (tops.probe != nullptr) tops.probe->nested += tops.nested;
    try {
      if (tops.rf_off) at::enableRecordFunction(tops.rf_prev);
      if (tops.call >= 0) {  // the outputs: written by the op's kernels
        std::vector<uint64_t> w;
        for (const c10::IValue& v : fn.outputs()) add_ranges(w, v);
        if (!w.empty()) {
          std::lock_guard<std::mutex> g(st.mu);
          auto& dst = st.calls[static_cast<size_t>(tops.call)].writes;
          dst.insert(dst.end(), w.begin(), w.end());
        }
      }
    } catch (...) {
      st.errors++;
    }
    tops.call = -1;
  }
}

void enable(uintptr_t set_op_address, uint64_t main_thread, std::vector<std::string> skip_dirs,
            bool record_ops, bool record_source, bool backward, bool record_memory) {
  if (st.enabled || st.bw_enabled)
    throw std::runtime_error("state:0:the op observer is already enabled");
  if (backward && st.set_slot == nullptr)
    throw std::runtime_error("state:0:the op observer has no scope functions (set_scope_fns)");
  st.set_op = reinterpret_cast<SetOpFn>(set_op_address);
  st.main_thread = static_cast<pthread_t>(main_thread);
  st.skip_dirs = std::move(skip_dirs);
  st.record_source = record_source;
  {
    std::lock_guard<std::mutex> g(st.mu);
    st.ops.clear();  // op handles are looked up again per session (libraries may come and go)
    st.record_memory = record_memory && record_ops;
  }
  st.errors = 0;
  st.generation.fetch_add(1);
  if (record_ops) {
    st.handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end)
            .needsInputs(true)
            .needsOutputs(st.record_memory)
            .scopes({at::RecordScope::FUNCTION}));
    st.enabled = true;
  }
  if (backward) {  // the callback itself is added per backward call (backward_begin)
    st.main_rf_thread = at::RecordFunction::currentThreadId();
    st.bw_suspended = false;
    st.leaf_python = false;
    st.bw_depth = 0;
    st.bw_enabled = true;
  }
}

void disable() {
  if (st.enabled) {
    st.enabled = false;
    at::removeCallback(st.handle);
    st.handle = 0;
  }
  if (st.bw_enabled) {
    st.bw_enabled = false;
    if (st.bw_handle != 0) at::removeCallback(st.bw_handle);
    st.bw_handle = 0;
    st.bw_depth = 0;
  }
  forget_graph();
  st.generation.fetch_add(1);
  for (auto& kv : st.code) Py_DECREF(kv.first);  // called with the GIL held
  st.code.clear();
}

void set_scope_fns(std::vector<uintptr_t> a) {
  if (a.size() != 4) throw std::runtime_error("state:0:set_scope_fns needs 4 addresses");
  st.push = reinterpret_cast<PushFn>(a[0]);
  st.pop = reinterpret_cast<PopFn>(a[1]);
  st.current = reinterpret_cast<CurrentFn>(a[2]);
  st.set_slot = reinterpret_cast<SetSlotFn>(a[3]);
}

void own_push(int64_t scope) {
  st.push(scope);
  own_note(scope);
}

void own_pop() {
  st.pop();
  own_note(st.current());
}

void set_backward_scopes(size_t start, std::vector<int64_t> bsids) {
  std::lock_guard<std::mutex> g(st.own_mu);
  if (st.backward_of.size() < start + bsids.size()) st.backward_of.resize(start + bsids.size(), -1);
  std::copy(bsids.begin(), bsids.end(), st.backward_of.begin() + static_cast<std::ptrdiff_t>(start));
}

// Rows of the table from `start` (index, not id): (op, shapes, source or None).
nb::list table(size_t start) {
  std::lock_guard<std::mutex> g(st.mu);
  nb::list out;
  for (size_t i = start; i < st.table.size(); ++i) {
    const auto& [op, shapes, src] = st.table[i];
    nb::object s = src == "\x1e" ? nb::none() : nb::object(nb::str(src.c_str(), src.size()));
    out.append(nb::make_tuple(nb::str(op.c_str(), op.size()),
                              nb::str(shapes.c_str(), shapes.size()), s));
  }
  return out;
}

}  // namespace

}  // namespace gs::opwatch

using namespace gs::opwatch;

NB_MODULE(_opwatch, m) {
  m.doc() = "graphscope's native op observer (RecordFunction), built against one torch";
  m.attr("TORCH_VERSION") = GRAPHSCOPE_TORCH_VERSION;
  m.attr("OP_BASE") = kOpBase;
  m.attr("CALL_BASE") = kCallBase;
  m.def("enable", &enable, nb::arg("set_op_address"), nb::arg("main_thread"),
        nb::arg("skip_dirs"), nb::arg("record_ops") = true, nb::arg("record_source") = true,
        nb::arg("backward") = false, nb::arg("record_memory") = true);
  m.def("calls", [](size_t start) {
    // Rows from `start`: (op id, reads, writes) with ranges as flat [s0, e0, s1, e1, ...].
    std::lock_guard<std::mutex> g(st.mu);
    nb::list out;
    for (size_t i = start; i < st.calls.size(); ++i) {
      const auto& c = st.calls[i];
      out.append(nb::make_tuple(c.op, c.reads, c.writes));
    }
    return out;
  }, nb::arg("start") = 0);
  m.def("disable", &disable);
  m.def("enabled", []() -> bool { return st.enabled; });
  m.def("backward_enabled", []() -> bool { return st.bw_enabled; });
  m.def("backward_begin", &backward_begin);
  m.def("backward_end", &backward_end);
  m.def("backward_watching", []() -> bool { return st.bw_handle != 0; });
  m.def("set_scope_fns", &set_scope_fns, nb::arg("addresses"));
  m.def("own_push", &own_push, nb::arg("scope"));
  m.def("own_pop", &own_pop);
  m.def("own_note_address", []() -> uintptr_t { return reinterpret_cast<uintptr_t>(&own_note); },
        "Address of own_note(scope) (graphscope._native's mark_kernels calls it after its own "
        "push and pop).");
  m.def("own_event", []() { own_note(st.current()); });
  m.def("own_thread", [](uint64_t thread) {
    st.own_thread = static_cast<pthread_t>(thread);
    st.own_active = thread != 0;
  }, nb::arg("thread"), "Note ownership events on this thread (0: stop).");
  m.def("owner", &owner_of, nb::arg("seq"));
  m.def("set_backward_scopes", &set_backward_scopes, nb::arg("start"), nb::arg("bsids"));
  m.def("backward_scopes_size", []() -> size_t {
    std::lock_guard<std::mutex> g(st.own_mu);
    return st.backward_of.size();
  });
  m.def("suspend_backward", [](bool on) { st.bw_suspended = on; }, nb::arg("on"));
  m.def("set_leaf_python", [](bool on) { st.leaf_python = on; }, nb::arg("on"));
  m.def("table", &table, nb::arg("start") = 0);
  m.def("table_size", []() -> size_t {
    std::lock_guard<std::mutex> g(st.mu);
    return st.table.size();
  });
  m.def("errors", []() -> uint64_t { return st.errors; });
  m.def("set_logging", [](bool on) {
    std::lock_guard<std::mutex> g(st.mu);
    st.logging = on;
    st.log.clear();
  });
  m.def("log", []() {
    std::lock_guard<std::mutex> g(st.mu);
    return st.log;
  });
  m.def("float_repr", &gs::py_float_repr, nb::arg("value"));
}
