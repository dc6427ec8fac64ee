// graphscope.mark_kernels as a C type: the `with` statement users write around every block.
//
// Entering a scope inside an annotated capture needs the scope id for (the thread's current
// scope, the annotation, backward=). graphscope/annotate/scopes.py interns scopes by the
// annotation's pickle; this type keeps a cache in front of it, keyed by the annotation's
// content, so a scope entered before costs comparing a small dict with the key of the slot
// that came next last step (or encoding and hashing it and one index probe) and a native push,
// without running Python. Only annotations whose content decides their
// pickle are cached: a str, or a dict (exact type) with str keys and str/int (64-bit)/float/
// bool/None values, compared in order, by exact type, floats by their bits (so -0.0 and 0.0
// stay apart, as their pickles do). Anything
// else, and every first sight, goes to the running session's resolve (Python), which
// normalises and validates (MK12) and interns. Outside an annotated capture nothing is pushed
// (MK3), but an annotation that is not plainly valid is still checked by Python.
//
// The running capture session (graphscope.annotate.session.Session) is handed over by
// session_open and taken back by session_close: the type opens scopes only while it holds one,
// and calls its resolve(annotation, parent, backward) and push(scope)/pop(). The push/pop go
// to the thread's native scope stack, each followed by graphscope._opwatch's ownership note (a
// C function pointer) when the native observer attributes backward, else through the
// session's push/pop. All of this runs with the GIL held.

#include "markscope.h"

#include <Python.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "nodecount.h"
#include "scopes.h"

