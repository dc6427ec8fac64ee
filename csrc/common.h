// Shared helpers of the native extension: nanobind, column buffers, error strings.
//
// Errors cross into Python as RuntimeError("<domain>:<code>:<text>"); graphscope/native.py
// maps the domain (cupti, cuda, notloaded, state, version, json) onto GraphscopeError classes.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace gs {

template <typename T>
nb::bytes as_bytes(const std::vector<T>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace gs
