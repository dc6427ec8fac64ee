// graphscope.mark_kernels as a C type: the `with` statement users write around every block.
//
// Entering a scope inside an annotated capture needs the scope id for (the thread's current
// scope, the annotation, backward=). graphscope/annotate/scopes.py interns scopes by the
// annotation's pickle; this type keeps a cache in front of it, keyed by the annotation's
// content, so a scope entered before costs a hash of a small dict and a native push, without
// running Python. Only annotations whose content decides their pickle are cached: a str, or a
// dict (exact type) with str keys and str/int/float/bool/None values, compared in order, by
// exact type, floats by their bits (so -0.0 and 0.0 stay apart, as their pickles do). Anything
// else, and every first sight, goes to the Python resolver, which normalises and validates
// (MK12) and interns. Outside an annotated capture nothing is pushed (MK3), but an annotation
// that is not plainly valid is still checked by Python.
//
// The push/pop go to graphscope._opwatch's ownership keeper (C function pointers) when the
// native observer attributes backward, else to Python's annotate.backward.push/pop. All of
// this runs with the GIL held.

#include "markscope.h"

#include <Python.h>

#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "scopes.h"

namespace gs {
namespace {

using PushFn = void (*)(int64_t);
using PopFn = void (*)();

struct Hooks {
  PyObject* state_dict = nullptr;  // graphscope.annotate.state.__dict__ (ACTIVE lives there)
  PyObject* active_key = nullptr;  // "ACTIVE"
  PyObject* resolve = nullptr;     // (annotation, parent, backward) -> scope id
  PyObject* check = nullptr;       // (annotation) -> raises AnnotationError if invalid
  PyObject* push = nullptr;        // Python push(scope) / pop() (the hook path)
  PyObject* pop = nullptr;
  PushFn native_push = nullptr;    // graphscope._opwatch own_push / own_pop
  PopFn native_pop = nullptr;
} hooks;

// ---- the content-keyed cache: (parent, backward, annotation) -> scope id ----

struct Entry {
  int64_t parent;
  bool backward;
  PyObject* key;  // owned: the str, or a tuple (k0, v0, k1, v1, ...) of the dict's items
  int64_t sid;
};
std::unordered_multimap<uint64_t, Entry> cache;
constexpr size_t kCacheMax = 1 << 16;

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// A value whose exact type and value decide its pickle; its hash (with the type) or false.
bool simple_hash(PyObject* v, uint64_t* out) {
  PyTypeObject* t = Py_TYPE(v);
  uint64_t h = reinterpret_cast<uintptr_t>(t);
  if (t == &PyUnicode_Type || t == &PyLong_Type) {
    Py_hash_t x = PyObject_Hash(v);
    if (x == -1) {
      PyErr_Clear();
      return false;
    }
    h = mix(h, static_cast<uint64_t>(x));
  } else if (t == &PyFloat_Type) {
    double d = PyFloat_AS_DOUBLE(v);
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    h = mix(h, bits);
  } else if (v == Py_None || v == Py_True || v == Py_False) {
    h = mix(h, reinterpret_cast<uintptr_t>(v));
  } else {
    return false;
  }
  *out = h;
  return true;
}

bool simple_equal(PyObject* a, PyObject* b) {
  if (a == b) return true;
  PyTypeObject* t = Py_TYPE(a);
  if (t != Py_TYPE(b)) return false;
  if (t == &PyFloat_Type) {
    double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  if (t == &PyUnicode_Type || t == &PyLong_Type) {
    int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) PyErr_Clear();
    return r == 1;
  }
  return false;  // None/True/False: only identical objects are equal
}

// The annotation's content hash, or false when it is not cacheable.
bool content_hash(PyObject* ann, uint64_t* out) {
  if (PyUnicode_CheckExact(ann)) return simple_hash(ann, out);
  if (!PyDict_CheckExact(ann)) return false;
  uint64_t h = 0x51ed270b27c4f3a1ull ^ static_cast<uint64_t>(PyDict_GET_SIZE(ann));
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(ann, &pos, &k, &v)) {
    uint64_t hk, hv;
    if (!PyUnicode_CheckExact(k) || !simple_hash(k, &hk) || !simple_hash(v, &hv)) return false;
    h = mix(mix(h, hk), hv);
  }
  *out = h;
  return true;
}

bool content_equal(PyObject* ann, PyObject* key) {
  if (PyUnicode_CheckExact(ann)) return PyUnicode_CheckExact(key) && simple_equal(ann, key);
  if (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) != 2 * PyDict_GET_SIZE(ann))
    return false;
  Py_ssize_t pos = 0, i = 0;
  PyObject *k, *v;
  while (PyDict_Next(ann, &pos, &k, &v)) {
    if (!simple_equal(k, PyTuple_GET_ITEM(key, i)) ||
        !simple_equal(v, PyTuple_GET_ITEM(key, i + 1)))
      return false;
    i += 2;
  }
  return true;
}

