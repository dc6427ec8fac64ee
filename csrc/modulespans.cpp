// The module-span track of annotate-trace (ModuleSpans, tracejson.h): per graph launch and
// module depth, one slice per run of consecutive work of one module prefix.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pyfloat.h"
#include "tracejson.h"

namespace gs {
namespace {

using Span = ModuleSpans::Span;
using Slice = ModuleSpans::Slice;

// The runs of one pass over the events, by (launch, start): the runs open per depth, and the
// slices a launch's closed runs become, a parent before its children.
class Runs {
 public:
  Runs(size_t depth, std::vector<Slice>& out) : out_(out) { open_.reserve(depth); }

  void launch(int64_t corr) {  // the events of another launch follow
    if (started_) flush_launch();
    started_ = true;
    cur_ = corr;
  }

  // work outside every module: no run goes on across it
  void outside(double t0) { close_from(0, t0); }

  // work of the module whose prefixes (outermost first, -1 padded) are row[0..depth); false
  // on a prefix id outside the heads
  bool work(const int64_t* row, size_t depth, int64_t n_pre, double t0, double t1) {
    size_t d = 0;
    while (d < depth && row[d] >= 0 && d < open_.size() && open_[d].prefix == row[d]) {
      open_[d].span.hi = std::max(open_[d].span.hi, t1);
      ++d;
    }
    close_from(d, t0);
    for (; d < depth && row[d] >= 0; ++d) {
      if (row[d] >= n_pre) return false;
      open_.push_back({row[d], Span{t0, t1}});
    }
    return true;
  }

  void finish() {
    if (started_) flush_launch();
  }

 private:
  struct Open { int64_t prefix; Span span; };

  void close_from(size_t d, double at) {  // the deepest first, ended by `at`
    while (open_.size() > d) {
      Span sp = open_.back().span;
      sp.hi = std::min(sp.hi, at);
      done_.push_back({open_.size() - 1, Slice{cur_, open_.back().prefix, sp}});
      open_.pop_back();
    }
  }

  void flush_launch() {  // a launch's slices by (start, depth): a parent first
    close_from(0, std::numeric_limits<double>::infinity());
    std::stable_sort(done_.begin(), done_.end(), [](const auto& a, const auto& b) {
      if (a.second.span.lo != b.second.span.lo) return a.second.span.lo < b.second.span.lo;
      return a.first < b.first;
    });
    for (const auto& [d, sl] : done_) out_.push_back(sl);
    done_.clear();
  }

  std::vector<Slice>& out_;
  std::vector<Open> open_;                     // per depth, the runs open now
  std::vector<std::pair<size_t, Slice>> done_;  // (depth, run) closed in the current launch
  int64_t cur_ = 0;
  bool started_ = false;
};

}  // namespace

// The module-span track: per graph launch (correlation id) and module depth, one slice per run
// of consecutive work (by start, all streams) of one module prefix, as the bundle's Perfetto
// dump and the HTML timeline draw them: a module's forward and backward are two slices and
// sibling modules never nest. Inputs per graphed event: its launch, leaf module row and
// [t0, t1); `table` maps a leaf row to its prefix ids (n_mod x depth, -1 padded). An event
// with no module (leaf -1: work outside every module, a loss) ends every run. A run ends at its
// work's last end, or where the next run at its depth or above starts if that is earlier (work
// on another stream may run on): slices on one lane never overlap and nest, as trace viewers
// need (graphscope/analysis/replays.py's module_runs draws the same runs). Slices come out
// ordered by launch, then start (a parent before its children), as ready JSON joined by ',':
// heads[prefix] + correlation + '}, "ts": ' + repr(lo) + ', "dur": ' + repr(hi - lo) + '}'.
ModuleSpans::ModuleSpans(nb::bytes corr_b, nb::bytes leaf_b, nb::bytes t0_b, nb::bytes t1_b,
                         nb::bytes table_b, size_t depth, std::vector<std::string> heads)
    : heads_(std::move(heads)) {
  const size_t n = corr_b.size() / 8;
  if (leaf_b.size() != n * 8 || t0_b.size() != n * 8 || t1_b.size() != n * 8 || depth == 0 ||
      table_b.size() % (8 * depth) != 0)
    throw std::runtime_error("state:0:module_spans: column sizes differ");
  const auto* corr = reinterpret_cast<const int64_t*>(corr_b.c_str());
  const auto* leaf = reinterpret_cast<const int64_t*>(leaf_b.c_str());
  const auto* t0 = reinterpret_cast<const double*>(t0_b.c_str());
  const auto* t1 = reinterpret_cast<const double*>(t1_b.c_str());
  const auto* table = reinterpret_cast<const int64_t*>(table_b.c_str());
  const size_t n_mod = table_b.size() / (8 * depth);
  const int64_t n_pre = static_cast<int64_t>(heads_.size());
  bool ok = true;
  {
    nb::gil_scoped_release nogil;
    // the events (with a module, or -1: none), by (launch, start, end)
    std::vector<uint32_t> order;
    order.reserve(n);
    for (size_t i = 0; i < n; ++i)
      if (leaf[i] < 0 || static_cast<size_t>(leaf[i]) < n_mod)
        order.push_back(static_cast<uint32_t>(i));
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (corr[a] != corr[b]) return corr[a] < corr[b];
      if (t0[a] != t0[b]) return t0[a] < t0[b];
      return t1[a] < t1[b];
    });
    Runs runs(depth, slices_);
    for (size_t k = 0; k < order.size() && ok; ++k) {
      const uint32_t i = order[k];
      if (k == 0 || corr[i] != corr[order[k - 1]]) runs.launch(corr[i]);
      if (leaf[i] < 0) {
        runs.outside(t0[i]);
      } else {
        ok = runs.work(table + static_cast<size_t>(leaf[i]) * depth, depth, n_pre, t0[i], t1[i]);
      }
    }
    if (ok) runs.finish();
  }
  if (!ok) throw std::runtime_error("state:0:module_spans: bad prefix id");
}

// The next ~4 MiB of slices, ','-joined (None after the last): the track is rendered piece by
// piece as it is written, never held whole.
nb::object ModuleSpans::next_piece() {
  constexpr size_t kPiece = 4u << 20;
  if (next_ >= slices_.size()) return nb::none();
  std::string out;
  {
    nb::gil_scoped_release nogil;
    out.reserve(kPiece + 4096);
    char num[48];
    for (bool first = true; next_ < slices_.size() && out.size() < kPiece; ++next_, first = false) {
      const Slice& sl = slices_[next_];
      if (!first) out += ',';
      out += heads_[static_cast<size_t>(sl.prefix)];
      auto r = std::to_chars(num, num + sizeof(num), sl.corr);
      out.append(num, r.ptr);
      out += "}, \"ts\": ";
      out.append(num, py_float_repr_to(sl.span.lo, num));
      out += ", \"dur\": ";
      out.append(num, py_float_repr_to(sl.span.hi - sl.span.lo, num));
      out += '}';
    }
  }
  return nb::bytes(out.data(), out.size());
}

nb::list module_spans(nb::bytes corr, nb::bytes leaf, nb::bytes t0, nb::bytes t1,
                      nb::bytes table, size_t depth, std::vector<std::string> heads) {
  ModuleSpans track(corr, leaf, t0, t1, table, depth, std::move(heads));
  nb::list pieces;
  for (nb::object p = track.next_piece(); !p.is_none(); p = track.next_piece()) pieces.append(p);
  return pieces;
}

}  // namespace gs
