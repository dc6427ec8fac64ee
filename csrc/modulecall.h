// nn.Module.__call__ as a C callable that opens each module call's scope (modulecall.cpp).
#pragma once

#include <cstddef>

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace gs {

// The type: module_call(real, resolve, outer_return, marks, cache, main_thread).
nb::object module_call_type();
// A new (module, root, outer scope) -> scope cache, a capsule kept across capture windows.
nb::object module_scope_cache();
size_t module_scope_cache_size(nb::object cache);
// Drop the entries whose module or root is gone; returns how many.
size_t module_scope_cache_prune(nb::object cache);

}  // namespace gs
