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

#include <Python.h>
#include <frameobject.h>
#include <pthread.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pyfloat.h"

namespace nb = nanobind;

namespace {

constexpr int64_t kOpBase = int64_t(1) << 40;
// With memory recording on, the thread's op id is a *call* id: one per recorded op call, row
// `id - kCallBase` of st.calls, which names the interned op and the device memory it touched.
constexpr int64_t kCallBase = int64_t(2) << 40;
using SetOpFn = int64_t (*)(int64_t);

// torch.dtype names as Python prints them (str(dtype) without "torch."), appended to `out`.
void append_dtype(std::string& out, c10::ScalarType t) {
  using S = c10::ScalarType;
  switch (t) {  // the names that are not c10's lowercased
    case S::Byte: out += "uint8"; return;
    case S::Char: out += "int8"; return;
    case S::Short: out += "int16"; return;
    case S::Int: out += "int32"; return;
    case S::Long: out += "int64"; return;
    case S::Half: out += "float16"; return;
    case S::Float: out += "float32"; return;
    case S::Double: out += "float64"; return;
    case S::ComplexHalf: out += "complex32"; return;
    case S::ComplexFloat: out += "complex64"; return;
    case S::ComplexDouble: out += "complex128"; return;
    default:  // "Bool" -> "bool", "BFloat16" -> "bfloat16", "Float8_e4m3fn" -> "float8_e4m3fn"
      for (const char* c = c10::toString(t); *c; ++c)
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  }
}

void append_int(std::string& out, int64_t v) {
  char b[24];
  out.append(b, static_cast<size_t>(std::to_chars(b, b + sizeof(b), v).ptr - b));
}

void append_float(std::string& out, double v) {
  char b[40];
  out.append(b, gs::py_float_repr_to(v, b));
}

using PushFn = void (*)(int64_t);
using PopFn = int64_t (*)();
using CurrentFn = int64_t (*)();
using SetSlotFn = void (*)(int64_t);

struct OpInfo {
  bool record = false;               // not CompositeImplicitAutograd
  const c10::FunctionSchema* schema = nullptr;
  std::vector<uint8_t> skip_int;     // per argument: an Int that Python sees as dtype/layout/...
  size_t kwarg_only_start = 0;
  std::string name;                  // "aten::addmm"
  uint32_t name_id = 0;              // name's index in st.name_ids (the intern key's first part)
  std::vector<uint8_t> is_write;     // per argument: annotated `(a!)` (in-place, out=)
};

// One recorded op call's device memory: [start, end) byte ranges of its tensor arguments,
// read or written (schema `(a!)` arguments and the outputs are writes).
struct CallRec {
  int64_t op = -1;
  std::vector<uint64_t> reads, writes;  // flattened pairs
};

struct State {
  std::mutex mu;                     // guards table/index/ops (callbacks run on many threads)
  std::vector<std::tuple<std::string, std::string, std::string>> table;  // op, shapes, source
  // (name id, source id, shapes) -> op id; name and source ids are permanent like the table
  std::unordered_map<std::string, int64_t> index;
  std::unordered_map<std::string, uint32_t> name_ids;  // op name -> id
  std::unordered_map<const char*, OpInfo> ops;  // by RecordFunction::name() pointer (schema's)
  // Source lines (capturing thread only, under the GIL): per code object whether its file is
  // in a skipped dir, and instruction offset -> source id (PyFrame_GetLineNumber decodes the
  // code's line table on every call: 13% of the observer's cost on a 16-layer model).
  struct CodeInfo {
    bool skip = false;
    std::unordered_map<int, uint32_t> lines;
  };
  std::unordered_map<PyObject*, CodeInfo> code;  // holds a reference to each code object
  std::vector<std::string> sources;              // source id -> "file:line (function)"
  std::unordered_map<std::string, uint32_t> source_ids;
  std::vector<std::string> skip_dirs;
  bool record_source = true;
  pthread_t main_thread{};
  SetOpFn set_op = nullptr;
  std::atomic<bool> enabled{false};
  at::CallbackHandle handle = 0;
  // backward attribution
  PushFn push = nullptr;
  PopFn pop = nullptr;
  CurrentFn current = nullptr;
  SetSlotFn set_slot = nullptr;
  std::atomic<bool> bw_enabled{false};
  std::atomic<bool> bw_suspended{false};  // this backward call is attributed by Python hooks
  std::atomic<bool> leaf_python{false};   // AccumulateGrad slots come from Python pre-hooks
  std::atomic<uint64_t> generation{1};    // per-thread backward state older than this is stale
  at::CallbackHandle bw_handle = 0;      // while a backward call runs (backward_begin)
  int bw_depth = 0;                       // nested backward calls (capturing thread)
  uint64_t main_rf_thread = 0;            // RecordFunction's id of the capturing thread
  std::mutex own_mu;                         // backward_of; the log's growth and its readers
  // The ownership step function (seq -> scope, sorted by seq). One writer, the capturing thread,
  // appends without a lock (a scope entered costs no lock pair): it publishes each new entry
  // through own_n (release) and takes own_mu only to grow the arrays; readers take own_mu, so
  // the arrays they search never move under them.
  std::unique_ptr<std::atomic<int64_t>[]> own_seq, own_scope;
  size_t own_cap = 0;
  std::atomic<size_t> own_n{0};
  std::atomic<bool> own_active{false};
  pthread_t own_thread{};
  std::vector<int64_t> backward_of;         // forward scope id -> backward scope id
  std::vector<CallRec> calls;        // op calls with their memory (record_memory), under mu
  bool record_memory = false;
  std::vector<int64_t> log;          // recorded op ids, in order, while logging (tests)
  bool logging = false;
  std::atomic<uint64_t> errors{0};
} st;

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

constexpr uint32_t kNoSource = UINT32_MAX;

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

void describe_tensor(std::string& out, const at::Tensor& t) {
  if (!t.defined()) {
    out += "None";
    return;
  }
  append_dtype(out, t.scalar_type());
  out += '[';
  bool first = true;
  for (auto d : t.sizes()) {
    if (!first) out += ',';
    first = false;
    append_int(out, d);
  }
  out += ']';
}

bool describe_value(std::string& out, const c10::IValue& v, bool skip_int);

// One item of a ", "-separated list: `out` as it was where _describe leaves the value out.
void describe_item(std::string& out, const c10::IValue& v, bool skip_int, bool& first) {
  const size_t mark = out.size();
  if (!first) out += ", ";
  if (describe_value(out, v, skip_int)) first = false; else out.resize(mark);
}

// One argument as ops._describe writes it, appended to `out`; false when _describe leaves it
// out (then nothing was appended).
bool describe_value(std::string& out, const c10::IValue& v, bool skip_int) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A Python number the arg parser wrapped: the dispatch mode gets the number back.
      switch (t.scalar_type()) {
        // A CPU scalar: read in place (t.item() would dispatch an op from inside a callback).
        case c10::ScalarType::Long:
          append_int(out, *static_cast<const int64_t*>(t.const_data_ptr()));
          return true;
        case c10::ScalarType::Double:
          append_float(out, *static_cast<const double*>(t.const_data_ptr()));
          return true;
        case c10::ScalarType::Bool:
          out += *static_cast<const bool*>(t.const_data_ptr()) ? "True" : "False";
          return true;
        default: return false;  // complex: _describe leaves it out
      }
    }
    describe_tensor(out, t);
  } else if (v.isNone()) {
    out += "None";
  } else if (v.isTensorList()) {
    auto l = v.toTensorList();
    if (l.size() == 0) return false;
    out += '[';
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += ", ";
      describe_tensor(out, l.get(i));
    }
    out += ']';
  } else if (v.isList()) {  // List[Optional[Tensor]] and the like
    auto l = v.toListRef();
    if (l.empty() || !l[0].isTensor() || !l[0].toTensor().defined()) return false;
    out += '[';
    bool first = true;
    for (const auto& e : l) describe_item(out, e, false, first);
    out += ']';
  } else if (v.isBool()) {
    out += v.toBool() ? "True" : "False";
  } else if (v.isInt()) {
    if (skip_int) return false;
    append_int(out, v.toInt());
  } else if (v.isDouble()) {
    append_float(out, v.toDouble());
  } else {
    return false;
  }
  return true;
}

