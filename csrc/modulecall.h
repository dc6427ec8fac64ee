// nn.Module.__call__ as a C callable that opens each module call's scope (modulecall.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace gs {

// The capture meter's (time_ns, scope) marks, one pair per scope change, kept as plain integers:
// a Python list of tuples made two tuples and four ints per module call, and with them the
// collector's young-generation passes (28 in a 67-bucket ladder's capture loop).
struct MarkLog {
  std::vector<int64_t> v;  // time_ns, scope, time_ns, scope, ...
  void add(int64_t t, int64_t s) {
    v.push_back(t);
    v.push_back(s);
  }
  size_t size() const { return v.size() / 2; }
};
// graphscope._native.MarkLog
void bind_mark_log(nb::module_& m);

// The type: module_call(real, resolve, outer_return, marks, cache, main_thread).
nb::object module_call_type();
// (scoped calls, graphscope's own seconds in them) since the last reset (modulecall.cpp).
nb::tuple module_call_stats(bool reset);
// A new (module, root, outer scope) -> scope cache, a capsule kept across capture windows.
nb::object module_scope_cache();
size_t module_scope_cache_size(nb::object cache);
// Drop the entries whose module or root is gone; returns how many.
size_t module_scope_cache_prune(nb::object cache);

}  // namespace gs
