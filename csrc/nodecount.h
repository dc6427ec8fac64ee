// A capture's scopes without CUPTI: the node count of the graph being captured, noted at
// every change of the capturing thread's scope or op (scopes.h). Node k (creation order) has
// the scope and op noted last at a count <= k, what the CUPTI recorder's GRAPHNODE_CREATED
// callback would have read for it on that thread. No subscription is held: CUPTI's resource
// callbacks cost ~4.5 us per captured kernel on the H200 (bench/probes/process_wide_gpu.py),
// as much as the capture of the kernel itself. graphscope run uses it for the captures of a
// site past its first --op-captures, once those made every node on the capturing thread, and
// with GRAPHSCOPE_NODE_COUNTS=all for every capture begun with grad off (watch.py).
#pragma once

#include <cuda.h>

#include <atomic>

#include "common.h"
#include "scopes.h"

namespace gs {

extern std::atomic<bool> g_counting;
void count_note_slow(ThreadState& t, bool op);

// After every change of t's scope stack, slot or slot generation (op: false) or of its op
// (op: true). Another thread's scope change is counted as foreign; its op changes are not
// (the op observer sees every thread's aten ops, a data loader's too, and CUPTI would read
// them only for nodes that thread made, which a scope change is the sign of).
inline void count_note(ThreadState& t, bool op = false) {
  if (g_counting.load(std::memory_order_relaxed)) count_note_slow(t, op);
}

// How a note counts: kCountWalk walks the graph (cuGraphGetNodes: exact, O(nodes));
// kCountDeps reads the origin stream's dependencies (O(1): exact while the newest node is one
// of them, checked by one walk when the capture ends); kCountVerify walks and compares the
// two at every note (a site's first counted capture: graphscope run uses kCountDeps for its
// later ones only when they agreed throughout).
constexpr int kCountWalk = 0;
constexpr int kCountDeps = 1;
constexpr int kCountVerify = 2;

void count_start(bool fake, int how = kCountWalk);
void count_attach(uintptr_t stream);
struct NodeList;  // inspect.h
// The capture is about to end: no more notes. `listed`: the counted graph's nodes, listed by
// the caller (read_capture), which resolves the waiting notes without listing them again.
void count_detach(const NodeList* listed = nullptr, CUgraph graph = nullptr);
void count_fake_nodes(uint64_t n, int64_t deps = -1);
nb::dict count_stop();

}  // namespace gs
