// The exec-id annotation map's hot loop (graphscope/annotate/store.py): key every exec node by
// its id with its scope's (shared) annotation dict; the live view gives each node its own
// [dict] copy when it is first read.
#include "store.h"

#include <Python.h>

#include <cstring>
#include <stdexcept>

namespace gs {

size_t annotate_live(nb::dict live, nb::bytes nodes, nb::bytes index, nb::list anns) {
  size_t n = nodes.size() / sizeof(uint64_t);
  if (nodes.size() % sizeof(uint64_t) != 0 || index.size() != n * sizeof(int32_t))
    throw std::runtime_error("state:0:annotate_live: nodes (u64) and index (i32) differ");
  const char* pn = nodes.c_str();
  const char* pi = index.c_str();
  Py_ssize_t na = PyList_GET_SIZE(anns.ptr());
  for (Py_ssize_t a = 0; a < na; ++a)
    if (!PyDict_Check(PyList_GET_ITEM(anns.ptr(), a)))
      throw std::runtime_error("state:0:annotate_live: annotations must be dicts");
  for (size_t i = 0; i < n; ++i) {
    uint64_t node;
    int32_t k;
    std::memcpy(&node, pn + i * sizeof node, sizeof node);
    std::memcpy(&k, pi + i * sizeof k, sizeof k);
    if (k < 0 || k >= na) throw std::runtime_error("state:0:annotate_live: index out of range");
    PyObject* key = PyLong_FromUnsignedLongLong(node);
    int rc = key ? PyDict_SetItem(live.ptr(), key, PyList_GET_ITEM(anns.ptr(), k)) : -1;
    Py_XDECREF(key);
    if (rc < 0) throw nb::python_error();
  }
  return n;
}

}  // namespace gs
