#include "tracejson.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pyfloat.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gs {

// ---------------------------------------------------------------- trace event scanning
// A byte-level reader of Chrome/Kineto trace events for annotate-trace: per event it finds the
// few fields the annotator reads (and the byte spans it rewrites) without building Python
// objects for the rest. Events are JSON objects; values it does not need are skipped with
// string-aware bracket matching. Malformed input raises ("json:<offset>:...").
namespace ev {

struct Incomplete {};  // the buffer ends inside an event: read more and resume at its start

inline size_t skip_ws(const char* b, size_t p, size_t n) {
  while (p < n && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t')) ++p;
  return p;
}

[[noreturn]] void bad(size_t at, const char* what) {
  throw std::runtime_error("json:" + std::to_string(at) + ":" + what);
}

// End (exclusive) of the JSON number starting at b[p] (RFC 8259 grammar), or bad().
inline size_t number_end(const char* b, size_t p, size_t n) {
  size_t q = p;
  auto digit = [&](size_t i) { return i < n && b[i] >= '0' && b[i] <= '9'; };
  if (q < n && b[q] == '-') ++q;
  if (q >= n) throw Incomplete{};
  if (b[q] == '0') ++q;
  else if (digit(q)) while (digit(q)) ++q;
  else bad(q, "invalid number");
  if (q < n && b[q] == '.') {
    ++q;
    if (!digit(q)) { if (q >= n) throw Incomplete{}; bad(q, "invalid number"); }
    while (digit(q)) ++q;
  }
  if (q < n && (b[q] == 'e' || b[q] == 'E')) {
    ++q;
    if (q < n && (b[q] == '+' || b[q] == '-')) ++q;
    if (!digit(q)) { if (q >= n) throw Incomplete{}; bad(q, "invalid number"); }
    while (digit(q)) ++q;
  }
  if (q >= n) throw Incomplete{};  // a number may continue in the next chunk
  return q;
}

// End (exclusive) of the string starting at b[p] == '"', validated (escapes, no control
// characters) in the same pass that finds its end: 16 bytes at a time where SSE2 is there.
inline size_t str_end_checked(const char* b, size_t p, size_t n) {
  size_t i = p + 1;
  while (true) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  c1f = _mm_set1_epi8(0x1F);
    while (i + 16 <= n) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
      const __m128i hit = _mm_or_si128(
          _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
          _mm_cmpeq_epi8(_mm_max_epu8(v, c1f), c1f));  // max(v, 0x1F) == 0x1F: v <= 0x1F
      const int m = _mm_movemask_epi8(hit);
      if (m) { i += static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(m))); break; }
      i += 16;
    }
#endif
    if (i >= n) throw Incomplete{};
    const unsigned char d = static_cast<unsigned char>(b[i]);
    if (d == '"') return i + 1;
    if (d == '\\') {
      if (i + 1 >= n) throw Incomplete{};
      const char e = b[i + 1];
      if (e == 'u') {
        if (i + 5 >= n) throw Incomplete{};
        for (int k = 2; k <= 5; ++k) {
          const char h = b[i + k];
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
            bad(i, "invalid \\u escape");
        }
        i += 6;
      } else if (e != 0 && std::strchr("\"\\/bfnrt", e)) {
        i += 2;
      } else {
        bad(i, "invalid escape");
      }
      continue;
    }
    if (d < 0x20) bad(i, "control character in a string");
    ++i;
  }
}

// End (exclusive) of the scalar (string, number, true, false, null) starting at b[p].
inline size_t scalar_end(const char* b, size_t p, size_t n) {
  char c = b[p];
  if (c == '"') return str_end_checked(b, p, n);
  if (c == '-' || (c >= '0' && c <= '9')) return number_end(b, p, n);
  for (const char* lit : {"true", "false", "null"}) {
    size_t len = std::strlen(lit);
    if (c == lit[0]) {
      if (p + len > n) throw Incomplete{};
      if (std::memcmp(b + p, lit, len) != 0) bad(p, "invalid literal");
      return p + len;
    }
  }
  bad(p, "unexpected character");
}

