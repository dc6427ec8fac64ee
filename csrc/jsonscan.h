// A byte-level JSON scanner for trace events (annotate-trace): no CUDA and no Python here, it
// builds and runs on any CPU. It finds the end of a value, validating it as JSON in the same
// pass, and steps through an object's members, so that the few fields the annotator reads can
// be picked out of an event without building objects for the rest.
//
// The input may end inside a value (a trace is read in chunks): the scanner then throws
// ev::Incomplete, and the caller resumes at the start of the event once more bytes are read.
// Malformed input throws std::runtime_error("json:<offset>:<what>").
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gs {

namespace ev {

struct Incomplete {};  // the buffer ends inside an event: read more and resume at its start

inline size_t skip_ws(const char* b, size_t p, size_t n) {
  while (p < n && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t')) ++p;
  return p;
}

[[noreturn]] inline void bad(size_t at, const char* what) {
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
inline size_t value_end(const char* b, size_t p, size_t n) {
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

inline int8_t cat_code(const char* b, size_t s, size_t e) {
  static const char* cats[] = {"kernel", "gpu_memcpy", "gpu_memset", "ac2g", "cuda_runtime",
                               "gpu_user_annotation"};
  for (int i = 0; i < 6; ++i) {
    if (key_is(b, s, e, cats[i])) return static_cast<int8_t>(i + 1);
  }
  return 0;
}

// Step to the next member of an object whose '{' was just passed (``first``) or whose last
// value ended at pos: false at the object's '}' (pos then just past it); else the key spans
// [ks, ke) and its value starts at vs. Exactly one ',' between members, none trailing.
inline bool next_member(const char* b, size_t& pos, size_t n, size_t& ks, size_t& ke,
                        size_t& vs, bool& first) {
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

}  // namespace ev

}  // namespace gs
