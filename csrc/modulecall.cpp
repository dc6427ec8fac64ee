// graphscope run's module scopes: `nn.Module.__call__` replaced, for one capture window, by a
// C callable that opens the scope of each module call (graphscope/capture/program/names.py
// says what the scopes are and how a module's is resolved).
//
// A Python wrapper cost about 4 us per module call (CPU: a frame, the arguments packed again,
// a cache key built and looked up, two weak references read, native push/pop and marks
// calls); a capture of a 16-layer decoder makes about 150 module calls, which made the
// wrapper a fifth of the capture's own time. Here a call that hits the cache costs a hash
// lookup, the push and pop (with the op observer's ownership note) and, while the capture
// meter marks scope changes, two (time, scope) tuples.
//
// The cache maps (module, the root it is called under, the scope it opens in) to the scope it
// opens (-1: none, deeper than the depth limit) and lives in a capsule that graphscope keeps
// across capture windows: a program's capture loop enters the same modules in the same scopes,
// so after the first capture every call hits. Entries hold weak references to the module and
// the root, whose callback counts the deaths of cached objects: a hit reads them only when a
// cached object died since the entry was last found alive (an address reused by a later object
// is then a miss), and the cache keeps no program object alive. A miss, and every call of an
// outermost module (no root open), goes to the Python resolver; so does a module that cannot
// be weakly referenced (never cached).
//
// The type is a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR), as functions are: calling a
// module looks `__call__` up on its type and calls it with the module prepended, with no
// bound method made. Inert (the original `__call__` called as it is) off the capturing thread
// and outside an annotated capture. All of it runs with the GIL held.

#include "modulecall.h"

#include <Python.h>
#include <structmember.h>

#include <cstddef>
#include <ctime>
#include <unordered_map>
#include <vector>

#include "markscope.h"
#include "scopes.h"
#include "ticks.h"

