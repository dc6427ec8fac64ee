// graphscope.mark_kernels as a C type with a content-keyed scope cache (markscope.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace gs {

// The type object (named mark_kernels, documented by `doc`).
nb::object mark_kernels_type(const char* doc);
// Python's side: the attribution object (its `active` is the running capture window), the
// resolver (annotation, parent, backward) -> id, the validity check, and push/pop for the hook
// path.
void mark_kernels_setup(nb::object attribution, nb::object resolve, nb::object check,
                        nb::object push, nb::object pop);
// graphscope._opwatch's own_note (0: Python's push/pop).
void mark_kernels_use_native(uintptr_t own_note);
size_t mark_kernels_cache_size();

struct ThreadState;
// Whether an annotated capture is running (the attribution's `active` is not None).
bool annotating();
// Push/pop a scope on this thread's stack, then note ownership (graphscope._opwatch's
// own_note) or, on the hook path, call Python's push/pop. False with a Python error set.
bool scope_push(ThreadState& t, int64_t sid);
bool scope_pop();

}  // namespace gs