// End (exclusive) of the value starting at b[p], validated as JSON (objects and arrays with
// an explicit stack: no recursion, whatever the depth).
size_t value_end(const char* b, size_t p, size_t n) {
  if (p >= n) throw Incomplete{};
  char c = b[p];
  if (c != '{' && c != '[') return scalar_end(b, p, n);
  std::vector<char> stack;  // the open containers
  // state: 0 expect a value, 1 after a value (',' or the close), 2 expect a key, 3 expect a
  // key or '}' (just after '{')
  int state = 0;
  while (true) {
    p = skip_ws(b, p, n);
    if (p >= n) throw Incomplete{};
    char d = b[p];
    if (state == 0) {
      if (d == '{') { stack.push_back('{'); state = 3; ++p; continue; }
      if (d == '[') {
        stack.push_back('[');
        ++p;
        size_t q = skip_ws(b, p, n);
        if (q >= n) throw Incomplete{};
        if (b[q] == ']') { p = q; state = 1; continue; }  // "[]": closed below
        state = 0;
        continue;
      }
      p = scalar_end(b, p, n);
      state = 1;
    } else if (state == 2 || state == 3) {  // a key (3: right after '{', so '}' too)
      if (d == '}' && state == 3) {
        stack.pop_back();
        ++p;
        if (stack.empty()) return p;
        state = 1;
        continue;
      }
      if (d != '"') bad(p, "expected a key");
      p = skip_ws(b, scalar_end(b, p, n), n);
      if (p >= n) throw Incomplete{};
      if (b[p] != ':') bad(p, "expected ':'");
      ++p;
      state = 0;
    } else {  // after a value
      char open = stack.back();
      if (d == ',') { ++p; state = open == '{' ? 2 : 0; continue; }
      if ((open == '{' && d == '}') || (open == '[' && d == ']')) {
        stack.pop_back();
        ++p;
        if (stack.empty()) return p;
        continue;
      }
      bad(p, open == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
  }
}

inline bool key_is(const char* b, size_t ks, size_t ke, const char* lit) {
  size_t len = std::strlen(lit);
  return ke - ks == len + 2 && std::memcmp(b + ks + 1, lit, len) == 0;
}

inline double num(const char* b, size_t s, size_t e) {
  if (s >= e || b[s] == '"' || b[s] == 'n' || b[s] == 't' || b[s] == 'f') return NAN;
  double v = NAN;
  auto r = std::from_chars(b + s, b + e, v);
  return r.ec == std::errc() ? v : NAN;
}

inline uint64_t unum(const char* b, size_t s, size_t e, bool* ok) {
  *ok = false;
  if (s >= e || !(b[s] >= '0' && b[s] <= '9')) return 0;
  char tmp[64];
  size_t len = std::min<size_t>(e - s, sizeof(tmp) - 1);
  std::memcpy(tmp, b + s, len);
  tmp[len] = 0;
  char* end = nullptr;
  uint64_t v = std::strtoull(tmp, &end, 10);
  if (end && (*end == '.' || *end == 'e' || *end == 'E')) v = (uint64_t)std::strtod(tmp, nullptr);
  *ok = true;
  return v;
}

int8_t cat_code(const char* b, size_t s, size_t e) {
  static const char* cats[] = {"kernel", "gpu_memcpy", "gpu_memset", "ac2g", "cuda_runtime",
                               "gpu_user_annotation"};
  for (int i = 0; i < 6; ++i) {
    if (key_is(b, s, e, cats[i])) return static_cast<int8_t>(i + 1);
  }
  return 0;
}

}  // namespace ev

// Step to the next member of an object whose '{' was just passed (``first``) or whose last
// value ended at pos: false at the object's '}' (pos then just past it); else the key spans
// [ks, ke) and its value starts at vs. Exactly one ',' between members, none trailing.
inline bool next_member(const char* b, size_t& pos, size_t n, size_t& ks, size_t& ke,
                        size_t& vs, bool& first) {
  using namespace ev;
  pos = skip_ws(b, pos, n);
  if (pos >= n) throw Incomplete{};
  if (b[pos] == '}') { ++pos; return false; }
  if (!first) {
    if (b[pos] != ',') bad(pos, "expected ',' or '}'");
    pos = skip_ws(b, pos + 1, n);
    if (pos >= n) throw Incomplete{};
  }
  first = false;
  if (b[pos] != '"') bad(pos, "expected a key");
  ks = pos;
  ke = scalar_end(b, pos, n);
  pos = skip_ws(b, ke, n);
  if (pos >= n) throw Incomplete{};
  if (b[pos] != ':') bad(pos, "expected ':'");
  vs = skip_ws(b, pos + 1, n);
  if (vs >= n) throw Incomplete{};
  return true;
}

// A read-only view of an object's bytes through the buffer protocol, held while it lives (a
// mapped file's memoryview cannot be closed under it). Made and released with the GIL held.
class View {
 public:
  explicit View(nb::handle h) {
    if (PyObject_GetBuffer(h.ptr(), &v_, PyBUF_SIMPLE) != 0) throw nb::python_error();
  }
  ~View() { PyBuffer_Release(&v_); }
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  const char* data() const { return static_cast<const char*>(v_.buf); }
  size_t size() const { return static_cast<size_t>(v_.len); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(v_.buf); }

 private:
  Py_buffer v_;
};

// Scan the events of a traceEvents array held in data, from pos: the columns above for every
// complete event, where to resume once more bytes are read, and whether the array closed.
nb::dict scan_events(nb::handle data_, size_t pos, bool need_comma, size_t end) {
  using namespace ev;
  const View data(data_);
  const char* b = data.data();
  const size_t n = end != 0 && end < data.size() ? end : data.size();  // end: scan [pos, end)
  std::vector<int64_t> ev_b, ev_e, tid_b, tid_e, ts_b, ts_e, args_close, stream_b, stream_e,
      name_b, name_e, corr;
  std::vector<int8_t> cat, ph;
  std::vector<double> tid, ts, dur;
  std::vector<uint64_t> gnid, gid;
  std::vector<uint8_t> has_gnid;
  size_t p = pos, resume = pos;
  bool closed = false;
  // need_comma: an event ended just before pos, so ',' (then the next event) or ']' follows;
  // else pos is at the start of the array or just past a ','
  bool after_comma = false;
  size_t comma_at = 0;
  {
  nb::gil_scoped_release nogil;  // the view keeps the buffer alive
  while (true) {
    p = skip_ws(b, p, n);
    if (p >= n) {
      if (after_comma) { resume = comma_at; need_comma = true; }  // re-read the ','
      else resume = p;
      break;
    }
    if (b[p] == ']') {
      if (after_comma) bad(p, "trailing ',' in traceEvents");
      closed = true; resume = p + 1; break;
    }
    if (need_comma) {
      if (b[p] != ',') bad(p, "expected ',' or ']' between events");
      need_comma = false;
      after_comma = true;
      comma_at = p;
      ++p;
      continue;
    }
    if (b[p] != '{') bad(p, "expected an event object");
    const size_t e_begin = p;
    size_t e_end = 0;
    int64_t tb = -1, te = -1, sb = -1, se = -1, ac = -1, stb = -1, ste = -1, nb_ = -1, ne = -1;
    int8_t c = 0, h = 0;
    double vtid = NAN, vts = NAN, vdur = NAN;
    uint64_t vg = 0, vgid = 0;
    bool hg = false;
    int64_t vcorr = -1;
    try {
    size_t q = p + 1, ks, ke, vs;
    bool first_member = true;
    while (next_member(b, q, n, ks, ke, vs, first_member)) {
      size_t ve;
      if (ke - ks == 6 && b[vs] == '{' && key_is(b, ks, ke, "args")) {
        // args: walk its members once, noting the few the annotator needs
        size_t r = vs + 1, aks, ake, avs;
        bool first_arg = true;
        while (next_member(b, r, n, aks, ake, avs, first_arg)) {
          size_t ave = value_end(b, avs, n);
          bool ok = false;
          size_t klen = ake - aks;
          if (klen == 15 && key_is(b, aks, ake, "graph node id")) {
            vg = unum(b, avs, ave, &ok); hg = ok;
          } else if (klen == 10 && key_is(b, aks, ake, "graph id")) {
            vgid = unum(b, avs, ave, &ok);
          } else if (klen == 13 && key_is(b, aks, ake, "correlation")) {
            uint64_t v = unum(b, avs, ave, &ok);
            if (ok) vcorr = static_cast<int64_t>(v);
          } else if (klen == 8 && key_is(b, aks, ake, "stream")) {
            stb = avs; ste = ave;
          }
          r = ave;
        }
        ve = r;  // just past the args object's '}'
        ac = ve - 1;
        q = ve;
        continue;
      }
      ve = value_end(b, vs, n);
      switch (ke - ks) {
        case 4:
          if (key_is(b, ks, ke, "ph")) h = (ve - vs >= 3 && b[vs] == '"') ? b[vs + 1] : 0;
          else if (key_is(b, ks, ke, "ts")) { sb = vs; se = ve; vts = num(b, vs, ve); }
          break;
        case 5:
          if (key_is(b, ks, ke, "cat")) c = cat_code(b, vs, ve);
          else if (key_is(b, ks, ke, "tid")) { tb = vs; te = ve; vtid = num(b, vs, ve); }
          else if (key_is(b, ks, ke, "dur")) vdur = num(b, vs, ve);
          break;
        case 6:
          if (key_is(b, ks, ke, "name")) { nb_ = vs; ne = ve; }
          break;
        default:
          break;
      }
      q = ve;
    }
    e_end = q;  // just past the event's '}'
    } catch (const Incomplete&) {
      resume = e_begin;
      need_comma = false;
      break;
    }
    ev_b.push_back(e_begin); ev_e.push_back(e_end);
    cat.push_back(c); ph.push_back(h);
    tid_b.push_back(tb); tid_e.push_back(te); ts_b.push_back(sb); ts_e.push_back(se);
    tid.push_back(vtid); ts.push_back(vts); dur.push_back(vdur);
    args_close.push_back(ac); stream_b.push_back(stb); stream_e.push_back(ste);
    name_b.push_back(nb_); name_e.push_back(ne);
    gnid.push_back(vg); gid.push_back(vgid); has_gnid.push_back(hg); corr.push_back(vcorr);
    p = e_end;
    resume = p;
    need_comma = true;
    after_comma = false;
  }
  }  // GIL held again
  nb::dict d;
  d["begin"] = as_bytes(ev_b); d["end"] = as_bytes(ev_e);
  d["cat"] = as_bytes(cat); d["ph"] = as_bytes(ph);
  d["tid"] = as_bytes(tid); d["ts"] = as_bytes(ts); d["dur"] = as_bytes(dur);
  d["tid_b"] = as_bytes(tid_b); d["tid_e"] = as_bytes(tid_e);
  d["ts_b"] = as_bytes(ts_b); d["ts_e"] = as_bytes(ts_e);
  d["args_close"] = as_bytes(args_close);
  d["stream_b"] = as_bytes(stream_b); d["stream_e"] = as_bytes(stream_e);
  d["name_b"] = as_bytes(name_b); d["name_e"] = as_bytes(name_e);
  d["gnid"] = as_bytes(gnid); d["gid"] = as_bytes(gid); d["has_gnid"] = as_bytes(has_gnid);
  d["corr"] = as_bytes(corr);
  d["resume"] = resume;
  d["closed"] = closed;
  d["need_comma"] = need_comma;
  return d;
}

// Rewrite the events scanned above (same order) per a plan: keep flag, new tid / ts /
// args.stream (sentinels: INT64_MIN / NaN = unchanged), and an args fragment to append
// (",\"k\": \"v\"..." without the leading comma) by index. Returns the kept events joined by ','.
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
  Sink& operator+=(const std::string& s) { append(s.data(), s.size()); return *this; }
};