namespace gs {
namespace {

struct Key {
  const void* module;
  const void* root;
  int64_t outer;
  bool operator==(const Key& o) const {
    return module == o.module && root == o.root && outer == o.outer;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = reinterpret_cast<uintptr_t>(k.module) * 0x9E3779B97F4A7C15ull;
    h ^= reinterpret_cast<uintptr_t>(k.root) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.outer) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};
struct Entry {
  PyObject* module_ref = nullptr;  // weak references (owned), made with g_died as callback
  PyObject* root_ref = nullptr;
  int64_t sid = -1;
  uint64_t seen = 0;  // g_deaths when both referents were last found alive
};

// How many objects the cache's weak references pointed at have died: bumped by their
// callback. An entry whose `seen` equals it is valid without reading its two weak references
// (two objects, two cache lines, in every module call of a capture loop, where modules never
// die); after a death every entry is checked once more, its references read.
uint64_t g_deaths = 1;

PyObject* died(PyObject*, PyObject*) {
  ++g_deaths;  // with the GIL held (weakref callbacks run in the referent's dealloc)
  Py_RETURN_NONE;
}

PyMethodDef g_died_def = {"module_scope_cache_died", died, METH_O,
                          "graphscope: a module of the scope cache died"};
PyObject* g_died = nullptr;  // the callback (made once, kept for the process)

PyObject* died_callback() {
  if (g_died == nullptr) g_died = PyCFunction_New(&g_died_def, nullptr);
  return g_died;
}
using Cache = std::unordered_map<Key, Entry, KeyHash>;

constexpr const char* kCacheName = "graphscope.module_scope_cache";

void cache_free(PyObject* capsule) {  // runs with the GIL held (the capsule's dealloc)
  auto* c = static_cast<Cache*>(PyCapsule_GetPointer(capsule, kCacheName));
  if (c == nullptr) {
    PyErr_Clear();
    return;
  }
  for (auto& kv : *c) {
    Py_XDECREF(kv.second.module_ref);
    Py_XDECREF(kv.second.root_ref);
  }
  delete c;
}

// What the weak reference `ref` points at, as an address only compared, never used (nullptr:
// nothing any more).
const void* referent(PyObject* ref) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* o = nullptr;
  if (PyWeakref_GetRef(ref, &o) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  Py_XDECREF(o);
  return o;
#else
  PyObject* o = PyWeakref_GetObject(ref);
  return o == Py_None ? nullptr : o;
#endif
}

// Whether `ref` still points at `obj` (alive: the caller holds it).
bool refers_to(PyObject* ref, PyObject* obj) { return referent(ref) == obj; }

struct ModuleCall {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* real;          // the __call__ replaced
  PyObject* resolve;       // (module, args, parent root or None) -> (root, scope id or -1)
  PyObject* outer_return;  // (module, output) for each outermost module's return, or None
  PyObject* marks;         // a MarkLog or a list that gets (time_ns, scope) at each scope
                           // change, or None
  MarkLog* log;            // marks' log when it is a MarkLog (its reference held by marks)
  PyObject* cache_capsule;
  PyObject* set_eval_frame;  // torch._C._dynamo.eval_frame.set_eval_frame, or None
  Cache* cache;
  unsigned long main_thread;
  std::vector<PyObject*>* roots;  // the roots of the calls open (owned references)
};

// graphscope's own time in the calls it scoped (the cache lookup, the resolver on a miss, the
// scope's push and pop with their node-count notes, the marks; not the module's own call):
// what graphscope run's module scopes add to a capture loop (GraphWatch.overhead).
uint64_t g_calls = 0;
int64_t g_own_ticks = 0;

bool mark(ModuleCall* self, int64_t sid) {
  if (self->marks == nullptr || self->marks == Py_None) return true;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // time.time_ns()'s clock (the allocator's too)
  if (self->log != nullptr) {
    self->log->add(static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec, sid);
    return true;
  }
  PyObject* t = PyTuple_New(2);
  if (t == nullptr) return false;
  PyObject* ns = PyLong_FromLongLong(static_cast<long long>(ts.tv_sec) * 1000000000LL +
                                     ts.tv_nsec);
  PyObject* s = PyLong_FromLongLong(static_cast<long long>(sid));
  if (ns == nullptr || s == nullptr) {
    Py_XDECREF(ns);
    Py_XDECREF(s);
    Py_DECREF(t);
    return false;
  }
  PyTuple_SET_ITEM(t, 0, ns);
  PyTuple_SET_ITEM(t, 1, s);
  const int r = PyList_Append(self->marks, t);
  Py_DECREF(t);
  return r == 0;
}

// Call `fn(a, b, c)` (c may be nullptr) with dynamo's frame callback off, as its `disable`
// does: inside a compiled function's graph break dynamo would try to compile graphscope's own
// resolver frames (and fail on them).
PyObject* call_plain(ModuleCall* self, PyObject* fn, PyObject* a, PyObject* b, PyObject* c) {
  PyObject* prior = nullptr;
  if (self->set_eval_frame != Py_None) {
    prior = PyObject_CallOneArg(self->set_eval_frame, Py_None);
    if (prior == nullptr) return nullptr;
  }
  PyObject* r = PyObject_CallFunctionObjArgs(fn, a, b, c, nullptr);
  if (prior != nullptr) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject* back = PyObject_CallOneArg(self->set_eval_frame, prior);
    Py_DECREF(prior);
    if (back == nullptr) {  // the callback could not be put back: that error wins
      Py_XDECREF(et);
      Py_XDECREF(ev);
      Py_XDECREF(tb);
      Py_XDECREF(r);
      return nullptr;
    }
    Py_DECREF(back);
    PyErr_Restore(et, ev, tb);
  }
  return r;
}

// (root, scope id) for `module` called under `parent` (nullptr: no root open) from the
// resolver, caching it where the module is a submodule of `parent`. `root` is a new reference.
bool resolve(ModuleCall* self, PyObject* module, PyObject* const* args, Py_ssize_t nargs,
             PyObject* parent, int64_t outer, PyObject** root, int64_t* sid) {
  PyObject* pos = PyTuple_New(nargs);
  if (pos == nullptr) return false;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SET_ITEM(pos, i, args[i]);
  }
  PyObject* r = call_plain(self, self->resolve, module, pos, parent != nullptr ? parent : Py_None);
  Py_DECREF(pos);
  if (r == nullptr) return false;
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
    Py_DECREF(r);
    PyErr_SetString(PyExc_TypeError, "graphscope: the module scope resolver must return "
                                     "(root, scope id)");
    return false;
  }
  *root = PyTuple_GET_ITEM(r, 0);
  *sid = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 1));
  if (*sid == -1 && PyErr_Occurred()) {
    Py_DECREF(r);
    return false;
  }
  Py_INCREF(*root);
  Py_DECREF(r);
  if (parent != nullptr && *root == parent) {
    PyObject* cb = died_callback();
    PyObject* mref = cb != nullptr ? PyWeakref_NewRef(module, cb) : nullptr;
    PyObject* rref = mref != nullptr ? PyWeakref_NewRef(parent, cb) : nullptr;
    if (mref == nullptr || rref == nullptr) {  // not weakly referenceable: never cached
      Py_XDECREF(mref);
      PyErr_Clear();
      return true;
    }
    Entry& e = (*self->cache)[Key{module, parent, outer}];
    Py_XDECREF(e.module_ref);  // an entry for an object that is gone
    Py_XDECREF(e.root_ref);
    e = Entry{mref, rref, *sid, g_deaths};
  }
  return true;
}

