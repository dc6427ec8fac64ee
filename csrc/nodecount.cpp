#include "nodecount.h"

#include <climits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "dl.h"

namespace gs {

std::atomic<bool> g_counting{false};

namespace {

struct Counter {
  std::mutex mu;          // count_start against count_stop (notes are the capturing thread's)
  std::atomic<uint64_t> tid{0};  // the capturing thread (count_start's)
  CUgraph graph = nullptr;
  bool fake = false;      // tests without a GPU: the count is count_fake_nodes'
  uint64_t fake_n = 0;
  std::vector<uint64_t> counts;
  std::vector<int64_t> scopes;
  std::vector<int64_t> ops;  // the thread's op id (tls.op) from that count on
  int64_t last = INT64_MIN;
  int64_t last_op = INT64_MIN;
  bool attached = false;
  bool detached = false;  // count_detach: attached until the capture ended
  std::atomic<uint64_t> foreign{0};  // scope changes on other threads while counting
  uint64_t errors = 0;
};
Counter cnt;

bool node_count(uint64_t& n) {
  if (cnt.fake) {
    n = cnt.fake_n;
    return true;
  }
  size_t k = 0;
  if (drv.GraphGetNodes(cnt.graph, nullptr, &k) != CUDA_SUCCESS) return false;
  n = k;
  return true;
}

// caller holds nothing: notes run on the capturing thread only (others are counted foreign)
void note(ThreadState& t) {
  if (!cnt.attached) return;
  const int64_t cur = t.current();
  if (cur == cnt.last && t.op == cnt.last_op) return;
  uint64_t n = 0;
  if (!node_count(n)) {
    cnt.errors++;
    return;
  }
  if (!cnt.counts.empty() && cnt.counts.back() == n) {
    cnt.scopes.back() = cur;  // no node made under the scope (or op) it replaces
    cnt.ops.back() = t.op;
  } else {
    cnt.counts.push_back(n);
    cnt.scopes.push_back(cur);
    cnt.ops.push_back(t.op);
  }
  cnt.last = cur;
  cnt.last_op = t.op;
}

}  // namespace

void count_note_slow(ThreadState& t, bool op) {
  if (!g_counting.load(std::memory_order_acquire)) return;  // pairs with count_start's store
  if (t.tid != cnt.tid.load(std::memory_order_relaxed)) {
    if (!op) cnt.foreign.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  note(t);
}

void count_start(bool fake) {
  std::lock_guard<std::mutex> g(cnt.mu);
  if (g_counting.load()) throw std::runtime_error("state:0:node counting is already on");
  if (!fake) require_loaded();
  cnt.tid.store(tls.tid, std::memory_order_relaxed);
  cnt.graph = nullptr;
  cnt.fake = fake;
  cnt.fake_n = 0;
  cnt.counts.clear();
  cnt.scopes.clear();
  cnt.ops.clear();
  cnt.last = INT64_MIN;
  cnt.last_op = INT64_MIN;
  cnt.attached = false;
  cnt.detached = false;
  cnt.foreign = 0;
  cnt.errors = 0;
  g_counting.store(true, std::memory_order_release);
}

// The capture has begun on `stream` (the capturing thread's current stream): count its graph
// from here, the thread's scope now noted at the graph's count now.
void count_attach(uintptr_t stream) {
  if (!g_counting.load() || tls.tid != cnt.tid.load())
    throw std::runtime_error("state:0:node counting is not on for this thread");
  if (!cnt.fake) {
    if (!drv.StreamGetCaptureInfo)
      throw std::runtime_error("notloaded:0:libcuda lacks cuStreamGetCaptureInfo_v3");
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUgraph graph = nullptr;
    const CUgraphNode* deps = nullptr;
    const CUgraphEdgeData* edges = nullptr;
    size_t ndeps = 0;
    CUresult r = drv.StreamGetCaptureInfo(reinterpret_cast<CUstream>(stream), &status, &id,
                                          &graph, &deps, &edges, &ndeps);
    if (r != CUDA_SUCCESS) raise_cuda("cuStreamGetCaptureInfo", r);
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || graph == nullptr)
      throw std::runtime_error("state:0:the stream is not capturing");
    cnt.graph = graph;
  }
  cnt.attached = true;
  note(tls);
}

// The capture is about to end (capture_end may destroy the graph when it fails): no more notes.
void count_detach() {
  if (!g_counting.load() || tls.tid != cnt.tid.load()) return;
  cnt.detached = cnt.detached || cnt.attached;
  cnt.attached = false;
  cnt.graph = nullptr;
}

void count_fake_nodes(uint64_t n) { cnt.fake_n = n; }

nb::dict count_stop() {
  std::lock_guard<std::mutex> g(cnt.mu);
  g_counting.store(false);
  nb::dict d;
  d["counts"] = as_bytes(cnt.counts);
  d["scopes"] = as_bytes(cnt.scopes);
  d["ops"] = as_bytes(cnt.ops);
  d["attached"] = cnt.attached || cnt.detached;
  d["foreign"] = cnt.foreign.load();
  d["errors"] = cnt.errors;
  cnt.graph = nullptr;
  cnt.attached = false;
  cnt.detached = false;
  return d;
}

}  // namespace gs