bool is_default(const c10::Argument& a, const c10::IValue& v) {
  const auto& d = a.default_value();
  if (!d) return false;
  if (d->isNone()) return v.isNone();
  if (v.isTensor() || v.isTensorList() || v.isNone()) return false;
  try {
    return *d == v;
  } catch (...) {
    return false;
  }
}

// How many leading inputs _describe looks at: the positional ones, trailing defaults dropped.
size_t described_end(const OpInfo& info, c10::ArrayRef<const c10::IValue> inputs) {
  const auto& args = info.schema->arguments();
  size_t end = std::min(info.kwarg_only_start, std::min(inputs.size(), args.size()));
  while (end > 0 && is_default(args[end - 1], inputs[end - 1])) --end;
  return end;
}

// The first `end` inputs as ops._describe writes them, appended to `out`.
void describe_inputs(std::string& out, const OpInfo& info,
                     c10::ArrayRef<const c10::IValue> inputs, size_t end) {
  bool first = true;
  for (size_t i = 0; i < end; ++i) describe_item(out, inputs[i], info.skip_int[i], first);
}

// A signature of what describe_value reads (raw bytes, appended to `k`): equal signatures
// describe alike, so a signature seen before needs no formatting.
template <class T>
void put(std::string& k, const T& v) { k.append(reinterpret_cast<const char*>(&v), sizeof(v)); }