// The cached scope of `module` called in scope `outer` inside `parent`'s root: true with the
// root (a new reference) and the scope id, false where the cache has no live entry.
inline bool cached(ModuleCall* self, PyObject* module, PyObject* parent, int64_t outer,
                   PyObject** root, int64_t* sid) {
  if (parent == nullptr) return false;
  auto it = self->cache->find(Key{module, parent, outer});
  if (it == self->cache->end()) return false;
  Entry& e = it->second;
  if (e.seen != g_deaths && !(refers_to(e.module_ref, module) && refers_to(e.root_ref, parent)))
    return false;
  e.seen = g_deaths;
  Py_INCREF(parent);
  *root = parent;
  *sid = e.sid;
  return true;
}

// The call's root stacked (the reference moves there) and its scope opened and marked; false
// with the error set and nothing left open.
inline bool enter_call(ModuleCall* self, ThreadState& t, PyObject* root, int64_t sid) {
  self->roots->push_back(root);
  if (sid >= 0 && !scope_push(t, sid)) {
    self->roots->pop_back();
    Py_DECREF(root);
    return false;
  }
  if (sid >= 0 && !mark(self, sid)) {  // closed again, the mark's error kept
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    scope_pop();
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    self->roots->pop_back();
    Py_DECREF(root);
    return false;
  }
  return true;
}

// The call's root unstacked and its scope closed, `outer` marked, however the call ended (the
// call's own error wins); an outermost module's output handed to outer_return. Returns `out`,
// or null with the error set.
inline PyObject* leave_call(ModuleCall* self, PyObject* module, int64_t sid, int64_t outer,
                            PyObject* out) {
  PyObject* root = self->roots->back();
  self->roots->pop_back();
  Py_DECREF(root);
  if (sid >= 0) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    const bool ok = scope_pop() && mark(self, outer);
    if (out == nullptr) {
      PyErr_Restore(et, ev, tb);
    } else if (!ok) {
      Py_XDECREF(et);
      Py_XDECREF(ev);
      Py_XDECREF(tb);
      Py_DECREF(out);
      return nullptr;
    }
  }
  if (out != nullptr && self->roots->empty() && self->outer_return != Py_None) {
    PyObject* r = call_plain(self, self->outer_return, module, out, nullptr);
    if (r == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(r);
  }
  return out;
}

PyObject* mc_vectorcall(PyObject* o, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<ModuleCall*>(o);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "Module.__call__ needs the module");
    return nullptr;
  }
  if (self->real == nullptr || self->cache == nullptr) {  // cleared by the collector
    PyErr_SetString(PyExc_RuntimeError, "graphscope: this module_call was cleared");
    return nullptr;
  }
  if (!annotating() || PyThread_get_thread_ident() != self->main_thread)
    return PyObject_Vectorcall(self->real, args, nargsf, kwnames);
  const int64_t t0 = ticks();
  PyObject* module = args[0];
  ThreadState& t = tls;
  const int64_t outer = t.current();  // the scope the call runs in, open again after it
  PyObject* parent = self->roots->empty() ? nullptr : self->roots->back();
  PyObject* root = nullptr;
  int64_t sid = -1;
  // the resolver sees the call's positional and keyword argument values (a model called as
  // model(input_ids=ids) names its graph by them: transformers' models are called so)
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  if (!cached(self, module, parent, outer, &root, &sid) &&
      !resolve(self, module, args + 1, nargs - 1 + nkw, parent, outer, &root, &sid))
    return nullptr;
  if (!enter_call(self, t, root, sid)) return nullptr;
  const int64_t t1 = ticks();
  PyObject* out = PyObject_Vectorcall(self->real, args, nargsf, kwnames);
  const int64_t t2 = ticks();
  const bool raised = out == nullptr;  // counted all the same; a failed close is not
  out = leave_call(self, module, sid, outer, out);
  if (out == nullptr && !raised) return nullptr;
  g_calls++;
  g_own_ticks += (t1 - t0) + (ticks() - t2);
  return out;
}

