// graphscope.mark_kernels as a C type with a content-keyed scope cache (markscope.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace gs {

// The type object (named mark_kernels, documented by `doc`).
nb::object mark_kernels_type(const char* doc);
// Python's validity check, for annotations entered outside a capture window.
void mark_kernels_setup(nb::object check);
// The running capture session, handed over for its window (open raises if one is held): the
// type calls its resolve(annotation, parent, backward) -> id and push(scope)/pop().
void session_open(nb::object session);
void session_close();
nb::object active_session();  // the session held, or None
// graphscope._opwatch's own_note (0: Python's push/pop).
void mark_kernels_use_native(uintptr_t own_note);
size_t mark_kernels_cache_size();

struct ThreadState;
// Whether an annotated capture is running (a session is held).
bool annotating();
// Push/pop a scope on this thread's stack, then note ownership (graphscope._opwatch's
// own_note) or, on the hook path, call the session's push/pop. False with a Python error set.
bool scope_push(ThreadState& t, int64_t sid);
bool scope_pop();

}  // namespace gs
