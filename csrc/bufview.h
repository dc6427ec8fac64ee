// A read-only view of a Python object's bytes (bytes, a memoryview of a mapped file, a numpy
// column) through the buffer protocol, for the trace-event scanner and rewriter.
#pragma once

#include <Python.h>

#include <cstddef>

#include "common.h"

namespace gs {

// A read-only view of an object's bytes through the buffer protocol, held while it lives (a
// mapped file's memoryview cannot be closed under it). Made and released with the GIL held.
class View {
 public:
  explicit View(nb::handle h) {
    if (PyObject_GetBuffer(h.ptr(), &v_, PyBUF_SIMPLE) != 0) throw nb::python_error();
  }
  ~View() { PyBuffer_Release(&v_); }
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  const char* data() const { return static_cast<const char*>(v_.buf); }
  size_t size() const { return static_cast<size_t>(v_.len); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(v_.buf); }

 private:
  Py_buffer v_;
};

}  // namespace gs