namespace gs {
namespace {

using NoteFn = void (*)(int64_t);

struct Hooks {
  PyObject* session = nullptr;  // the running capture session (a strong reference), or null
  PyObject* check = nullptr;    // (annotation) -> raises AnnotationError if invalid
  PyObject* resolve_name = nullptr;  // the session's methods' names, interned
  PyObject* push_name = nullptr;
  PyObject* pop_name = nullptr;
  NoteFn own_note = nullptr;    // graphscope._opwatch's own_note (null: the session's push/pop)
} hooks;

// The session for the length of a call into it (Python may close the window meanwhile).
struct SessionRef {
  PyObject* s;
  SessionRef() : s(hooks.session) { Py_XINCREF(s); }
  ~SessionRef() { Py_XDECREF(s); }
};

// ---- the content-keyed cache: (parent, backward, annotation) -> scope id ----
//
// An annotation is cached by its canonical bytes: a tag per value and the value itself (a str
// by its storage kind, length and code units; an int that fits in 64 bits; a float by its bits;
// True/False/None by tag), a dict as its size and items in order. Equal bytes mean equal
// content by exact type and value, so the same pickle: a hit is exact (the bytes are compared,
// not just hashed). Anything else is not cached and goes to the Python resolver, as does a
// miss (an equal str in another storage kind is only a miss, never a wrong hit). The keys are
// kept in slots of two cache lines, aligned to them (a key of up to 31 bytes, most annotations,
// lies in the first with the header), in the order first seen: a program enters its scopes in
// the same order every step, so the slots of one step lie one after the other in memory. An
// open-addressed index (slot number and 32 bits of the hash, 8 bytes each) finds a slot by its
// hash. Each slot notes which slot was looked up after it: a hit prefetches that one (the next
// entry's slot is in cache when Python gets there) and the next lookup tries it first,
// comparing the annotation with its key as it is encoded (nothing written, nothing hashed).

constexpr uint32_t kNone = UINT32_MAX;
struct alignas(64) Slot {
  uint64_t fp = 0;        // hash of (bytes, parent, backward)
  int64_t parent = 0;
  int64_t sid = -1;
  uint32_t len = 0;
  uint32_t next = kNone;  // the slot looked up after this one last time
  uint8_t backward = 0;
  char inl[128 - 33 - sizeof(char*)];  // the bytes when they fit
  char* big = nullptr;    // else here (owned)
  const char* bytes() const { return len <= sizeof inl ? inl : big; }
};
constexpr size_t kInline = sizeof(Slot::inl);
static_assert(sizeof(Slot) == 128 && offsetof(Slot, inl) == 33, "a slot is two cache lines");
struct IndexEntry {
  uint32_t slot = kNone;  // kNone: empty
  uint32_t fp32 = 0;      // the slot's fp, low half
};
std::vector<Slot> slots;        // in the order first seen; only appended
std::vector<IndexEntry> index;  // size a power of two, at most half full
uint32_t last_hit = kNone;      // the slot of the previous lookup
constexpr size_t kCacheMax = 1 << 16;

// The canonical bytes go to a sink: Encoded writes them (the key looked up and stored),
// Matcher compares them with a stored key as they come (a guessed slot, checked without
// writing or hashing anything), Validator only lets encode() check the types (outside a
// capture). One encoder, so the three agree on what is cacheable by construction.

// The annotation being looked up, encoded (the GIL serialises every use). Grows, never shrinks.
struct Encoded {
  std::vector<char> buf = std::vector<char>(256);
  size_t n = 0;
  char* room(size_t k) {
    if (n + k > buf.size()) buf.resize(std::max(buf.size() * 2, n + k));
    char* p = buf.data() + n;
    n += k;
    return p;
  }
  bool put(char c) {
    *room(1) = c;
    return true;
  }
  bool put(const void* p, size_t k) {
    std::memcpy(room(k), p, k);
    return true;
  }
  const char* data() const { return buf.data(); }
  size_t size() const { return n; }
} scratch;

struct Matcher {
  const char* key;
  size_t len, at = 0;
  bool put(char c) {
    if (at >= len || key[at] != c) return false;
    ++at;
    return true;
  }
  bool put(const void* p, size_t k) {
    if (k > len - at || std::memcmp(key + at, p, k) != 0) return false;
    at += k;
    return true;
  }
};

struct Validator {
  bool put(char) { return true; }
  bool put(const void*, size_t) { return true; }
};

template <class Sink>
inline bool put_len(Sink& out, size_t n) {  // LEB128
  do {
    char b = static_cast<char>(n & 0x7f);
    n >>= 7;
    if (!out.put(n ? static_cast<char>(b | 0x80) : b)) return false;
  } while (n);
  return true;
}

template <class Sink>
inline bool put_str(Sink& out, PyObject* s) {
  const int kind = PyUnicode_KIND(s);
  const size_t n = static_cast<size_t>(PyUnicode_GET_LENGTH(s));
  return out.put('s') && out.put(static_cast<char>(kind)) && put_len(out, n) &&
         out.put(PyUnicode_DATA(s), n * static_cast<size_t>(kind));
}

// A value whose exact type and value decide its pickle, put; false if it is not one (or the
// sink refused it).
template <class Sink>
bool put_value(Sink& out, PyObject* v) {
  PyTypeObject* t = Py_TYPE(v);
  if (t == &PyUnicode_Type) return put_str(out, v);
  if (t == &PyLong_Type) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    return out.put('i') && out.put(&x, sizeof x);
  }
  if (t == &PyFloat_Type) {
    double d = PyFloat_AS_DOUBLE(v);
    return out.put('f') && out.put(&d, sizeof d);
  }
  if (v == Py_True) return out.put('t');
  if (v == Py_False) return out.put('u');
  if (v == Py_None) return out.put('n');
  return false;
}

// The annotation's canonical bytes into `out`; false when it is not cacheable (or the sink
// refused them: a Matcher on the first byte that differs).
template <class Sink>
bool encode(PyObject* ann, Sink& out) {
  if (PyUnicode_CheckExact(ann)) return put_str(out, ann);
  if (!PyDict_CheckExact(ann)) return false;
  if (!out.put('d') || !put_len(out, static_cast<size_t>(PyDict_GET_SIZE(ann)))) return false;
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(ann, &pos, &k, &v)) {
    if (!PyUnicode_CheckExact(k) || !put_str(out, k) || !put_value(out, v)) return false;
  }
  return true;
}

bool encode_key(PyObject* ann) {
  scratch.n = 0;
  return encode(ann, scratch);
}

