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
  const uint64_t* gnid = data_of<uint64_t>(gnid_b, n, "graph_node_id");
  const int64_t* corr = data_of<int64_t>(corr_b, n, "correlation");
  const int64_t* st = data_of<int64_t>(start_b, n, "start");
  const int64_t* en = data_of<int64_t>(end_b, n, "end");
  const uint64_t* known = data_of<uint64_t>(known_b, nk, "known");

  std::unordered_map<uint64_t, int32_t> index;
  index.reserve(nk * 2);
  for (size_t k = 0; k < nk; ++k) index.emplace(known[k], static_cast<int32_t>(k));

  std::vector<int32_t> node(n, -1), replay(n, -1);
  // distinct (exec id, correlation) launches; records of one launch come together, so the
  // last one seen answers almost every lookup
  std::unordered_map<uint64_t, std::vector<int64_t>> launches;
  uint64_t last_exec = ~0ull;
  int64_t last_corr = std::numeric_limits<int64_t>::min();
  uint64_t joined = 0, unjoined = 0, outside = 0;
  for (size_t i = 0; i < n; ++i) {
    if (gnid[i] == 0) {
      node[i] = -2;
      ++outside;
      continue;
    }
    auto it = index.find(gnid[i]);
    if (it == index.end()) {
      ++unjoined;
      continue;
    }
    node[i] = it->second;
    ++joined;
    uint64_t ex = gnid[i] >> 32;
    if (ex != last_exec || corr[i] != last_corr) {
      launches[ex].push_back(corr[i]);
      last_exec = ex;
      last_corr = corr[i];
    }
  }
  int64_t n_replays = 0;
  for (auto& kv : launches) {
    auto& v = kv.second;
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    n_replays = std::max<int64_t>(n_replays, static_cast<int64_t>(v.size()));
  }
  last_exec = ~0ull;
  last_corr = std::numeric_limits<int64_t>::min();
  int32_t last_rank = -1;
  std::vector<int64_t> offsets(nk + 1, 0);
  std::vector<int64_t> kernel_ns(static_cast<size_t>(n_replays), 0);
  std::vector<int64_t> first(static_cast<size_t>(n_replays), std::numeric_limits<int64_t>::max());
  std::vector<int64_t> last(static_cast<size_t>(n_replays), std::numeric_limits<int64_t>::min());
  for (size_t i = 0; i < n; ++i) {
    if (node[i] < 0) continue;
    uint64_t ex = gnid[i] >> 32;
    if (ex != last_exec || corr[i] != last_corr) {
      const auto& v = launches[ex];
      last_rank = static_cast<int32_t>(std::lower_bound(v.begin(), v.end(), corr[i]) - v.begin());
      last_exec = ex;
      last_corr = corr[i];
    }
    replay[i] = last_rank;
    offsets[static_cast<size_t>(node[i]) + 1]++;
    size_t r = static_cast<size_t>(last_rank);
    kernel_ns[r] += en[i] - st[i];
    first[r] = std::min(first[r], st[i]);
    last[r] = std::max(last[r], en[i]);
  }
  for (size_t k = 0; k < nk; ++k) offsets[k + 1] += offsets[k];
  std::vector<int64_t> order(joined);
  {
    std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1);
    for (size_t i = 0; i < n; ++i)
      if (node[i] >= 0) order[static_cast<size_t>(fill[static_cast<size_t>(node[i])]++)] =
          static_cast<int64_t>(i);
  }
  bool regular = true;  // every node ran exactly once per replay, in replay order
  for (size_t k = 0; k < nk; ++k) {
    auto b = order.begin() + offsets[k], e = order.begin() + offsets[k + 1];
    if (!std::is_sorted(b, e, [&](int64_t a, int64_t c) { return replay[a] < replay[c]; }))
      std::stable_sort(b, e, [&](int64_t a, int64_t c) { return replay[a] < replay[c]; });
    int64_t cnt = offsets[k + 1] - offsets[k];
    if (cnt != 0 && cnt != n_replays) regular = false;
  }
  std::vector<int64_t> span(static_cast<size_t>(n_replays), 0);
  for (size_t r = 0; r < span.size(); ++r)
    span[r] = first[r] <= last[r] ? last[r] - first[r] : 0;
  std::vector<int64_t> events;
  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < n; ++i) {
    if (node[i] < 0) continue;
    t0 = std::min(t0, st[i]);
    if (replay[i] < keep_events) events.push_back(static_cast<int64_t>(i));
  }
  std::stable_sort(events.begin(), events.end(), [&](int64_t a, int64_t c) {
    return st[a] < st[c];
  });
  nb::dict d;
  d["node"] = as_bytes(node);
  d["replay"] = as_bytes(replay);
  d["order"] = as_bytes(order);
  d["offsets"] = as_bytes(offsets);
  d["kernel_ns"] = as_bytes(kernel_ns);
  d["span_ns"] = as_bytes(span);
  d["events"] = as_bytes(events);
  d["replays"] = n_replays;
  d["regular"] = regular;
  d["t0"] = joined ? t0 : 0;
  d["joined"] = joined;
  d["unjoined"] = unjoined;
  d["outside"] = outside;
  return d;
}

}  // namespace gs
