// graphscope._opwatch: backward attribution from the engine's BACKWARD_FUNCTION records (the
// top of opwatch.cpp says how), and the ownership step function the forward notes.

#include "opwatch.h"

namespace gs::opwatch {

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

}  // namespace gs::opwatch
