// rewrite_events: the events scan_events read, written out again per annotate-trace's plan
// (kept or dropped, a new tid / ts / args.stream, an args fragment appended), straight into the
// bytes object returned.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bufview.h"
#include "tracejson.h"

namespace gs {
namespace {

// An append-only view of a preallocated buffer (rewrite_events' output bytes object).
struct Sink {
  char* p;
  size_t n, cap;
  bool overflow = false;
  void append(const char* s, size_t k) {
    if (n + k > cap) { overflow = true; return; }
    std::memcpy(p + n, s, k);
    n += k;
  }
  void push_back(char c) { append(&c, 1); }
};

// The plan's columns (one row per scanned event), checked against each other and the data.
struct Plan {
  const View vb, ve, vtb, vte, vsb, vse, vac, vstb, vste, vkeep, vntid, vnts, vnstr, vfrag;
  size_t count = 0;
  const int64_t *eb, *ee, *tb, *te, *sb, *se, *ac, *stb, *ste, *ntid, *nstr;
  const double* nts;
  const uint8_t* keep;
  const int32_t* frag;

  Plan(nb::handle b, nb::handle e, nb::handle tid_b, nb::handle tid_e, nb::handle ts_b,
       nb::handle ts_e, nb::handle args_close, nb::handle stream_b, nb::handle stream_e,
       nb::handle keep_, nb::handle new_tid, nb::handle new_ts, nb::handle new_stream,
       nb::handle frag_)
      : vb(b), ve(e), vtb(tid_b), vte(tid_e), vsb(ts_b), vse(ts_e), vac(args_close),
        vstb(stream_b), vste(stream_e), vkeep(keep_), vntid(new_tid), vnts(new_ts),
        vnstr(new_stream), vfrag(frag_) {
    count = vb.size() / sizeof(int64_t);
    for (const View* v : {&ve, &vtb, &vte, &vsb, &vse, &vac, &vstb, &vste, &vntid, &vnts, &vnstr})
      if (v->size() != count * 8) sizes_differ();
    if (vkeep.size() != count || vfrag.size() != count * 4) sizes_differ();
    eb = vb.as<int64_t>(); ee = ve.as<int64_t>(); tb = vtb.as<int64_t>(); te = vte.as<int64_t>();
    sb = vsb.as<int64_t>(); se = vse.as<int64_t>(); ac = vac.as<int64_t>();
    stb = vstb.as<int64_t>(); ste = vste.as<int64_t>(); ntid = vntid.as<int64_t>();
    nstr = vnstr.as<int64_t>(); nts = vnts.as<double>(); keep = vkeep.as<uint8_t>();
    frag = vfrag.as<int32_t>();
  }
  [[noreturn]] static void sizes_differ() {
    throw std::runtime_error("state:0:rewrite_events: column sizes differ");
  }
  bool changed(size_t i) const {
    return ntid[i] != INT64_MIN || !std::isnan(nts[i]) || nstr[i] != INT64_MIN || frag[i] >= 0;
  }
};

struct Seg { const char* p; size_t n; };
// Bytes [at, until) of an event replaced by the segments.
struct Edit { int64_t at, until; Seg seg[5]; int nseg; };

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// One changed event's edits (at most four), by position. The buffers hold the new values'
// text while the edits are applied.
class EventEdits {
 public:
  EventEdits(const char* b, const Plan& plan, const std::vector<std::string>& frags, size_t i)
      : b_(b), plan_(plan), i_(i) {
    tid();
    ts();
    args_tail(frags);
    for (int x = 1; x < n_; ++x)
      for (int y = x; y > 0 && edits_[y].at < edits_[y - 1].at; --y)
        std::swap(edits_[y], edits_[y - 1]);
  }

  void write(Sink& out) const {
    int64_t cur = plan_.eb[i_];
    for (int x = 0; x < n_; ++x) {
      out.append(b_ + cur, static_cast<size_t>(edits_[x].at - cur));
      for (int j = 0; j < edits_[x].nseg; ++j) out.append(edits_[x].seg[j].p, edits_[x].seg[j].n);
      cur = edits_[x].until;
    }
    out.append(b_ + cur, static_cast<size_t>(plan_.ee[i_] - cur));
  }

 private:
  static constexpr char kStream[] = "\"stream\": ";
  static constexpr char kTid[] = "\"tid\": ";

  void tid() {
    const Plan& c = plan_;
    if (c.ntid[i_] == INT64_MIN) return;
    auto r = std::to_chars(tidbuf_, tidbuf_ + sizeof(tidbuf_), c.ntid[i_]);
    Seg v{tidbuf_, static_cast<size_t>(r.ptr - tidbuf_)};
    if (c.tb[i_] >= 0) {
      edits_[n_++] = {c.tb[i_], c.te[i_], {v}, 1};
      return;
    }
    // an event without "tid": one is added as its first member
    int64_t k = c.eb[i_] + 1;
    while (k < c.ee[i_] && is_ws(b_[k])) ++k;
    edits_[n_++] = {c.eb[i_] + 1, c.eb[i_] + 1, {{kTid, sizeof(kTid) - 1}, v, {", ", 2}},
                    b_[k] == '}' ? 2 : 3};
  }