PyObject* content_key(PyObject* ann) {  // a new reference, or nullptr with an error set
  if (PyUnicode_CheckExact(ann)) {
    Py_INCREF(ann);
    return ann;
  }
  PyObject* t = PyTuple_New(2 * PyDict_GET_SIZE(ann));
  if (t == nullptr) return nullptr;
  Py_ssize_t pos = 0, i = 0;
  PyObject *k, *v;
  while (PyDict_Next(ann, &pos, &k, &v)) {
    Py_INCREF(k);
    Py_INCREF(v);
    PyTuple_SET_ITEM(t, i, k);
    PyTuple_SET_ITEM(t, i + 1, v);
    i += 2;
  }
  return t;
}

bool lookup(uint64_t h, PyObject* ann, int64_t parent, bool backward, int64_t* sid) {
  auto range = cache.equal_range(mix(mix(h, static_cast<uint64_t>(parent)), backward));
  for (auto it = range.first; it != range.second; ++it) {
    const Entry& e = it->second;
    if (e.parent == parent && e.backward == backward && content_equal(ann, e.key)) {
      *sid = e.sid;
      return true;
    }
  }
  return false;
}

void remember(uint64_t h, PyObject* ann, int64_t parent, bool backward, int64_t sid) {
  if (cache.size() >= kCacheMax) return;  // the Python resolver still answers
  PyObject* key = content_key(ann);
  if (key == nullptr) {
    PyErr_Clear();
    return;
  }
  cache.emplace(mix(mix(h, static_cast<uint64_t>(parent)), backward),
                Entry{parent, backward, key, sid});
}

// ---- the type ----

struct MarkKernels {
  PyObject_HEAD
  PyObject* ann;
  int backward;
  int pushed;  // scopes this object pushed and has not popped yet (re-entry nests)
};

bool annotating() {
  PyObject* a = hooks.state_dict ? PyDict_GetItemWithError(hooks.state_dict, hooks.active_key)
                                 : nullptr;
  if (a == nullptr) PyErr_Clear();
  return a != nullptr && a != Py_None;
}

PyObject* mk_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  // mark_kernels(annotation, *, backward=True), parsed by hand (this runs per block entered)
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject* ann = n >= 1 ? PyTuple_GET_ITEM(args, 0) : nullptr;
  if (n > 1) {
    PyErr_Format(PyExc_TypeError,
                 "mark_kernels() takes 1 positional argument (annotation), %zd given", n);
    return nullptr;
  }
  int backward = 1;
  if (kwds != nullptr && PyDict_GET_SIZE(kwds) > 0) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwds, &pos, &k, &v)) {
      if (PyUnicode_Check(k) && PyUnicode_CompareWithASCIIString(k, "backward") == 0) {
        backward = PyObject_IsTrue(v);
        if (backward < 0) return nullptr;
      } else if (PyUnicode_Check(k) && PyUnicode_CompareWithASCIIString(k, "annotation") == 0 &&
                 ann == nullptr) {
        ann = v;
      } else {
        PyErr_Format(PyExc_TypeError, "mark_kernels() got an unexpected keyword argument %R",
                     k);
        return nullptr;
      }
    }
  }
  if (ann == nullptr) {
    PyErr_SetString(PyExc_TypeError,
                    "mark_kernels() missing 1 required positional argument: 'annotation'");
    return nullptr;
  }
  auto* self = reinterpret_cast<MarkKernels*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  Py_INCREF(ann);
  self->ann = ann;
  self->backward = backward;
  self->pushed = 0;
  return reinterpret_cast<PyObject*>(self);
}

int mk_traverse(PyObject* o, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<MarkKernels*>(o)->ann);
  Py_VISIT(Py_TYPE(o));
  return 0;
}

int mk_clear(PyObject* o) {
  Py_CLEAR(reinterpret_cast<MarkKernels*>(o)->ann);
  return 0;
}

void mk_dealloc(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  mk_clear(o);
  tp->tp_free(o);
  Py_DECREF(tp);
}

bool push_scope(int64_t sid) {
  if (hooks.native_push != nullptr) {
    try {
      hooks.native_push(sid);
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return false;
    }
    return true;
  }
  if (hooks.push == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "graphscope: mark_kernels is not set up");
    return false;
  }
  PyObject* s = PyLong_FromLongLong(sid);
  if (s == nullptr) return false;
  PyObject* r = PyObject_CallOneArg(hooks.push, s);
  Py_DECREF(s);
  Py_XDECREF(r);
  return r != nullptr;
}