// Whether encode() would take it (the path outside a capture).
bool plainly_valid(PyObject* ann) {
  Validator v;
  return encode(ann, v);
}

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

inline uint64_t fingerprint(const char* key, size_t len, int64_t parent, bool backward) {
  return fmix(mix(mix(hash_bytes(key, len), static_cast<uint64_t>(parent)), backward ? 1 : 2));
}

// This lookup was at slot i: note it as the previous one's successor, prefetch i's.
inline void followed_by(uint32_t i) {
  if (last_hit != kNone && last_hit != i) slots[last_hit].next = i;
  last_hit = i;
  const uint32_t next = slots[i].next;
  if (next != kNone) {
    const char* p = reinterpret_cast<const char*>(&slots[next]);
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);  // a key longer than 31 bytes goes on in the second line
  }
}

bool lookup(const char* key, size_t len, uint64_t fp, int64_t parent, bool backward,
            int64_t* sid) {
  if (index.empty()) return false;
  const size_t mask = index.size() - 1;
  const uint32_t fp32 = static_cast<uint32_t>(fp);
  for (size_t i = fp & mask;; i = (i + 1) & mask) {
    const IndexEntry e = index[i];
    if (e.slot == kNone) return false;
    if (e.fp32 != fp32) continue;
    const Slot& s = slots[e.slot];
    if (s.fp == fp && s.parent == parent && s.backward == backward && s.len == len &&
        std::memcmp(s.bytes(), key, len) == 0) {
      *sid = s.sid;
      followed_by(e.slot);
      return true;
    }
  }
}

// A hit on the slot that followed the previous lookup last time, if `ann` is its key: compared
// as it is encoded, so nothing is written or hashed.
bool guessed(PyObject* ann, int64_t parent, bool backward, int64_t* sid) {
  if (last_hit == kNone) return false;
  const uint32_t g = slots[last_hit].next;
  if (g == kNone) return false;
  const Slot& s = slots[g];
  if (s.parent != parent || s.backward != (backward ? 1 : 0)) return false;
  Matcher m{s.bytes(), s.len};
  if (!encode(ann, m) || m.at != m.len) return false;
  *sid = s.sid;
  followed_by(g);
  return true;
}

void place(uint32_t slot) {
  const size_t mask = index.size() - 1;
  size_t i = slots[slot].fp & mask;
  while (index[i].slot != kNone) i = (i + 1) & mask;
  index[i] = IndexEntry{slot, static_cast<uint32_t>(slots[slot].fp)};
}

void remember(const std::string& key, uint64_t fp, int64_t parent, bool backward, int64_t sid) {
  if (slots.size() >= kCacheMax || sid < 0) return;  // the Python resolver still answers
  Slot s;
  s.fp = fp;
  s.parent = parent;
  s.sid = sid;
  s.backward = backward ? 1 : 0;
  s.len = static_cast<uint32_t>(key.size());
  if (key.size() <= kInline) {
    std::memcpy(s.inl, key.data(), key.size());
  } else {
    s.big = new char[key.size()];  // kept for the process's life, as the slot is
    std::memcpy(s.big, key.data(), key.size());
  }
  const auto n = static_cast<uint32_t>(slots.size());
  slots.push_back(s);
  if ((slots.size()) * 2 > index.size()) {
    index.assign(std::max<size_t>(1024, index.size() * 2), IndexEntry{});
    for (uint32_t i = 0; i < slots.size(); ++i) place(i);
  } else {
    place(n);
  }
  followed_by(n);
}

// ---- the type ----

struct MarkKernels {
  PyObject_HEAD
  PyObject* ann;
  int backward;
  int pushed;  // scopes this object pushed and has not popped yet (re-entry nests)
};

}  // namespace

bool annotating() { return hooks.session != nullptr; }

namespace {

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

}  // namespace

