#include "join.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

namespace gs {

namespace {

template <typename T>
const T* data_of(const nb::bytes& b, size_t n, const char* what) {
  if (b.size() != n * sizeof(T))
    throw std::runtime_error(std::string("state:0:join: column ") + what + " has the wrong size");
  return reinterpret_cast<const T*>(b.c_str());
}

// The columns of one join (join_records), computed step by step.
class Join {
 public:
  Join(const uint64_t* gnid, const int64_t* corr, const int64_t* st, const int64_t* en,
       size_t n, const uint64_t* known, size_t nk)
      : gnid_(gnid), corr_(corr), st_(st), en_(en), n_(n), nk_(nk), node(n, -1), replay(n, -1),
        offsets(nk + 1, 0) {
    index_.reserve(nk * 2);
    for (size_t k = 0; k < nk; ++k) index_.emplace(known[k], static_cast<int32_t>(k));
  }

  // Each record's node (or -1 unjoined, -2 outside every graph) and its exec graph's launches.
  void match() {
    // records of one launch come together, so the last one seen answers almost every lookup
    uint64_t last_exec = ~0ull;
    int64_t last_corr = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < n_; ++i) {
      if (gnid_[i] == 0) {
        node[i] = -2;
        ++outside;
        continue;
      }
      auto it = index_.find(gnid_[i]);
      if (it == index_.end()) {
        ++unjoined;
        continue;
      }
      node[i] = it->second;
      ++joined;
      const uint64_t ex = gnid_[i] >> 32;
      if (ex != last_exec || corr_[i] != last_corr) {
        launches_[ex].push_back(corr_[i]);
        last_exec = ex;
        last_corr = corr_[i];
      }
    }
    for (auto& kv : launches_) {
      auto& v = kv.second;
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      n_replays = std::max<int64_t>(n_replays, static_cast<int64_t>(v.size()));
    }
  }

  // Each joined record's replay (its launch's rank), the records per node, kernel time and
  // first start / last end per replay.
  void rank() {
    uint64_t last_exec = ~0ull;
    int64_t last_corr = std::numeric_limits<int64_t>::min();
    int32_t last_rank = -1;
    const size_t nr = static_cast<size_t>(n_replays);
    kernel_ns.assign(nr, 0);
    std::vector<int64_t> first(nr, std::numeric_limits<int64_t>::max());
    std::vector<int64_t> last(nr, std::numeric_limits<int64_t>::min());
    for (size_t i = 0; i < n_; ++i) {
      if (node[i] < 0) continue;
      const uint64_t ex = gnid_[i] >> 32;
      if (ex != last_exec || corr_[i] != last_corr) {
        const auto& v = launches_[ex];
        last_rank =
            static_cast<int32_t>(std::lower_bound(v.begin(), v.end(), corr_[i]) - v.begin());
        last_exec = ex;
        last_corr = corr_[i];
      }
      replay[i] = last_rank;
      offsets[static_cast<size_t>(node[i]) + 1]++;
      const size_t r = static_cast<size_t>(last_rank);
      kernel_ns[r] += en_[i] - st_[i];
      first[r] = std::min(first[r], st_[i]);
      last[r] = std::max(last[r], en_[i]);
    }
    span_ns.assign(nr, 0);
    for (size_t r = 0; r < nr; ++r) span_ns[r] = first[r] <= last[r] ? last[r] - first[r] : 0;
  }

  // The joined records grouped by node (counting sort), each group stably by replay.
  void group() {
    for (size_t k = 0; k < nk_; ++k) offsets[k + 1] += offsets[k];
    order.assign(joined, 0);
    std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1);
    for (size_t i = 0; i < n_; ++i)
      if (node[i] >= 0)
        order[static_cast<size_t>(fill[static_cast<size_t>(node[i])]++)] =
            static_cast<int64_t>(i);
    auto by_replay = [&](int64_t a, int64_t c) { return replay[a] < replay[c]; };
    for (size_t k = 0; k < nk_; ++k) {
      auto b = order.begin() + offsets[k], e = order.begin() + offsets[k + 1];
      if (!std::is_sorted(b, e, by_replay)) std::stable_sort(b, e, by_replay);
      const int64_t cnt = offsets[k + 1] - offsets[k];
      if (cnt != 0 && cnt != n_replays) regular = false;
    }
  }

  // The joined records of replays below keep, stably by start; the first start of all.
  void pick_events(int64_t keep) {
    for (size_t i = 0; i < n_; ++i) {
      if (node[i] < 0) continue;
      t0 = std::min(t0, st_[i]);
      if (replay[i] < keep) events.push_back(static_cast<int64_t>(i));
    }
    std::stable_sort(events.begin(), events.end(),
                     [&](int64_t a, int64_t c) { return st_[a] < st_[c]; });
  }

 private:
  const uint64_t* gnid_;
  const int64_t *corr_, *st_, *en_;
  size_t n_, nk_;
  std::unordered_map<uint64_t, int32_t> index_;  // exec node id -> its index in known
  // distinct launches (correlation ids) per exec graph, sorted once matched
  std::unordered_map<uint64_t, std::vector<int64_t>> launches_;

 public:
  std::vector<int32_t> node, replay;
  std::vector<int64_t> offsets, kernel_ns, span_ns, order, events;
  int64_t n_replays = 0;
  int64_t t0 = std::numeric_limits<int64_t>::max();
  uint64_t joined = 0, unjoined = 0, outside = 0;
  bool regular = true;  // every node ran exactly once per replay, in replay order
};

}  // namespace

// The join of graphs/join.py, in one pass over the records plus a counting sort:
//   node[i]    index into `known` (sorted exec node ids) of record i; -1 unjoined, -2 outside
//   replay[i]  rank of record i's correlation id among its exec graph's launches (-1: none)
//   order      joined records grouped by node (known order), each group stably by replay
//   offsets    the groups' bounds in `order` (len(known) + 1)
//   kernel_ns, span_ns per replay; events: joined records of replays < keep, stably by start.
nb::dict join_records(nb::bytes gnid_b, nb::bytes corr_b, nb::bytes start_b, nb::bytes end_b,
                      nb::bytes known_b, int64_t keep_events) {
  const size_t n = gnid_b.size() / sizeof(uint64_t);
  const size_t nk = known_b.size() / sizeof(uint64_t);
  Join j(data_of<uint64_t>(gnid_b, n, "graph_node_id"),
         data_of<int64_t>(corr_b, n, "correlation"), data_of<int64_t>(start_b, n, "start"),
         data_of<int64_t>(end_b, n, "end"), n, data_of<uint64_t>(known_b, nk, "known"), nk);
  j.match();
  j.rank();
  j.group();
  j.pick_events(keep_events);
  nb::dict d;
  d["node"] = as_bytes(j.node);
  d["replay"] = as_bytes(j.replay);
  d["order"] = as_bytes(j.order);
  d["offsets"] = as_bytes(j.offsets);
  d["kernel_ns"] = as_bytes(j.kernel_ns);
  d["span_ns"] = as_bytes(j.span_ns);
  d["events"] = as_bytes(j.events);
  d["replays"] = j.n_replays;
  d["regular"] = j.regular;
  d["t0"] = j.joined ? j.t0 : 0;
  d["joined"] = j.joined;
  d["unjoined"] = j.unjoined;
  d["outside"] = j.outside;
  return d;
}

}  // namespace gs