PyObject* mc_descr_get(PyObject* o, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(o);
    return o;
  }
  return PyMethod_New(o, obj);
}

int mc_traverse(PyObject* o, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<ModuleCall*>(o);
  Py_VISIT(self->real);
  Py_VISIT(self->resolve);
  Py_VISIT(self->outer_return);
  Py_VISIT(self->marks);
  Py_VISIT(self->cache_capsule);
  Py_VISIT(self->set_eval_frame);
  Py_VISIT(Py_TYPE(o));
  return 0;
}

int mc_clear(PyObject* o) {
  auto* self = reinterpret_cast<ModuleCall*>(o);
  Py_CLEAR(self->real);
  Py_CLEAR(self->resolve);
  Py_CLEAR(self->outer_return);
  self->log = nullptr;
  Py_CLEAR(self->marks);
  Py_CLEAR(self->cache_capsule);
  Py_CLEAR(self->set_eval_frame);
  self->cache = nullptr;
  return 0;
}

void mc_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<ModuleCall*>(o);
  PyTypeObject* tp = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  mc_clear(o);
  if (self->roots != nullptr) {
    for (PyObject* r : *self->roots) Py_DECREF(r);
    delete self->roots;
    self->roots = nullptr;
  }
  tp->tp_free(o);
  Py_DECREF(tp);
}

PyObject* mc_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  PyObject *real, *resolver, *outer_return, *marks, *cache, *set_eval_frame = Py_None;
  unsigned long main_thread;
  static const char* kw[] = {"real", "resolve", "outer_return", "marks", "cache", "main_thread",
                             "set_eval_frame", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOk|O", const_cast<char**>(kw), &real,
                                   &resolver, &outer_return, &marks, &cache, &main_thread,
                                   &set_eval_frame))
    return nullptr;
  auto* c = static_cast<Cache*>(PyCapsule_GetPointer(cache, kCacheName));
  if (c == nullptr) return nullptr;
  const bool log = nb::isinstance<MarkLog>(nb::handle(marks));
  if (!PyCallable_Check(real) || !PyCallable_Check(resolver) ||
      (outer_return != Py_None && !PyCallable_Check(outer_return)) ||
      (marks != Py_None && !log && !PyList_Check(marks)) ||
      (set_eval_frame != Py_None && !PyCallable_Check(set_eval_frame))) {
    PyErr_SetString(PyExc_TypeError, "module_call(real, resolve, outer_return, marks, cache, "
                                     "main_thread, set_eval_frame): callables, a MarkLog, a "
                                     "list or None");
    return nullptr;
  }
  auto* self = reinterpret_cast<ModuleCall*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = mc_vectorcall;
  self->roots = new std::vector<PyObject*>();
  Py_INCREF(real);
  self->real = real;
  Py_INCREF(resolver);
  self->resolve = resolver;
  Py_INCREF(outer_return);
  self->outer_return = outer_return;
  Py_INCREF(marks);
  self->marks = marks;
  self->log = log ? nb::inst_ptr<MarkLog>(nb::handle(marks)) : nullptr;
  Py_INCREF(cache);
  self->cache_capsule = cache;
  self->cache = c;
  Py_INCREF(set_eval_frame);
  self->set_eval_frame = set_eval_frame;
  self->main_thread = main_thread;
  return reinterpret_cast<PyObject*>(self);
}

// __name__ / __qualname__ of the __call__ it replaces (code that names a module class's
// __call__ keeps working while it is installed)
PyObject* mc_get_attr_of_real(PyObject* o, void* name) {
  PyObject* real = reinterpret_cast<ModuleCall*>(o)->real;
  if (real == nullptr) return PyUnicode_FromString("__call__");
  return PyObject_GetAttrString(real, static_cast<const char*>(name));
}

PyGetSetDef mc_getset[] = {
    {"__name__", mc_get_attr_of_real, nullptr, nullptr, const_cast<char*>("__name__")},
    {"__qualname__", mc_get_attr_of_real, nullptr, nullptr, const_cast<char*>("__qualname__")},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef mc_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(ModuleCall, vectorcall), READONLY, nullptr},
    {"__wrapped__", T_OBJECT, offsetof(ModuleCall, real), READONLY,
     "The __call__ this replaces."},
    {nullptr, 0, 0, 0, nullptr}};

}  // namespace

nb::tuple module_call_stats(bool reset) {
  nb::tuple r = nb::make_tuple(g_calls, ticks_to_s(g_own_ticks));
  if (reset) {
    g_calls = 0;
    g_own_ticks = 0;
  }
  return r;
}