void sign_tensor(std::string& k, const at::Tensor& t) {
  if (!t.defined()) {
    k += 'N';
    return;
  }
  k += 'T';
  put(k, t.scalar_type());
  const auto sizes = t.sizes();
  put(k, static_cast<uint32_t>(sizes.size()));
  k.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
}

void sign_value(std::string& k, const c10::IValue& v, bool skip_int) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number()) {
      k += 'W';  // one CPU scalar
      put(k, t.scalar_type());
      k.append(static_cast<const char*>(t.const_data_ptr()), t.element_size());
      return;
    }
    sign_tensor(k, t);
  } else if (v.isNone()) {
    k += 'n';
  } else if (v.isTensorList()) {
    auto l = v.toTensorList();
    k += 'L';
    put(k, static_cast<uint32_t>(l.size()));
    for (size_t i = 0; i < l.size(); ++i) sign_tensor(k, l.get(i));
  } else if (v.isList()) {
    auto l = v.toListRef();
    k += 'G';
    put(k, static_cast<uint32_t>(l.size()));
    for (const auto& e : l) sign_value(k, e, false);
  } else if (v.isBool()) {
    k += v.toBool() ? 'B' : 'b';
  } else if (v.isInt()) {
    k += skip_int ? 's' : 'i';
    if (!skip_int) put(k, v.toInt());
  } else if (v.isDouble()) {
    k += 'd';
    put(k, v.toDouble());
  } else {
    k += 'o';  // describe_value leaves it out
  }
}

// The bytes a CUDA tensor's elements span: [lowest element, highest element + 1).
void add_range(std::vector<uint64_t>& out, const at::Tensor& t) {
  if (!t.defined() || !t.is_cuda() || t.is_sparse() || !t.has_storage() || t.numel() == 0)
    return;
  const auto base = reinterpret_cast<uint64_t>(t.const_data_ptr());
  if (base == 0) return;
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t step = (t.size(d) - 1) * t.stride(d);
    (step < 0 ? lo : hi) += step;
  }
  const auto item = static_cast<int64_t>(t.element_size());
  out.push_back(base + static_cast<uint64_t>(lo * item));
  out.push_back(base + static_cast<uint64_t>((hi + 1) * item));
}