bool scope_push(ThreadState& t, int64_t sid) {
  if (hooks.own_note != nullptr) {
    try {
      t.scopes.push_back(sid);
      count_note(t);
      hooks.own_note(sid);
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return false;
    }
    return true;
  }
  SessionRef session;
  if (session.s == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "graphscope: no capture session is running");
    return false;
  }
  PyObject* s = PyLong_FromLongLong(sid);
  if (s == nullptr) return false;
  PyObject* r = PyObject_CallMethodOneArg(session.s, hooks.push_name, s);
  Py_DECREF(s);
  Py_XDECREF(r);
  return r != nullptr;
}

bool scope_pop() {
  if (hooks.own_note != nullptr) {
    try {
      ThreadState& t = tls;
      if (!t.scopes.empty()) t.scopes.pop_back();
      count_note(t);
      hooks.own_note(t.current());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return false;
    }
    return true;
  }
  SessionRef session;
  if (session.s == nullptr) {  // a scope entered in a window that has closed since
    ThreadState& t = tls;
    if (!t.scopes.empty()) t.scopes.pop_back();
    count_note(t);
    return true;
  }
  PyObject* r = PyObject_CallMethodNoArgs(session.s, hooks.pop_name);
  Py_XDECREF(r);
  return r != nullptr;
}

namespace {

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
  ThreadState& t = tls;
  const int64_t parent = t.current();
  const bool bw = self->backward != 0;
  int64_t sid = -1;
  if (guessed(ann, parent, bw, &sid)) {
    if (!scope_push(t, sid)) return nullptr;
    self->pushed++;
    Py_INCREF(o);
    return o;
  }
  const bool cacheable = encode_key(ann);
  const uint64_t fp = cacheable ? fingerprint(scratch.data(), scratch.size(), parent, bw) : 0;
  if (!cacheable || !lookup(scratch.data(), scratch.size(), fp, parent, bw, &sid)) {
    // the resolver runs Python, which may enter another mark_kernels: keep this key aside
    std::string key = cacheable ? std::string(scratch.data(), scratch.size()) : std::string();
    SessionRef session;
    PyObject* p = PyLong_FromLongLong(parent);
    if (p == nullptr) return nullptr;
    PyObject* r = PyObject_CallMethodObjArgs(session.s, hooks.resolve_name, ann, p,
                                             bw ? Py_True : Py_False, nullptr);
    Py_DECREF(p);
    if (r == nullptr) return nullptr;
    sid = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (sid == -1 && PyErr_Occurred()) return nullptr;
    if (cacheable) remember(key, fp, parent, bw, sid);
  }
  if (!scope_push(t, sid)) return nullptr;
  self->pushed++;
  Py_INCREF(o);
  return o;
}

PyObject* mk_exit(PyObject* o, PyObject* const*, Py_ssize_t) {
  auto* self = reinterpret_cast<MarkKernels*>(o);
  if (self->pushed > 0) {
    self->pushed--;
    if (!scope_pop()) return nullptr;
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

void mark_kernels_setup(nb::object check) {
  Py_XINCREF(check.ptr());
  Py_XDECREF(hooks.check);
  hooks.check = check.ptr();
  if (hooks.resolve_name == nullptr) {
    hooks.resolve_name = PyUnicode_InternFromString("resolve");
    hooks.push_name = PyUnicode_InternFromString("push");
    hooks.pop_name = PyUnicode_InternFromString("pop");
  }
}

void session_open(nb::object session) {
  if (hooks.session != nullptr)
    throw std::runtime_error("state:0:an annotated capture is already running in this process");
  if (hooks.resolve_name == nullptr)
    throw std::runtime_error("state:0:graphscope: mark_kernels is not set up");
  Py_INCREF(session.ptr());
  hooks.session = session.ptr();
}

void session_close() {
  PyObject* s = hooks.session;
  hooks.session = nullptr;
  Py_XDECREF(s);
}

nb::object active_session() {
  return hooks.session ? nb::borrow(hooks.session) : nb::none();
}

void mark_kernels_use_native(uintptr_t own_note) {
  hooks.own_note = reinterpret_cast<NoteFn>(own_note);
}

size_t mark_kernels_cache_size() { return slots.size(); }

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