nb::object module_call_type() {
  static PyType_Slot type_slots[] = {
      {Py_tp_new, reinterpret_cast<void*>(mc_new)},
      {Py_tp_dealloc, reinterpret_cast<void*>(mc_dealloc)},
      {Py_tp_traverse, reinterpret_cast<void*>(mc_traverse)},
      {Py_tp_clear, reinterpret_cast<void*>(mc_clear)},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_descr_get, reinterpret_cast<void*>(mc_descr_get)},
      {Py_tp_members, mc_members},
      {Py_tp_getset, mc_getset},
      {Py_tp_doc, const_cast<char*>(
           "module_call(real, resolve, outer_return, marks, cache, main_thread, "
           "set_eval_frame=None): "
           "nn.Module.__call__ opening each module call's scope (csrc/modulecall.cpp).")},
      {0, nullptr}};
  static PyType_Spec spec = {"graphscope._native.module_call", sizeof(ModuleCall), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                 Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
                             type_slots};
  PyObject* t = PyType_FromSpec(&spec);
  if (t == nullptr) throw nb::python_error();
  return nb::steal(t);
}

nb::object module_scope_cache() {
  auto* cache = new Cache();
  PyObject* c = PyCapsule_New(cache, kCacheName, cache_free);
  if (c == nullptr) {
    delete cache;
    throw nb::python_error();
  }
  return nb::steal(c);
}

size_t module_scope_cache_prune(nb::object cache) {
  auto* c = static_cast<Cache*>(PyCapsule_GetPointer(cache.ptr(), kCacheName));
  if (c == nullptr) throw nb::python_error();
  size_t dropped = 0;
  for (auto it = c->begin(); it != c->end();) {
    const bool dead = referent(it->second.module_ref) == nullptr ||
                      referent(it->second.root_ref) == nullptr;
    if (dead) {
      Py_XDECREF(it->second.module_ref);
      Py_XDECREF(it->second.root_ref);
      it = c->erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

size_t module_scope_cache_size(nb::object cache) {
  auto* c = static_cast<Cache*>(PyCapsule_GetPointer(cache.ptr(), kCacheName));
  if (c == nullptr) throw nb::python_error();
  return c->size();
}

namespace {
// One (time_ns, scope) of two ints onto l; TypeError/ValueError otherwise.
void add_mark(MarkLog& l, nb::handle mark) {
  if (!PyTuple_Check(mark.ptr()) || PyTuple_GET_SIZE(mark.ptr()) != 2)
    throw nb::value_error("a mark is (time_ns, scope)");
  int64_t v[2];
  for (int i = 0; i < 2; ++i) {
    PyObject* x = PyTuple_GET_ITEM(mark.ptr(), i);
    if (!PyLong_Check(x)) throw nb::type_error("a mark is (time_ns, scope), two ints");
    v[i] = PyLong_AsLongLong(x);
    if (v[i] == -1 && PyErr_Occurred()) throw nb::python_error();
  }
  l.add(v[0], v[1]);
}
}  // namespace

void bind_mark_log(nb::module_& m) {
  nb::class_<MarkLog>(m, "MarkLog",
                      "The capture meter's (time_ns, scope) marks as plain integers, appended "
                      "by graphscope run's module_call without making Python objects.")
      .def(nb::init<>())
      .def("append",
           [](MarkLog& l, nb::handle mark) { add_mark(l, mark); },
           nb::arg("mark"), "Append one (time_ns, scope).")
      .def("extend",
           [](MarkLog& l, nb::iterable marks) {
             for (nb::handle m : marks) add_mark(l, m);
           },
           nb::arg("marks"))
      .def("clear", [](MarkLog& l) { l.v.clear(); })
      .def("copy", [](const MarkLog& l) { return MarkLog(l); })
      .def("__len__", [](const MarkLog& l) { return l.size(); })
      .def("__getitem__",
           [](const MarkLog& l, int64_t i) {
             const int64_t n = static_cast<int64_t>(l.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw nb::index_error("mark index out of range");
             return nb::make_tuple(l.v[2 * i], l.v[2 * i + 1]);
           },
           nb::arg("i"))
      .def("__iter__",
           [](const MarkLog& l) {
             nb::list out;
             for (size_t i = 0; i < l.size(); ++i) out.append(nb::make_tuple(l.v[2 * i],
                                                                              l.v[2 * i + 1]));
             return nb::iter(out);
           });
}

}  // namespace gs
