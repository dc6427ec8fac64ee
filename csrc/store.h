// The exec-id annotation map's hot loop (store.cpp).
#pragma once

#include <cstddef>

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace gs {

// live[nodes[i]] = anns[index[i]] (the dict itself) for every i; returns the count.
size_t annotate_live(nb::dict live, nb::bytes nodes, nb::bytes index, nb::list anns);

}  // namespace gs