void add_ranges(std::vector<uint64_t>& out, const c10::IValue& v) {
  if (v.isTensor()) {
    add_range(out, v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) add_range(out, t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) add_range(out, e.toTensor());
  }
}

int64_t new_call(const OpInfo& info, int64_t op, c10::ArrayRef<const c10::IValue> inputs) {
  CallRec c;
  c.op = op;
  const size_t n = std::min(inputs.size(), info.is_write.size());
  for (size_t i = 0; i < n; ++i) add_ranges(info.is_write[i] ? c.writes : c.reads, inputs[i]);
  std::lock_guard<std::mutex> g(st.mu);
  st.calls.push_back(std::move(c));
  return static_cast<int64_t>(st.calls.size()) - 1;
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

// ---- backward attribution ----

struct ThreadBw {
  uint64_t gen = 0;
  int depth = 0;                    // open BACKWARD_FUNCTION records
  int64_t node_bscope = -1;         // backward scope of the node that ran last here
};
thread_local ThreadBw tbw;

ThreadBw& thread_bw() {
  uint64_t g = st.generation.load(std::memory_order_relaxed);
  if (tbw.gen != g) tbw = ThreadBw{g};
  return tbw;
}

// The autograd graph of the running backward calls: which nodes feed an input slot that
// several nodes feed (the engine adds into that slot's buffer after them).
using Node = torch::autograd::Node;
inline Node* raw_node(Node* n) { return n; }
template <class P>
Node* raw_node(const P& p) { return p.get(); }  // shared_ptr (torch <= 2.12) or intrusive_ptr

struct BwGraph {
  std::mutex mu;
  std::unordered_map<const Node*, bool> producer;  // walked node -> feeds a multi-fed slot
  std::unordered_map<const Node*, std::vector<uint32_t>> fan_in;  // node -> per input slot
} bwg;

// Walk the graph below `root` (the nodes not walked yet) and classify the nodes found.
void walk(Node* root) {
  std::vector<Node*> stack{root}, found;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!bwg.producer.emplace(n, false).second) continue;
    found.push_back(n);
    for (const auto& e : n->next_edges()) {
      Node* f = raw_node(e.function);
      if (f == nullptr) continue;
      auto& slots = bwg.fan_in[f];
      if (slots.size() <= e.input_nr) slots.resize(e.input_nr + 1, 0);
      ++slots[e.input_nr];
      stack.push_back(f);
    }
  }
  for (Node* n : found) {
    bool multi = false;
    for (const auto& e : n->next_edges()) {
      const Node* f = raw_node(e.function);
      if (f != nullptr && bwg.fan_in[f][e.input_nr] > 1) {
        multi = true;
        break;
      }
    }
    bwg.producer[n] = multi;
  }
}

// Whether the node now evaluated on this thread feeds a multi-fed slot (walking on first sight).
bool current_is_producer() {
  Node* n = raw_node(torch::autograd::get_current_node());
  if (n == nullptr) return false;
  std::lock_guard<std::mutex> g(bwg.mu);
  auto it = bwg.producer.find(n);
  if (it == bwg.producer.end()) {
    walk(n);
    it = bwg.producer.find(n);
  }
  return it->second;
}

void forget_graph() {
  std::lock_guard<std::mutex> g(bwg.mu);
  bwg.producer.clear();
  bwg.fan_in.clear();
}

int64_t owner_of(int64_t seq) {
  std::lock_guard<std::mutex> g(st.own_mu);
  size_t lo = 0, hi = st.own_n.load(std::memory_order_acquire);  // first entry with seq > `seq`
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (st.own_seq[mid].load(std::memory_order_relaxed) <= seq) lo = mid + 1; else hi = mid;
  }
  return lo == 0 ? -1 : st.own_scope[lo - 1].load(std::memory_order_relaxed);
}

