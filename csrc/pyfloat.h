// repr(float) as Python writes it (shortest round-trip digits; exponent form below 1e-4 and
// from 1e16; ".0" on integral values): for text that must equal what Python would print.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace gs {

inline std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, r.ptr);  // shortest round-trip digits: "-1.2345e+02"
  bool neg = !s.empty() && s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits.push_back(s[i]);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    size_t ip = static_cast<size_t>(exp) + 1;
    if (digits.size() <= ip) {
      out += digits + std::string(ip - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, ip) + "." + digits.substr(ip);
    }
  }
  return out;
}

}  // namespace gs
