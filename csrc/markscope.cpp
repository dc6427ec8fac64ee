// graphscope.mark_kernels as a C type: the `with` statement users write around every block.
//
// Entering a scope inside an annotated capture needs the scope id for (the thread's current
// scope, the annotation, backward=). graphscope/annotate/scopes.py interns scopes by the
// annotation's pickle; this type keeps a cache in front of it, keyed by the annotation's
// content, so a scope entered before costs encoding and hashing a small dict, one table slot
// and a native push, without running Python. Only annotations whose content decides their
// pickle are cached: a str, or a dict (exact type) with str keys and str/int (64-bit)/float/
// bool/None values, compared in order, by exact type, floats by their bits (so -0.0 and 0.0
// stay apart, as their pickles do). Anything
// else, and every first sight, goes to the Python resolver, which normalises and validates
// (MK12) and interns. Outside an annotated capture nothing is pushed (MK3), but an annotation
// that is not plainly valid is still checked by Python.
//
// The push/pop go to the thread's native scope stack, each followed by graphscope._opwatch's
// ownership note (a C function pointer) when the native observer attributes backward, else to
// Python's annotate.backward.push/pop. All of this runs with the GIL held.

#include "markscope.h"

#include <Python.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "scopes.h"

namespace gs {
namespace {

using NoteFn = void (*)(int64_t);

struct Hooks {
  PyObject* state_dict = nullptr;  // graphscope.annotate.state.__dict__ (ACTIVE lives there)
  PyObject* active_key = nullptr;  // "ACTIVE"
  PyObject* resolve = nullptr;     // (annotation, parent, backward) -> scope id
  PyObject* check = nullptr;       // (annotation) -> raises AnnotationError if invalid
  PyObject* push = nullptr;        // Python push(scope) / pop() (the hook path)
  PyObject* pop = nullptr;
  NoteFn own_note = nullptr;       // graphscope._opwatch's own_note (null: Python push/pop)
} hooks;

// ---- the content-keyed cache: (parent, backward, annotation) -> scope id ----
//
// An annotation is cached by its canonical bytes: a tag per value and the value itself (a str
// by its storage kind, length and code units; an int that fits in 64 bits; a float by its bits;
// True/False/None by tag), a dict as its size and items in order. Equal bytes mean equal
// content by exact type and value, so the same pickle: a hit is exact (the bytes are compared,
// not just hashed). Anything else is not cached and goes to the Python resolver, as does a
// miss (an equal str in another storage kind is only a miss, never a wrong hit). The table is
// open-addressed with the bytes inline in the slot (up to kInline), so a lookup amid capture
// work touches one slot instead of a chain of Python objects. Programs enter their scopes in
// the same order every step, so each slot notes which slot was looked up after it, and a hit
// prefetches that one: the next entry's slot is in cache when Python gets there.

constexpr size_t kInline = 80;
constexpr uint32_t kNone = UINT32_MAX;
struct Slot {
  uint64_t fp = 0;       // hash of (bytes, parent, backward)
  int64_t parent = 0;
  int64_t sid = -1;      // -1: empty
  uint32_t len = 0;
  uint32_t next = kNone;  // the slot looked up after this one last time
  uint8_t backward = 0;
  char inl[kInline];     // the bytes when len <= kInline
  char* big = nullptr;   // else here (owned)
  const char* bytes() const { return len <= kInline ? inl : big; }
};
static_assert(sizeof(Slot) <= 128, "a slot is two cache lines at most");
std::vector<Slot> table;  // capacity a power of two, at most half full
size_t used = 0;
uint32_t last_hit = kNone;  // the slot of the previous lookup
constexpr size_t kCacheMax = 1 << 16;
std::string scratch;  // the annotation being looked up (the GIL serialises every use)

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

inline uint64_t fmix(uint64_t h) {  // splitmix64's finaliser
  h ^= h >> 30; h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27; h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x243f6a8885a308d3ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  uint64_t w = 0;
  std::memcpy(&w, p + i, n - i);
  return fmix(h ^ w);
}

inline void put_len(std::string& out, size_t n) {  // LEB128
  do {
    char b = static_cast<char>(n & 0x7f);
    n >>= 7;
    out.push_back(n ? static_cast<char>(b | 0x80) : b);
  } while (n);
}

inline void put_str(std::string& out, PyObject* s) {
  const int kind = PyUnicode_KIND(s);
  const Py_ssize_t n = PyUnicode_GET_LENGTH(s);
  out.push_back('s');
  out.push_back(static_cast<char>(kind));
  put_len(out, static_cast<size_t>(n));
  out.append(static_cast<const char*>(PyUnicode_DATA(s)), static_cast<size_t>(n) * kind);
}

// A value whose exact type and value decide its pickle, appended; false if it is not one.
bool put_value(std::string& out, PyObject* v) {
  PyTypeObject* t = Py_TYPE(v);
  if (t == &PyUnicode_Type) {
    put_str(out, v);
  } else if (t == &PyLong_Type) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    out.push_back('i');
    out.append(reinterpret_cast<const char*>(&x), sizeof x);
  } else if (t == &PyFloat_Type) {
    double d = PyFloat_AS_DOUBLE(v);
    out.push_back('f');
    out.append(reinterpret_cast<const char*>(&d), sizeof d);
  } else if (v == Py_True) {
    out.push_back('t');
  } else if (v == Py_False) {
    out.push_back('u');
  } else if (v == Py_None) {
    out.push_back('n');
  } else {
    return false;
  }
  return true;
}

// The annotation's canonical bytes into `out`; false when it is not cacheable.
bool encode(PyObject* ann, std::string& out) {
  out.clear();
  if (PyUnicode_CheckExact(ann)) {
    put_str(out, ann);
    return true;
  }
  if (!PyDict_CheckExact(ann)) return false;
  out.push_back('d');
  put_len(out, static_cast<size_t>(PyDict_GET_SIZE(ann)));
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(ann, &pos, &k, &v)) {
    if (!PyUnicode_CheckExact(k)) return false;
    put_str(out, k);
    if (!put_value(out, v)) return false;
  }
  return true;
}