  void ts() {
    const Plan& c = plan_;
    if (std::isnan(c.nts[i_]) || c.sb[i_] < 0) return;
    auto r = std::to_chars(tsbuf_, tsbuf_ + sizeof(tsbuf_) - 2, c.nts[i_]);
    size_t n = static_cast<size_t>(r.ptr - tsbuf_);
    bool has_dot = false;
    for (size_t j = 0; j < n; ++j) has_dot |= tsbuf_[j] == '.' || tsbuf_[j] == 'e';
    if (!has_dot) { tsbuf_[n++] = '.'; tsbuf_[n++] = '0'; }
    edits_[n_++] = {c.sb[i_], c.se[i_], {{tsbuf_, n}}, 1};
  }

  // appended before the args object's closing brace: [", "] ["stream": v] [", "] [frag]; an
  // existing args.stream is replaced where it stands
  void args_tail(const std::vector<std::string>& frags) {
    const Plan& c = plan_;
    Seg tail[4];
    int nt = 0;
    if (c.nstr[i_] != INT64_MIN) {
      auto r = std::to_chars(strbuf_, strbuf_ + sizeof(strbuf_), c.nstr[i_]);
      Seg v{strbuf_, static_cast<size_t>(r.ptr - strbuf_)};
      if (c.stb[i_] >= 0) {
        edits_[n_++] = {c.stb[i_], c.ste[i_], {v}, 1};
      } else {
        tail[nt++] = {kStream, sizeof(kStream) - 1};
        tail[nt++] = v;
      }
    }
    if (c.frag[i_] >= 0) {
      const std::string& f = frags[static_cast<size_t>(c.frag[i_])];
      if (nt) tail[nt++] = {", ", 2};
      tail[nt++] = {f.data(), f.size()};
    }
    if (!nt || c.ac[i_] < 0) return;
    int64_t k = c.ac[i_] - 1;
    while (k > c.eb[i_] && is_ws(b_[k])) --k;
    Edit ed{c.ac[i_], c.ac[i_], {}, 0};
    if (b_[k] != '{') ed.seg[ed.nseg++] = {", ", 2};
    for (int j = 0; j < nt; ++j) ed.seg[ed.nseg++] = tail[j];
    edits_[n_++] = ed;
  }

  const char* b_;
  const Plan& plan_;
  size_t i_;
  Edit edits_[4];
  int n_ = 0;
  char tidbuf_[32], tsbuf_[48], strbuf_[32];
};

// An upper bound of the output: the events' bytes, their fragments, and per event room for its
// edits (a tid, a ts, a stream member: under 100 bytes together).
size_t output_bound(const Plan& c, const std::vector<std::string>& frags) {
  size_t cap = c.count ? static_cast<size_t>(c.ee[c.count - 1] - c.eb[0]) + 1024 : 1024;
  for (size_t i = 0; i < c.count; ++i)
    if (c.keep[i]) cap += 160 + (c.frag[i] >= 0 ? frags[static_cast<size_t>(c.frag[i])].size() : 0);
  return cap;
}

}  // namespace

// Rewrite the events scan_events read (same order) per a plan: keep flag, new tid / ts /
// args.stream (sentinels: INT64_MIN / NaN = unchanged), and an args fragment to append
// (",\"k\": \"v\"..." without the leading comma) by index. Returns the kept events joined
// by ','.
nb::bytes rewrite_events(nb::handle data_, nb::handle begin_, nb::handle end_, nb::handle tid_b_,
                         nb::handle tid_e_, nb::handle ts_b_, nb::handle ts_e_,
                         nb::handle args_close_, nb::handle stream_b_, nb::handle stream_e_,
                         nb::handle keep_, nb::handle new_tid_, nb::handle new_ts_,
                         nb::handle new_stream_, nb::handle frag_, std::vector<std::string> frags) {
  const View data(data_);
  const Plan plan(begin_, end_, tid_b_, tid_e_, ts_b_, ts_e_, args_close_, stream_b_, stream_e_,
                  keep_, new_tid_, new_ts_, new_stream_, frag_);
  for (size_t i = 0; i < plan.count; ++i)
    if (plan.eb[i] < 0 || plan.ee[i] < plan.eb[i] ||
        static_cast<size_t>(plan.ee[i]) > data.size() ||
        (plan.frag[i] >= 0 && static_cast<size_t>(plan.frag[i]) >= frags.size()))
      throw std::runtime_error("state:0:rewrite_events: span outside the data");
  // written straight into the bytes object returned: no copy of a chunk's worth of text
  const size_t cap = output_bound(plan, frags);
  PyObject* obj = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(cap));
  if (obj == nullptr) throw nb::python_error();
  Sink out{PyBytes_AS_STRING(obj), 0, cap};
  {
    nb::gil_scoped_release nogil;
    const char* b = data.data();
    bool first = true;
    for (size_t i = 0; i < plan.count; ++i) {
      if (!plan.keep[i]) continue;
      if (!first) out.push_back(',');
      first = false;
      if (plan.changed(i)) {
        EventEdits(b, plan, frags, i).write(out);
      } else {
        out.append(b + plan.eb[i], plan.ee[i] - plan.eb[i]);
      }
    }
  }
  if (out.overflow) {
    Py_DECREF(obj);
    throw std::runtime_error("state:0:rewrite_events: output bound exceeded (a bug)");
  }
  if (_PyBytes_Resize(&obj, static_cast<Py_ssize_t>(out.n)) != 0) throw nb::python_error();
  return nb::steal<nb::bytes>(obj);
}

}  // namespace gs
