// graphscope._opwatch's shared state and the functions its three files call across:
// opwatch.cpp (the op observer, its table and the module's bindings), opwatch_describe.cpp (an
// op call's inputs as shapes, signatures and memory ranges) and opwatch_backward.cpp (backward
// attribution from the engine's BACKWARD_FUNCTION records). What it records and why: the top of
// opwatch.cpp.
#pragma once

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


namespace nb = nanobind;

namespace gs::opwatch {

constexpr int64_t kOpBase = int64_t(1) << 40;
// With memory recording on, the thread's op id is a *call* id: one per recorded op call, row
// `id - kCallBase` of st.calls, which names the interned op and the device memory it touched.
constexpr int64_t kCallBase = int64_t(2) << 40;
using SetOpFn = int64_t (*)(int64_t);

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
};

extern State st;

constexpr uint32_t kNoSource = UINT32_MAX;

// opwatch_describe.cpp
size_t described_end(const OpInfo& info, c10::ArrayRef<const c10::IValue> inputs);
void describe_inputs(std::string& out, const OpInfo& info,
                     c10::ArrayRef<const c10::IValue> inputs, size_t end);
template <class T>
void put(std::string& k, const T& v) { k.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
void sign_value(std::string& k, const c10::IValue& v, bool skip_int);
void add_ranges(std::vector<uint64_t>& out, const c10::IValue& v);
int64_t new_call(const OpInfo& info, int64_t op, c10::ArrayRef<const c10::IValue> inputs);

// opwatch_backward.cpp
std::unique_ptr<at::ObserverContext> bw_start(const at::RecordFunction& fn);
void bw_end(const at::RecordFunction& fn, at::ObserverContext*);
void forget_graph();
int64_t owner_of(int64_t seq);
int64_t backward_scope_of(int64_t sid);
void own_note(int64_t scope);
void backward_begin();
void backward_end();

}  // namespace gs::opwatch