// Whether encode() would take it, without encoding (the path outside a capture).
bool plainly_valid(PyObject* ann) {
  if (PyUnicode_CheckExact(ann)) return true;
  if (!PyDict_CheckExact(ann)) return false;
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(ann, &pos, &k, &v)) {
    if (!PyUnicode_CheckExact(k)) return false;
    PyTypeObject* t = Py_TYPE(v);
    if (t == &PyLong_Type) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
    } else if (t != &PyUnicode_Type && t != &PyFloat_Type && v != Py_True && v != Py_False &&
               v != Py_None) {
      return false;
    }
  }
  return true;
}

inline uint64_t fingerprint(const std::string& key, int64_t parent, bool backward) {
  return fmix(mix(mix(hash_bytes(key.data(), key.size()), static_cast<uint64_t>(parent)),
                  backward ? 1 : 2));
}

// This lookup was at slot i: note it as the previous one's successor, prefetch i's.
inline void followed_by(uint32_t i) {
  if (last_hit != kNone && last_hit != i) table[last_hit].next = i;
  last_hit = i;
  if (table[i].next != kNone) __builtin_prefetch(&table[table[i].next]);
}

bool lookup(const std::string& key, uint64_t fp, int64_t parent, bool backward, int64_t* sid) {
  if (table.empty()) return false;
  const size_t mask = table.size() - 1;
  for (size_t i = fp & mask;; i = (i + 1) & mask) {
    const Slot& s = table[i];
    if (s.sid < 0) return false;
    if (s.fp == fp && s.parent == parent && s.backward == backward && s.len == key.size() &&
        std::memcmp(s.bytes(), key.data(), key.size()) == 0) {
      *sid = s.sid;
      followed_by(static_cast<uint32_t>(i));
      return true;
    }
  }
}

uint32_t place(Slot&& s) {
  const size_t mask = table.size() - 1;
  size_t i = s.fp & mask;
  while (table[i].sid >= 0) i = (i + 1) & mask;
  s.next = kNone;  // indices change when the table grows
  table[i] = std::move(s);
  return static_cast<uint32_t>(i);
}

void remember(const std::string& key, uint64_t fp, int64_t parent, bool backward, int64_t sid) {
  if (used >= kCacheMax || sid < 0) return;  // the Python resolver still answers
  if ((used + 1) * 2 > table.size()) {
    std::vector<Slot> old(std::max<size_t>(1024, table.size() * 2));
    old.swap(table);
    for (Slot& s : old)
      if (s.sid >= 0) place(std::move(s));
    last_hit = kNone;
  }
  Slot s;
  s.fp = fp;
  s.parent = parent;
  s.sid = sid;
  s.backward = backward ? 1 : 0;
  s.len = static_cast<uint32_t>(key.size());
  if (key.size() <= kInline) {
    std::memcpy(s.inl, key.data(), key.size());
  } else {
    s.big = new char[key.size()];
    std::memcpy(s.big, key.data(), key.size());
  }
  followed_by(place(std::move(s)));
  ++used;
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

bool push_scope(ThreadState& t, int64_t sid) {
  if (hooks.own_note != nullptr) {
    try {
      t.scopes.push_back(sid);
      hooks.own_note(sid);
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
  if (hooks.own_note != nullptr) {
    try {
      ThreadState& t = tls;
      if (!t.scopes.empty()) t.scopes.pop_back();
      hooks.own_note(t.current());
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
  if (!annotating()) {
    // MK3: nothing to tag. A plainly valid annotation needs no check; others get MK12's.
    if (!plainly_valid(ann)) {
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
  const bool cacheable = encode(ann, scratch);
  ThreadState& t = tls;
  int64_t parent = t.current();
  bool bw = self->backward != 0;
  int64_t sid = -1;
  const uint64_t fp = cacheable ? fingerprint(scratch, parent, bw) : 0;
  if (!cacheable || !lookup(scratch, fp, parent, bw, &sid)) {
    // the resolver runs Python, which may enter another mark_kernels: keep this key aside
    std::string key = cacheable ? scratch : std::string();
    PyObject* r = PyObject_CallFunction(hooks.resolve, "OLO", ann,
                                        static_cast<long long>(parent), bw ? Py_True : Py_False);
    if (r == nullptr) return nullptr;
    sid = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (sid == -1 && PyErr_Occurred()) return nullptr;
    if (cacheable) remember(key, fp, parent, bw, sid);
  }
  if (!push_scope(t, sid)) return nullptr;
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

void mark_kernels_use_native(uintptr_t own_note) {
  hooks.own_note = reinterpret_cast<NoteFn>(own_note);
}

size_t mark_kernels_cache_size() { return used; }

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