nb::bytes rewrite_events(nb::handle data_, nb::handle begin_, nb::handle end_, nb::handle tid_b_,
                         nb::handle tid_e_, nb::handle ts_b_, nb::handle ts_e_,
                         nb::handle args_close_, nb::handle stream_b_, nb::handle stream_e_,
                         nb::handle keep_, nb::handle new_tid_, nb::handle new_ts_,
                         nb::handle new_stream_, nb::handle frag_, std::vector<std::string> frags) {
  const View data(data_), vb(begin_), ve(end_), vtb(tid_b_), vte(tid_e_), vsb(ts_b_), vse(ts_e_),
      vac(args_close_), vstb(stream_b_), vste(stream_e_), vkeep(keep_), vntid(new_tid_),
      vnts(new_ts_), vnstr(new_stream_), vfrag(frag_);
  const size_t count = vb.size() / sizeof(int64_t);
  for (const View* v : {&ve, &vtb, &vte, &vsb, &vse, &vac, &vstb, &vste, &vntid, &vnts, &vnstr})
    if (v->size() != count * 8) throw std::runtime_error("state:0:rewrite_events: column sizes differ");
  if (vkeep.size() != count || vfrag.size() != count * 4)
    throw std::runtime_error("state:0:rewrite_events: column sizes differ");
  const char* b = data.data();
  const int64_t *eb = vb.as<int64_t>(), *ee = ve.as<int64_t>(), *tb = vtb.as<int64_t>(),
                *te = vte.as<int64_t>(), *sb = vsb.as<int64_t>(), *se = vse.as<int64_t>(),
                *ac = vac.as<int64_t>(), *stb = vstb.as<int64_t>(), *ste = vste.as<int64_t>(),
                *ntid = vntid.as<int64_t>(), *nstr = vnstr.as<int64_t>();
  const double* nts = vnts.as<double>();
  const uint8_t* keep = vkeep.as<uint8_t>();
  const int32_t* frag = vfrag.as<int32_t>();
  for (size_t i = 0; i < count; ++i)
    if (eb[i] < 0 || ee[i] < eb[i] || static_cast<size_t>(ee[i]) > data.size() ||
        (frag[i] >= 0 && static_cast<size_t>(frag[i]) >= frags.size()))
      throw std::runtime_error("state:0:rewrite_events: span outside the data");
  // An upper bound of the output: the events' bytes, their fragments, and per event room
  // for its edits (a tid, a ts, a stream member: under 100 bytes together). The output is
  // written straight into the bytes object returned: no copy of a chunk's worth of text.
  size_t cap = count ? static_cast<size_t>(ee[count - 1] - eb[0]) + 1024 : 1024;
  for (size_t i = 0; i < count; ++i)
    if (keep[i]) cap += 160 + (frag[i] >= 0 ? frags[static_cast<size_t>(frag[i])].size() : 0);
  PyObject* obj = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(cap));
  if (obj == nullptr) throw nb::python_error();
  Sink out{PyBytes_AS_STRING(obj), 0, cap};
  {
  nb::gil_scoped_release nogil;
  bool first = true;
  struct Seg { const char* p; size_t n; };
  struct Edit { int64_t at, until; Seg seg[5]; int nseg; };
  Edit edits[4];
  char tidbuf[32], tsbuf[48], strbuf[32];
  static const char kStream[] = "\"stream\": ";
  static const char kTid[] = "\"tid\": ";
  for (size_t i = 0; i < count; ++i) {
    if (!keep[i]) continue;
    if (!first) out.push_back(',');
    first = false;
    bool changed = ntid[i] != INT64_MIN || !std::isnan(nts[i]) || nstr[i] != INT64_MIN ||
                   frag[i] >= 0;
    if (!changed) { out.append(b + eb[i], ee[i] - eb[i]); continue; }
    int ne = 0;
    if (ntid[i] != INT64_MIN) {
      auto r = std::to_chars(tidbuf, tidbuf + sizeof(tidbuf), ntid[i]);
      Seg v{tidbuf, static_cast<size_t>(r.ptr - tidbuf)};
      if (tb[i] >= 0) {
        edits[ne++] = {tb[i], te[i], {v}, 1};
      } else {  // an event without "tid": one is added as its first member
        int64_t k = eb[i] + 1;
        while (k < ee[i] && (b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t')) ++k;
        edits[ne++] = {eb[i] + 1, eb[i] + 1, {{kTid, sizeof(kTid) - 1}, v, {", ", 2}},
                       b[k] == '}' ? 2 : 3};
      }
    }
    if (!std::isnan(nts[i]) && sb[i] >= 0) {
      auto r = std::to_chars(tsbuf, tsbuf + sizeof(tsbuf) - 2, nts[i]);
      size_t n = static_cast<size_t>(r.ptr - tsbuf);
      bool has_dot = false;
      for (size_t j = 0; j < n; ++j) has_dot |= tsbuf[j] == '.' || tsbuf[j] == 'e';
      if (!has_dot) { tsbuf[n++] = '.'; tsbuf[n++] = '0'; }
      edits[ne++] = {sb[i], se[i], {{tsbuf, n}}, 1};
    }
    // appended before the args object's closing brace: [", "] ["stream": v] [", "] [frag]
    Seg tail[4];
    int nt = 0;
    if (nstr[i] != INT64_MIN) {
      auto r = std::to_chars(strbuf, strbuf + sizeof(strbuf), nstr[i]);
      Seg v{strbuf, static_cast<size_t>(r.ptr - strbuf)};
      if (stb[i] >= 0) {
        edits[ne++] = {stb[i], ste[i], {v}, 1};
      } else {
        tail[nt++] = {kStream, sizeof(kStream) - 1};
        tail[nt++] = v;
      }
    }
    if (frag[i] >= 0) {
      const std::string& f = frags[static_cast<size_t>(frag[i])];
      if (nt) tail[nt++] = {", ", 2};
      tail[nt++] = {f.data(), f.size()};
    }
    if (nt && ac[i] >= 0) {
      int64_t k = ac[i] - 1;
      while (k > eb[i] && (b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t')) --k;
      Edit ed{ac[i], ac[i], {}, 0};
      if (b[k] != '{') ed.seg[ed.nseg++] = {", ", 2};
      for (int j = 0; j < nt; ++j) ed.seg[ed.nseg++] = tail[j];
      edits[ne++] = ed;
    }
    for (int x = 1; x < ne; ++x)  // by position (at most four)
      for (int y = x; y > 0 && edits[y].at < edits[y - 1].at; --y) std::swap(edits[y], edits[y - 1]);
    int64_t cur = eb[i];
    for (int x = 0; x < ne; ++x) {
      out.append(b + cur, static_cast<size_t>(edits[x].at - cur));
      for (int j = 0; j < edits[x].nseg; ++j) out.append(edits[x].seg[j].p, edits[x].seg[j].n);
      cur = edits[x].until;
    }
    out.append(b + cur, static_cast<size_t>(ee[i] - cur));
  }
  }  // GIL held again
  if (out.overflow) {
    Py_DECREF(obj);
    throw std::runtime_error("state:0:rewrite_events: output bound exceeded (a bug)");
  }
  if (_PyBytes_Resize(&obj, static_cast<Py_ssize_t>(out.n)) != 0) throw nb::python_error();
  return nb::steal<nb::bytes>(obj);
}


}  // namespace gs

namespace gs {

// The module-span track of annotate-trace: per graph launch (correlation id) and module depth,
// one slice per run of consecutive work (by start, all streams) of one module prefix, as the
// bundle's Perfetto dump and the HTML timeline draw them: a module's forward and backward are
// two slices and sibling modules never nest. Inputs per graphed event: its launch, leaf module
// row and [t0, t1); `table` maps a leaf row to its prefix ids (n_mod x depth, -1 padded).
// An event with no module (leaf -1: work outside every module, a loss) ends every run. A run
// ends at its work's last end, or where the next run at its depth or above starts if that is
// earlier (work on another stream may run on): slices on one lane never overlap and nest, as
// trace viewers need (graphscope/analysis/replays.py's module_runs draws the same runs).
// Slices come out ordered by launch, then start (a parent before its children), as ready JSON
// joined by ',': heads[prefix] + correlation + '}, "ts": ' + repr(lo) + ', "dur": ' +
// repr(hi - lo) + '}'.
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
  bool bad_prefix = false;
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
    struct Open { int64_t prefix; Span span; };
    std::vector<Open> open;  // per depth, the runs open now
    open.reserve(depth);
    std::vector<std::pair<size_t, Slice>> done;  // (depth, run) closed in the current launch
    int64_t cur = 0;
    constexpr double kNoClip = std::numeric_limits<double>::infinity();
    auto close_from = [&](size_t d, double at) {  // the deepest first, ended by `at`
      while (open.size() > d) {
        Span sp = open.back().span;
        sp.hi = std::min(sp.hi, at);
        done.push_back({open.size() - 1, Slice{cur, open.back().prefix, sp}});
        open.pop_back();
      }
    };
    auto flush_launch = [&]() {  // a launch's slices by (start, depth): a parent first
      close_from(0, kNoClip);
      std::stable_sort(done.begin(), done.end(), [](const auto& a, const auto& b) {
        if (a.second.span.lo != b.second.span.lo) return a.second.span.lo < b.second.span.lo;
        return a.first < b.first;
      });
      for (const auto& [d, sl] : done) slices_.push_back(sl);
      done.clear();
    };
    bool first = true;
    for (uint32_t i : order) {
      if (first || corr[i] != cur) {
        if (!first) flush_launch();
        first = false;
        cur = corr[i];
      }
      if (leaf[i] < 0) {  // work outside every module: no run goes on across it
        close_from(0, t0[i]);
        continue;
      }
      const int64_t* row = table + static_cast<size_t>(leaf[i]) * depth;
      size_t d = 0;
      while (d < depth && row[d] >= 0 && d < open.size() && open[d].prefix == row[d]) {
        open[d].span.hi = std::max(open[d].span.hi, t1[i]);
        ++d;
      }
      close_from(d, t0[i]);
      for (; d < depth && row[d] >= 0; ++d) {
        if (row[d] >= n_pre) { bad_prefix = true; break; }
        open.push_back({row[d], Span{t0[i], t1[i]}});
      }
      if (bad_prefix) break;
    }
    if (!first && !bad_prefix) flush_launch();
  }
  if (bad_prefix) throw std::runtime_error("state:0:module_spans: bad prefix id");
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
