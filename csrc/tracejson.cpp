// scan_events: the events of a Chrome/Kineto trace's traceEvents array, as columns. Per event
// it finds the few fields annotate-trace reads (and the byte spans it rewrites) with the JSON
// scanner of jsonscan.h, without building Python objects for the rest.
#include "tracejson.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "bufview.h"
#include "jsonscan.h"

namespace gs {
namespace {

using namespace ev;

// One event: what the annotator reads, and the byte spans it may rewrite (-1: absent).
struct EventRow {
  int64_t begin = 0, end = 0;  // the object's bytes, [begin, end)
  int64_t tid_b = -1, tid_e = -1, ts_b = -1, ts_e = -1, stream_b = -1, stream_e = -1;
  int64_t name_b = -1, name_e = -1;
  int64_t args_close = -1;  // the args object's '}'
  int64_t corr = -1;        // args.correlation
  int8_t cat = 0, ph = 0;   // cat_code(cat), the phase's letter
  double tid = NAN, ts = NAN, dur = NAN;
  uint64_t gnid = 0, gid = 0;  // args."graph node id", args."graph id"
  bool has_gnid = false;
};

// The args object starting at b[vs] == '{': its members once, noting the few the annotator
// needs. Returns the position just past its '}'.
size_t scan_args(const char* b, size_t vs, size_t n, EventRow& r) {
  size_t p = vs + 1, ks, ke, avs;
  bool first = true;
  while (next_member(b, p, n, ks, ke, avs, first)) {
    const size_t ave = value_end(b, avs, n);
    bool ok = false;
    const size_t klen = ke - ks;
    if (klen == 15 && key_is(b, ks, ke, "graph node id")) {
      r.gnid = unum(b, avs, ave, &ok);
      r.has_gnid = ok;
    } else if (klen == 10 && key_is(b, ks, ke, "graph id")) {
      r.gid = unum(b, avs, ave, &ok);
    } else if (klen == 13 && key_is(b, ks, ke, "correlation")) {
      const uint64_t v = unum(b, avs, ave, &ok);
      if (ok) r.corr = static_cast<int64_t>(v);
    } else if (klen == 8 && key_is(b, ks, ke, "stream")) {
      r.stream_b = avs;
      r.stream_e = ave;
    }
    p = ave;
  }
  return p;
}

// The event object starting at b[p] == '{' into r. Returns the position just past its '}';
// throws Incomplete where the buffer ends inside it.
size_t scan_event(const char* b, size_t p, size_t n, EventRow& r) {
  r.begin = p;
  size_t q = p + 1, ks, ke, vs;
  bool first = true;
  while (next_member(b, q, n, ks, ke, vs, first)) {
    if (ke - ks == 6 && b[vs] == '{' && key_is(b, ks, ke, "args")) {
      q = scan_args(b, vs, n, r);
      r.args_close = q - 1;
      continue;
    }
    const size_t ve = value_end(b, vs, n);
    switch (ke - ks) {
      case 4:
        if (key_is(b, ks, ke, "ph")) {
          r.ph = (ve - vs >= 3 && b[vs] == '"') ? b[vs + 1] : 0;
        } else if (key_is(b, ks, ke, "ts")) {
          r.ts_b = vs; r.ts_e = ve; r.ts = num(b, vs, ve);
        }
        break;
      case 5:
        if (key_is(b, ks, ke, "cat")) {
          r.cat = cat_code(b, vs, ve);
        } else if (key_is(b, ks, ke, "tid")) {
          r.tid_b = vs; r.tid_e = ve; r.tid = num(b, vs, ve);
        } else if (key_is(b, ks, ke, "dur")) {
          r.dur = num(b, vs, ve);
        }
        break;
      case 6:
        if (key_is(b, ks, ke, "name")) { r.name_b = vs; r.name_e = ve; }
        break;
      default:
        break;
    }
    q = ve;
  }
  r.end = q;
  return q;
}

struct EventColumns {
  std::vector<int64_t> begin, end, tid_b, tid_e, ts_b, ts_e, args_close, stream_b, stream_e,
      name_b, name_e, corr;
  std::vector<int8_t> cat, ph;
  std::vector<double> tid, ts, dur;
  std::vector<uint64_t> gnid, gid;
  std::vector<uint8_t> has_gnid;

