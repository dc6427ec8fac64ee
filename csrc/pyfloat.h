// repr(float) as Python writes it (shortest round-trip digits; exponent form below 1e-4 and
// from 1e16; ".0" on integral values): for text that must equal what Python would print.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>

namespace gs {

// Writes repr(v) at out (at least 32 bytes) and returns its length. No allocation.
inline size_t py_float_repr_to(double v, char* out) {
  char* o = out;
  auto put = [&](const char* s) { while (*s) *o++ = *s++; };
  if (std::isnan(v)) { put("nan"); return static_cast<size_t>(o - out); }
  if (std::isinf(v)) { put(v < 0 ? "-inf" : "inf"); return static_cast<size_t>(o - out); }
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  const char* s = buf;
  const char* end = r.ptr;  // "-d.ddde+XX": the shortest digits that round-trip
  if (*s == '-') { *o++ = '-'; ++s; }
  char digits[24];
  size_t nd = 0;
  while (s < end && *s != 'e') {
    if (*s != '.') digits[nd++] = *s;
    ++s;
  }
  int exp = 0;
  bool eneg = false;
  if (s < end) {  // 'e'
    ++s;
    if (*s == '-' || *s == '+') eneg = *s++ == '-';
    while (s < end) exp = exp * 10 + (*s++ - '0');
  }
  if (eneg) exp = -exp;
  while (nd > 1 && digits[nd - 1] == '0') --nd;
  if (exp < -4 || exp >= 16) {
    *o++ = digits[0];
    if (nd > 1) {
      *o++ = '.';
      for (size_t i = 1; i < nd; ++i) *o++ = digits[i];
    }
    *o++ = 'e';
    *o++ = exp < 0 ? '-' : '+';
    int a = exp < 0 ? -exp : exp;
    if (a >= 100) *o++ = static_cast<char>('0' + a / 100);
    *o++ = static_cast<char>('0' + (a / 10) % 10);
    *o++ = static_cast<char>('0' + a % 10);
  } else if (exp < 0) {
    *o++ = '0';
    *o++ = '.';
    for (int i = 0; i < -exp - 1; ++i) *o++ = '0';
    for (size_t i = 0; i < nd; ++i) *o++ = digits[i];
  } else {
    size_t ip = static_cast<size_t>(exp) + 1;
    for (size_t i = 0; i < ip; ++i) *o++ = i < nd ? digits[i] : '0';
    *o++ = '.';
    if (nd > ip) {
      for (size_t i = ip; i < nd; ++i) *o++ = digits[i];
    } else {
      *o++ = '0';
    }
  }
  return static_cast<size_t>(o - out);
}

inline std::string py_float_repr(double v) {
  char b[48];
  return std::string(b, py_float_repr_to(v, b));
}

}  // namespace gs