bool pop_scope() {
  if (hooks.native_pop != nullptr) {
    try {
      hooks.native_pop();
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return false;
    }
    return true;
  }
  if (hooks.pop == nullptr) return true;
  PyObject* r = PyObject_CallNoArgs(hooks.pop);
  Py_XDECREF(r);
  return r != nullptr;
}

PyObject* mk_enter(PyObject* o, PyObject*) {
  auto* self = reinterpret_cast<MarkKernels*>(o);
  PyObject* ann = self->ann;
  uint64_t h = 0;
  bool cacheable = content_hash(ann, &h);
  if (!annotating()) {
    // MK3: nothing to tag. A plainly valid annotation needs no check; others get MK12's.
    if (!cacheable) {
      if (hooks.check == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "graphscope: mark_kernels is not set up");
        return nullptr;
      }
      PyObject* r = PyObject_CallOneArg(hooks.check, ann);
      if (r == nullptr) return nullptr;
      Py_DECREF(r);
    }
    Py_INCREF(o);
    return o;
  }
  int64_t parent = tls.current();
  bool bw = self->backward != 0;
  int64_t sid = -1;
  if (!cacheable || !lookup(h, ann, parent, bw, &sid)) {
    PyObject* r = PyObject_CallFunction(hooks.resolve, "OLO", ann,
                                        static_cast<long long>(parent), bw ? Py_True : Py_False);
    if (r == nullptr) return nullptr;
    sid = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (sid == -1 && PyErr_Occurred()) return nullptr;
    if (cacheable) remember(h, ann, parent, bw, sid);
  }
  if (!push_scope(sid)) return nullptr;
  self->pushed++;
  Py_INCREF(o);
  return o;
}

PyObject* mk_exit(PyObject* o, PyObject* const*, Py_ssize_t) {
  auto* self = reinterpret_cast<MarkKernels*>(o);
  if (self->pushed > 0) {
    self->pushed--;
    if (!pop_scope()) return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* mk_get_annotation(PyObject* o, void*) {
  PyObject* a = reinterpret_cast<MarkKernels*>(o)->ann;
  Py_INCREF(a);
  return a;
}

PyObject* mk_get_backward(PyObject* o, void*) {
  return PyBool_FromLong(reinterpret_cast<MarkKernels*>(o)->backward);
}

PyMethodDef mk_methods[] = {
    {"__enter__", mk_enter, METH_NOARGS, "Open the scope (inside an annotated capture)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mk_exit)),
     METH_FASTCALL, "Close the scope this object opened."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef mk_getset[] = {
    {"annotation", mk_get_annotation, nullptr, "The annotation as given.", nullptr},
    {"backward", mk_get_backward, nullptr, "Whether backward work is tagged too.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

void mark_kernels_setup(nb::object state_module, nb::object resolve, nb::object check,
                        nb::object push, nb::object pop) {
  auto keep = [](PyObject*& slot, PyObject* v) {
    Py_XINCREF(v);
    Py_XDECREF(slot);
    slot = v;
  };
  keep(hooks.state_dict, PyModule_GetDict(state_module.ptr()));
  if (hooks.active_key == nullptr) hooks.active_key = PyUnicode_InternFromString("ACTIVE");
  keep(hooks.resolve, resolve.ptr());
  keep(hooks.check, check.ptr());
  keep(hooks.push, push.ptr());
  keep(hooks.pop, pop.ptr());
}

void mark_kernels_use_native(uintptr_t push, uintptr_t pop) {
  hooks.native_push = reinterpret_cast<PushFn>(push);
  hooks.native_pop = reinterpret_cast<PopFn>(pop);
  if ((push == 0) != (pop == 0)) {
    hooks.native_push = nullptr;
    hooks.native_pop = nullptr;
    throw std::runtime_error("state:0:mark_kernels_use_native needs both addresses or none");
  }
}

size_t mark_kernels_cache_size() { return cache.size(); }

nb::object mark_kernels_type(const char* doc) {
  static PyType_Slot slots[] = {
      {Py_tp_new, reinterpret_cast<void*>(mk_new)},
      {Py_tp_dealloc, reinterpret_cast<void*>(mk_dealloc)},
      {Py_tp_traverse, reinterpret_cast<void*>(mk_traverse)},
      {Py_tp_clear, reinterpret_cast<void*>(mk_clear)},
      {Py_tp_methods, mk_methods},
      {Py_tp_getset, mk_getset},
      {Py_tp_doc, nullptr},
      {0, nullptr}};
  slots[6].pfunc = const_cast<char*>(doc);
  static PyType_Spec spec = {"graphscope._native.mark_kernels", sizeof(MarkKernels), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, slots};
  PyObject* t = PyType_FromSpec(&spec);
  if (t == nullptr) throw nb::python_error();
  return nb::steal(t);
}

}  // namespace gs
