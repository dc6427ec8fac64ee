#include "nodecount.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dl.h"
#include "inspect.h"
#include "ticks.h"

namespace gs {

std::atomic<bool> g_counting{false};

namespace {

// A note's count not known yet: 1 + the creation index of the node it waits on, resolved at
// count_detach from the graph's node list (inspect.h: positions are creation indices), not by
// asking CUPTI at the note (~0.9 us a node on the H200: most of a note's cost)
constexpr uint64_t kPending = ~0ull;

struct Counter {
  std::mutex mu;          // count_start against count_stop (notes are the capturing thread's)
  std::atomic<uint64_t> tid{0};  // the capturing thread (count_start's)
  CUgraph graph = nullptr;
  CUstream stream = nullptr;  // the capture's origin stream (count_attach's)
  int how = kCountWalk;   // kCountWalk, kCountDeps or kCountVerify (count_start)
  bool fake = false;      // tests without a GPU: the count is count_fake_nodes'
  uint64_t fake_n = 0;
  int64_t fake_deps = -1;  // tests: the stream dependencies' count when it differs (-1: same)
  uint64_t deps_last = 0;  // the last dependencies' count (kept monotone)
  CUgraphNode dep_node = nullptr;  // the single dependency the last count was read from
  uint64_t dep_count = 0;          // and that count (kPending: resolved at count_detach)
  uint64_t mismatches = 0;  // notes (and the end) where the two counts differed
  std::vector<uint64_t> counts;
  std::vector<int64_t> scopes;
  std::vector<int64_t> ops;  // the thread's op id (tls.op) from that count on
  // kCountDeps: counts[first] is 1 + second's creation index, resolved at count_detach
  std::vector<std::pair<size_t, CUgraphNode>> pending;
  CUgraphNode last_node = nullptr;  // the node the last count waits on (nullptr: known)
  int64_t last = INT64_MIN;
  int64_t last_op = INT64_MIN;
  bool attached = false;
  bool detached = false;  // count_detach: attached until the capture ended
  std::atomic<uint64_t> foreign{0};  // scope changes on other threads while counting
  uint64_t errors = 0;
  uint64_t queries = 0;   // node counts asked of the driver (walks or dependencies)
  int64_t query_ticks = 0;  // and the time they took (ticks.h)
};
Counter cnt;

// The graph's node count: cuGraphGetNodes walks the graph (0.55 us at 100 nodes on the H200,
// timed back to back: bench/probes/graph_get_nodes_gpu.py).
bool walk_count(uint64_t& n) {
  if (cnt.fake) {
    n = cnt.fake_n;
    return true;
  }
  size_t k = 0;
  if (drv.GraphGetNodes(cnt.graph, nullptr, &k) != CUDA_SUCCESS) return false;
  n = k;
  return true;
}

// The count as the origin stream's dependencies give it, without a walk: 1 + the highest
// creation index (CUPTI's local node id) among the nodes the stream's next work would follow.
// Equal to the node count while the newest node is one of them: always in a capture made on
// one stream; not while another stream's newest work is unjoined (kCountVerify finds out).
// With `wait` (kCountDeps' notes), a single new dependency is not asked about: n is kPending
// and *wait the node, resolved when the capture ends.
bool deps_count(uint64_t& n, CUgraphNode* wait = nullptr) {
  if (cnt.fake) {
    n = cnt.fake_deps >= 0 ? static_cast<uint64_t>(cnt.fake_deps) : cnt.fake_n;
  } else {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode* deps = nullptr;
    const CUgraphEdgeData* edges = nullptr;
    size_t ndeps = 0;
    if (drv.StreamGetCaptureInfo(cnt.stream, &status, nullptr, nullptr, &deps, &edges,
                                 &ndeps) != CUDA_SUCCESS ||
        status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
      return false;
    uint64_t best = 0;
    if (ndeps == 1 && deps[0] == cnt.dep_node && cnt.dep_count != kPending) {
      // nothing captured since the last note (a module's return and the next module's call):
      // the same node, whose count was read then (a node is never freed during its capture)
      best = cnt.dep_count;
    } else if (ndeps == 1 && wait != nullptr) {
      cnt.dep_node = deps[0];
      cnt.dep_count = kPending;
      *wait = deps[0];
      n = kPending;
      return true;  // made monotone when resolved (count_detach)
    } else {
      for (size_t i = 0; i < ndeps; ++i) {
        uint64_t id = 0;
        if (cupti.GetGraphNodeId(deps[i], &id) != CUPTI_SUCCESS) return false;
        best = std::max<uint64_t>(best, (id & 0xFFFFFFFFull) + 1);
      }
      cnt.dep_node = ndeps == 1 ? deps[0] : nullptr;
      cnt.dep_count = best;
    }
    n = best;
  }
  n = std::max(n, cnt.deps_last);  // a stream whose dependencies were reset: not fewer
  cnt.deps_last = n;
  return true;
}

bool node_count_of(uint64_t& n, CUgraphNode* wait) {
  if (cnt.how == kCountWalk) return walk_count(n);
  if (cnt.how == kCountDeps) return deps_count(n, wait);
  uint64_t d = 0;  // kCountVerify: the walk's count is kept, the other compared
  if (!walk_count(n)) return false;
  if (!deps_count(d) || d != n) cnt.mismatches++;
  return true;
}

bool node_count(uint64_t& n, CUgraphNode* wait) {
  const int64_t t0 = ticks();
  const bool ok = node_count_of(n, wait);
  cnt.queries++;
  cnt.query_ticks += ticks() - t0;
  return ok;
}

// caller holds nothing: notes run on the capturing thread only (others are counted foreign)
void note(ThreadState& t) {
  if (!cnt.attached) return;
  const int64_t cur = t.current();
  if (cur == cnt.last && t.op == cnt.last_op) return;
  uint64_t n = 0;
  CUgraphNode wait = nullptr;
  if (!node_count(n, &wait)) {
    cnt.errors++;
    return;
  }
  // no node made under the scope (or op) the last note opened: it is replaced
  const bool same = !cnt.counts.empty() &&
                    (wait != nullptr ? cnt.last_node == wait
                                     : cnt.last_node == nullptr && cnt.counts.back() == n);
  if (same) {
    cnt.scopes.back() = cur;
    cnt.ops.back() = t.op;
  } else {
    if (wait != nullptr) cnt.pending.emplace_back(cnt.counts.size(), wait);
    cnt.counts.push_back(n);
    cnt.scopes.push_back(cur);
    cnt.ops.push_back(t.op);
  }
  cnt.last_node = wait;
  cnt.last = cur;
  cnt.last_op = t.op;
}

// kCountDeps at the capture's end: the waiting notes' counts from the graph's node list
// (`listed`, or listed here: one cuGraphGetNodes), made monotone as deps_count keeps them, and
// one walk checking the last count
void resolve_deps(const NodeList* listed) {
  const int64_t t0 = ticks();
  NodeList own;
  uint64_t w = 0, d = 0;
  bool ok = true;
  if (cnt.fake) {
    ok = walk_count(w);
    listed = nullptr;
  } else {
    if (listed == nullptr) {
      ok = list_nodes(cnt.graph, own) == CUDA_SUCCESS;
      listed = &own;
    }
    w = listed->nodes.size();
  }
  // the creation index + 1 of `node`, or kPending when it is not in the list
  auto count_after = [&](CUgraphNode node) -> uint64_t {
    const int64_t i = ok && listed != nullptr ? listed->index_of(node) : -1;
    return i < 0 ? kPending : (listed->ids[static_cast<size_t>(i)] & 0xFFFFFFFFull) + 1;
  };
  for (const auto& [at, node] : cnt.pending) {
    const uint64_t c = count_after(node);
    if (c == kPending) {
      cnt.errors++;  // stays kPending: the window is reported unrecorded
      continue;
    }
    cnt.counts[at] = c;
  }
  uint64_t high = 0;
  for (uint64_t& c : cnt.counts) {
    if (c == kPending) continue;
    c = std::max(c, high);
    high = c;
  }
  cnt.deps_last = std::max(cnt.deps_last, high);
  CUgraphNode wait = nullptr;
  if (!ok || !deps_count(d, &wait)) {
    cnt.mismatches++;
  } else {
    if (wait != nullptr) {
      const uint64_t c = count_after(wait);
      d = c == kPending ? kPending : std::max(c, cnt.deps_last);
    }
    if (w != d) cnt.mismatches++;
  }
  cnt.pending.clear();
  cnt.queries++;
  cnt.query_ticks += ticks() - t0;
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

void count_start(bool fake, int how) {
  std::lock_guard<std::mutex> g(cnt.mu);
  if (g_counting.load()) throw std::runtime_error("state:0:node counting is already on");
  if (how != kCountWalk && how != kCountDeps && how != kCountVerify)
    throw std::runtime_error("state:0:unknown node count method " + std::to_string(how));
  if (!fake) require_loaded();
  cnt.tid.store(tls.tid, std::memory_order_relaxed);
  cnt.graph = nullptr;
  cnt.stream = nullptr;
  cnt.how = how;
  cnt.fake = fake;
  cnt.fake_n = 0;
  cnt.fake_deps = -1;
  cnt.deps_last = 0;
  cnt.dep_node = nullptr;
  cnt.dep_count = 0;
  cnt.mismatches = 0;
  cnt.pending.clear();
  cnt.last_node = nullptr;
  cnt.counts.clear();
  cnt.scopes.clear();
  cnt.ops.clear();
  cnt.last = INT64_MIN;
  cnt.last_op = INT64_MIN;
  cnt.attached = false;
  cnt.detached = false;
  cnt.foreign = 0;
  cnt.errors = 0;
  cnt.queries = 0;
  cnt.query_ticks = 0;
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
    cnt.stream = reinterpret_cast<CUstream>(stream);
    cnt.dep_node = nullptr;
  }
  cnt.attached = true;
  note(tls);
}

// The capture is about to end (capture_end may destroy the graph when it fails): no more notes.
void count_detach(const NodeList* listed, CUgraph graph) {
  if (!g_counting.load() || tls.tid != cnt.tid.load()) return;
  if (listed != nullptr && graph != cnt.graph) listed = nullptr;  // not the counted graph
  if (cnt.attached && cnt.how == kCountDeps) resolve_deps(listed);
  cnt.detached = cnt.detached || cnt.attached;
  cnt.attached = false;
  cnt.graph = nullptr;
}

void count_fake_nodes(uint64_t n, int64_t deps) {
  cnt.fake_n = n;
  cnt.fake_deps = deps;
}

nb::dict count_stop() {
  std::lock_guard<std::mutex> g(cnt.mu);
  g_counting.store(false);
  // notes still waiting: the capture ended without count_detach, its graph may be gone
  cnt.errors += cnt.pending.size();
  cnt.pending.clear();
  nb::dict d;
  d["counts"] = as_bytes(cnt.counts);
  d["scopes"] = as_bytes(cnt.scopes);
  d["ops"] = as_bytes(cnt.ops);
  d["attached"] = cnt.attached || cnt.detached;
  d["foreign"] = cnt.foreign.load();
  d["errors"] = cnt.errors;
  d["how"] = cnt.how;
  d["mismatches"] = cnt.mismatches;
  d["queries"] = cnt.queries;
  d["query_s"] = ticks_to_s(cnt.query_ticks);
  cnt.graph = nullptr;
  cnt.attached = false;
  cnt.detached = false;
  return d;
}

}  // namespace gs