  void push(const EventRow& r) {
    begin.push_back(r.begin); end.push_back(r.end);
    cat.push_back(r.cat); ph.push_back(r.ph);
    tid_b.push_back(r.tid_b); tid_e.push_back(r.tid_e);
    ts_b.push_back(r.ts_b); ts_e.push_back(r.ts_e);
    tid.push_back(r.tid); ts.push_back(r.ts); dur.push_back(r.dur);
    args_close.push_back(r.args_close);
    stream_b.push_back(r.stream_b); stream_e.push_back(r.stream_e);
    name_b.push_back(r.name_b); name_e.push_back(r.name_e);
    gnid.push_back(r.gnid); gid.push_back(r.gid); has_gnid.push_back(r.has_gnid);
    corr.push_back(r.corr);
  }

  void into(nb::dict& d) const {
    d["begin"] = as_bytes(begin); d["end"] = as_bytes(end);
    d["cat"] = as_bytes(cat); d["ph"] = as_bytes(ph);
    d["tid"] = as_bytes(tid); d["ts"] = as_bytes(ts); d["dur"] = as_bytes(dur);
    d["tid_b"] = as_bytes(tid_b); d["tid_e"] = as_bytes(tid_e);
    d["ts_b"] = as_bytes(ts_b); d["ts_e"] = as_bytes(ts_e);
    d["args_close"] = as_bytes(args_close);
    d["stream_b"] = as_bytes(stream_b); d["stream_e"] = as_bytes(stream_e);
    d["name_b"] = as_bytes(name_b); d["name_e"] = as_bytes(name_e);
    d["gnid"] = as_bytes(gnid); d["gid"] = as_bytes(gid); d["has_gnid"] = as_bytes(has_gnid);
    d["corr"] = as_bytes(corr);
  }
};

// Where a scan of the array stopped: resume there once more bytes are read.
struct ScanEnd {
  size_t resume;
  bool closed;      // the array's ']' was read
  bool need_comma;  // an event ended just before resume: ',' or ']' comes next
};

// The array's events from b[p] into cols, up to n.
ScanEnd scan_array(const char* b, size_t p, size_t n, bool need_comma, EventColumns& cols) {
  // need_comma: an event ended just before p, so ',' (then the next event) or ']' follows;
  // else p is at the start of the array or just past a ','
  bool after_comma = false;
  size_t comma_at = 0;
  while (true) {
    p = skip_ws(b, p, n);
    if (p >= n) {
      if (after_comma) return {comma_at, false, true};  // re-read the ','
      return {p, false, need_comma};
    }
    if (b[p] == ']') {
      if (after_comma) bad(p, "trailing ',' in traceEvents");
      return {p + 1, true, need_comma};
    }
    if (need_comma) {
      if (b[p] != ',') bad(p, "expected ',' or ']' between events");
      need_comma = false;
      after_comma = true;
      comma_at = p++;
      continue;
    }
    if (b[p] != '{') bad(p, "expected an event object");
    EventRow row;
    try {
      p = scan_event(b, p, n, row);
    } catch (const Incomplete&) {  // p is still the event's start
      return {p, false, false};
    }
    cols.push(row);
    need_comma = true;
    after_comma = false;
  }
}

}  // namespace

// Scan the events of a traceEvents array held in data, from pos: the columns above for every
// complete event, where to resume once more bytes are read, and whether the array closed.
nb::dict scan_events(nb::handle data_, size_t pos, bool need_comma, size_t end) {
  const View data(data_);
  const size_t n = end != 0 && end < data.size() ? end : data.size();  // end: scan [pos, end)
  EventColumns cols;
  ScanEnd at{pos, false, need_comma};
  {
    nb::gil_scoped_release nogil;  // the view keeps the buffer alive
    at = scan_array(data.data(), pos, n, need_comma, cols);
  }
  nb::dict d;
  cols.into(d);
  d["resume"] = at.resume;
  d["closed"] = at.closed;
  d["need_comma"] = at.need_comma;
  return d;
}

}  // namespace gs