int64_t backward_scope_of(int64_t sid) {
  std::lock_guard<std::mutex> g(st.own_mu);
  return sid >= 0 && static_cast<size_t>(sid) < st.backward_of.size()
             ? st.backward_of[static_cast<size_t>(sid)] : -1;
}

void own_note(int64_t scope) {
  if (!st.own_active.load(std::memory_order_relaxed) ||
      !pthread_equal(pthread_self(), st.own_thread))
    return;
  int64_t seq = static_cast<int64_t>(at::sequence_number::peek());
  const size_t n = st.own_n.load(std::memory_order_relaxed);  // only this thread writes it
  if (n > 0 && st.own_seq[n - 1].load(std::memory_order_relaxed) == seq) {
    // nothing was numbered since: the last event wins
    st.own_scope[n - 1].store(scope, std::memory_order_relaxed);
    return;
  }
  if (n == st.own_cap) {
    const size_t cap = std::max<size_t>(4096, n * 2);
    std::unique_ptr<std::atomic<int64_t>[]> sq(new std::atomic<int64_t>[cap]);
    std::unique_ptr<std::atomic<int64_t>[]> sc(new std::atomic<int64_t>[cap]);
    for (size_t i = 0; i < n; ++i) {
      sq[i].store(st.own_seq[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
      sc[i].store(st.own_scope[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> g(st.own_mu);
    st.own_seq.swap(sq);
    st.own_scope.swap(sc);
    st.own_cap = cap;
  }
  st.own_seq[n].store(seq, std::memory_order_relaxed);
  st.own_scope[n].store(scope, std::memory_order_relaxed);
  st.own_n.store(n + 1, std::memory_order_release);
}

std::unique_ptr<at::ObserverContext> bw_start(const at::RecordFunction& fn) {
  if (!st.bw_enabled.load(std::memory_order_relaxed) ||
      st.bw_suspended.load(std::memory_order_relaxed))
    return nullptr;
  try {
    ThreadBw& t = thread_bw();
    if (t.depth++ > 0) return nullptr;  // a node run inside a node: the outer one's scope
    int64_t seq = fn.seqNr();
    if (seq < 0) {  // AccumulateGrad: the leaf's scope (Python pre-hooks) or none (MK9)
      if (!st.leaf_python.load(std::memory_order_relaxed)) st.set_slot(-1);
      t.node_bscope = -1;
    } else if (fn.forwardThreadId() != st.main_rf_thread) {
      t.node_bscope = st.current();  // made on another thread: inherit the running scope
    } else {
      int64_t b = backward_scope_of(owner_of(seq));
      st.set_slot(b);
      t.node_bscope = b;
    }
  } catch (...) {
    st.errors++;
  }
  return nullptr;
}

void bw_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!st.bw_enabled.load(std::memory_order_relaxed) ||
      st.bw_suspended.load(std::memory_order_relaxed))
    return;
  try {
    ThreadBw& t = thread_bw();
    if (t.depth == 0 || --t.depth > 0) return;
    // The node's apply is over; the engine now adds its outputs into the input buffers of the
    // nodes they feed. Where a buffer is fed by several nodes that is gradient accumulation,
    // in this node's scope, until the next node starts (an unowned node leaves the slot alone).
    if (t.node_bscope >= 0 && current_is_producer()) st.set_slot(-(t.node_bscope + 2));
  } catch (...) {
    st.errors++;
  }
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

// Around each backward call of the session: the callback sees every op while it is added, so
// it is present only while the engine runs (forward ops never pay for it). Nested calls
// (checkpointing, a backward inside backward) share it.
void backward_begin() {
  if (!st.bw_enabled) return;
  if (st.bw_depth++ == 0) {
    forget_graph();
    st.bw_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&bw_start, &bw_end)
            .scopes({at::RecordScope::BACKWARD_FUNCTION}));
  }
}

void backward_end() {
  if (st.bw_depth > 0 && --st.bw_depth == 0 && st.bw_handle != 0) {
    at::removeCallback(st.bw_handle);
    st.bw_handle = 0;
    forget_graph();
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
