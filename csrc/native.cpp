// graphscope._native: the CUPTI recorder, graph inspector and activity tracer.
//
// Built against CUDA/CUPTI *headers* only. libcuda and libcupti are opened at run time
// (load()), preferring the libcupti copy torch already loaded, so importing this module never
// fails on a machine without a GPU and two CUPTI copies never meet in one process.
//
// Threads: CUPTI resource callbacks run on whichever thread makes the CUDA call (the main
// thread for forward, autograd's device thread for backward). Scope and op ids live in
// thread_local state read by that callback; shared record vectors are guarded by one mutex.
// Activity buffers are handed back by CUPTI on its own worker thread: they go into a
// mutex-guarded list and are decoded on the Python thread in Tracer.stop().
// No C++ exception crosses the CUPTI/C boundary.

#include <cupti.h>
#include <cuda.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace nb = nanobind;

namespace {

// ---------------------------------------------------------------- dynamic symbols
struct CuptiApi {
  void* handle = nullptr;
  std::string path;
  CUptiResult (*GetVersion)(uint32_t*) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                              CUpti_SubscriberParams*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) = nullptr;
  CUptiResult (*GetGraphNodeId)(CUgraphNode, uint64_t*) = nullptr;
  CUptiResult (*GetGraphId)(CUgraph, uint32_t*) = nullptr;
  CUptiResult (*GetGraphExecId)(CUgraphExec, uint32_t*) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
};

struct DriverApi {
  void* handle = nullptr;
  CUresult (*Init)(unsigned int) = nullptr;
  CUresult (*DriverGetVersion)(int*) = nullptr;
  CUresult (*GraphGetNodes)(CUgraph, CUgraphNode*, size_t*) = nullptr;
  CUresult (*GraphNodeGetType)(CUgraphNode, CUgraphNodeType*) = nullptr;
  CUresult (*GraphKernelNodeGetParams)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) = nullptr;
  CUresult (*GraphMemcpyNodeGetParams)(CUgraphNode, CUDA_MEMCPY3D*) = nullptr;
  CUresult (*GraphMemsetNodeGetParams)(CUgraphNode, CUDA_MEMSET_NODE_PARAMS*) = nullptr;
  CUresult (*GraphGetEdges)(CUgraph, CUgraphNode*, CUgraphNode*, CUgraphEdgeData*,
                            size_t*) = nullptr;
  CUresult (*FuncGetName)(const char**, CUfunction) = nullptr;
  CUresult (*KernelGetName)(const char**, CUkernel) = nullptr;
  CUresult (*GraphDebugDotPrint)(CUgraph, const char*, unsigned int) = nullptr;
  // CUDA >= 13.1 driver only: probed, never required.
  CUresult (*GraphNodeGetToolsId)(CUgraphNode, unsigned long long*) = nullptr;
};

CuptiApi cupti;
DriverApi drv;

template <typename F>
bool sym(void* h, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(h, name));
  return out != nullptr;
}

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  if (cupti.GetResultString && cupti.GetResultString(r, &s) == CUPTI_SUCCESS && s) {
    return std::string(s);
  }
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

[[noreturn]] void raise_cupti(const char* what, CUptiResult r) {
  // Python maps "cupti:<code>:" prefixes onto GraphscopeError subclasses.
  throw std::runtime_error("cupti:" + std::to_string(static_cast<int>(r)) + ":" + what + ": " +
                           cupti_error(r));
}

[[noreturn]] void raise_cuda(const char* what, CUresult r) {
  throw std::runtime_error("cuda:" + std::to_string(static_cast<int>(r)) + ":" + what +
                           " failed with CUresult " + std::to_string(static_cast<int>(r)));
}

void require_loaded() {
  if (!cupti.handle || !drv.handle) {
    throw std::runtime_error("notloaded:0:libcupti/libcuda not loaded; call load() first");
  }
}

std::string load_driver() {
  if (drv.handle) return "";
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return std::string("libcuda.so.1 not found: ") + dlerror();
  bool ok = sym(h, "cuInit", drv.Init) && sym(h, "cuDriverGetVersion", drv.DriverGetVersion) &&
            sym(h, "cuGraphGetNodes", drv.GraphGetNodes) &&
            sym(h, "cuGraphNodeGetType", drv.GraphNodeGetType) &&
            sym(h, "cuGraphKernelNodeGetParams_v2", drv.GraphKernelNodeGetParams) &&
            sym(h, "cuGraphMemcpyNodeGetParams", drv.GraphMemcpyNodeGetParams) &&
            sym(h, "cuGraphMemsetNodeGetParams", drv.GraphMemsetNodeGetParams) &&
            sym(h, "cuGraphGetEdges_v2", drv.GraphGetEdges) &&
            sym(h, "cuFuncGetName", drv.FuncGetName) &&
            sym(h, "cuGraphDebugDotPrint", drv.GraphDebugDotPrint);
  if (!ok) return "libcuda.so.1 lacks a required graph symbol (driver older than CUDA 12.3?)";
  sym(h, "cuKernelGetName", drv.KernelGetName);
  sym(h, "cuGraphNodeGetToolsId", drv.GraphNodeGetToolsId);
  drv.handle = h;
  return "";
}

std::string load_cupti(const std::string& path) {
  if (cupti.handle) {
    if (path != cupti.path) return "a different libcupti is already loaded: " + cupti.path;
    return "";
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) return std::string("cannot open ") + path + ": " + dlerror();
  CuptiApi a;
  bool ok = sym(h, "cuptiGetVersion", a.GetVersion) &&
            sym(h, "cuptiGetResultString", a.GetResultString) &&
            sym(h, "cuptiSubscribe", a.Subscribe) && sym(h, "cuptiUnsubscribe", a.Unsubscribe) &&
            sym(h, "cuptiEnableCallback", a.EnableCallback) &&
            sym(h, "cuptiGetGraphNodeId", a.GetGraphNodeId) &&
            sym(h, "cuptiGetGraphId", a.GetGraphId) &&
            sym(h, "cuptiGetGraphExecId", a.GetGraphExecId) &&
            sym(h, "cuptiActivityEnable", a.ActivityEnable) &&
            sym(h, "cuptiActivityDisable", a.ActivityDisable) &&
            sym(h, "cuptiActivityRegisterCallbacks", a.ActivityRegisterCallbacks) &&
            sym(h, "cuptiActivityFlushAll", a.ActivityFlushAll) &&
            sym(h, "cuptiActivityGetNextRecord", a.ActivityGetNextRecord) &&
            sym(h, "cuptiActivityGetNumDroppedRecords", a.ActivityGetNumDroppedRecords) &&
            sym(h, "cuptiGetTimestamp", a.GetTimestamp);
  if (!ok) return path + " lacks a required CUPTI symbol (CUPTI older than CUDA 12?)";
  sym(h, "cuptiSubscribe_v2", a.Subscribe_v2);
  a.handle = h;
  a.path = path;
  cupti = a;
  return "";
}

// ---------------------------------------------------------------- per-thread scope state
// The innermost pushed scope wins; with nothing pushed, the thread's backward "slot" (set by
// autograd-node pre-hooks) applies if it belongs to the current generation. Bumping the
// generation (end of a backward call, end of a capture) retires every thread's slot at once.
std::atomic<uint64_t> g_slot_generation{1};

struct ThreadState {
  std::vector<int64_t> scopes;
  int64_t op = -1;
  int64_t slot = -1;
  uint64_t slot_gen = 0;
  uint64_t tid = static_cast<uint64_t>(syscall(SYS_gettid));

  int64_t current() const {
    if (!scopes.empty()) return scopes.back();
    return slot_gen == g_slot_generation.load(std::memory_order_relaxed) ? slot : -1;
  }
};
thread_local ThreadState tls;

// ---------------------------------------------------------------- recorder
struct Recorder {
  std::mutex mu;
  CUpti_SubscriberHandle sub = nullptr;
  std::atomic<bool> active{false};
  // GRAPHNODE_CREATED
  std::vector<uint64_t> node_id;
  std::vector<uint32_t> graph_id;
  std::vector<int32_t> node_type;
  std::vector<int64_t> scope;
  std::vector<int64_t> op;
  std::vector<uint64_t> thread;
  // GRAPHNODE_CLONED
  std::vector<uint64_t> clone_id, clone_origin;
  // GRAPHEXEC_CREATED: (exec id, template graph id)
  std::vector<uint32_t> exec_id, exec_graph;
  // GRAPH_CLONED: (graph id, original graph id)
  std::vector<uint32_t> gclone_id, gclone_origin;
  std::atomic<uint64_t> callback_errors{0};

  void clear() {
    node_id.clear(); graph_id.clear(); node_type.clear(); scope.clear(); op.clear();
    thread.clear(); clone_id.clear(); clone_origin.clear(); exec_id.clear();
    exec_graph.clear(); gclone_id.clear(); gclone_origin.clear();
    callback_errors = 0;
  }
};
Recorder rec;

uint64_t node_id_of(CUgraphNode n) {
  uint64_t v = 0;
  if (cupti.GetGraphNodeId(n, &v) != CUPTI_SUCCESS) return ~0ull;
  return v;
}
uint32_t graph_id_of(CUgraph g) {
  uint32_t v = 0;
  if (!g || cupti.GetGraphId(g, &v) != CUPTI_SUCCESS) return ~0u;
  return v;
}

void CUPTIAPI resource_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || !data) return;
  const auto* rd = static_cast<const CUpti_ResourceData*>(data);
  const auto* gd = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  if (!gd) return;
  try {
    switch (cbid) {
      case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED: {
        uint64_t nid = node_id_of(gd->node);
        uint32_t gid = graph_id_of(gd->graph);
        int64_t sc = tls.current();
        std::lock_guard<std::mutex> g(rec.mu);
        rec.node_id.push_back(nid);
        rec.graph_id.push_back(gid);
        rec.node_type.push_back(static_cast<int32_t>(gd->nodeType));
        rec.scope.push_back(sc);
        rec.op.push_back(tls.op);
        rec.thread.push_back(tls.tid);
        break;
      }
      case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: {
        uint64_t c = node_id_of(gd->node), o = node_id_of(gd->originalNode);
        std::lock_guard<std::mutex> g(rec.mu);
        rec.clone_id.push_back(c);
        rec.clone_origin.push_back(o);
        break;
      }
      case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: {
        uint32_t e = 0;
        cupti.GetGraphExecId(gd->graphExec, &e);
        uint32_t gid = graph_id_of(gd->graph);
        std::lock_guard<std::mutex> g(rec.mu);
        rec.exec_id.push_back(e);
        rec.exec_graph.push_back(gid);
        break;
      }
      case CUPTI_CBID_RESOURCE_GRAPH_CLONED: {
        uint32_t a = graph_id_of(gd->graph), b = graph_id_of(gd->originalGraph);
        std::lock_guard<std::mutex> g(rec.mu);
        rec.gclone_id.push_back(a);
        rec.gclone_origin.push_back(b);
        break;
      }
      default:
        break;
    }
  } catch (...) {
    rec.callback_errors++;
  }
}

template <typename T>
nb::bytes as_bytes(const std::vector<T>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Subscribe to the resource callbacks. Returns "" or the holder's name on error 39.
void recorder_start(bool clear) {
  require_loaded();
  if (rec.active) throw std::runtime_error("state:0:the graphscope recorder is already running");
  if (clear) {
    std::lock_guard<std::mutex> g(rec.mu);
    rec.clear();
  }
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult r;
  char old_name[256] = {0};
  if (cupti.Subscribe_v2) {
    CUpti_SubscriberParams p;
    std::memset(&p, 0, sizeof(p));
    p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.subscriberName = "graphscope";
    p.oldSubscriberName = old_name;
    p.oldSubscriberSize = sizeof(old_name);
    r = cupti.Subscribe_v2(&sub, resource_callback, nullptr, &p);
  } else {
    r = cupti.Subscribe(&sub, resource_callback, nullptr);
  }
  if (r != CUPTI_SUCCESS) {
    std::string holder = old_name[0] ? std::string(old_name) : std::string("unknown");
    throw std::runtime_error("cupti:" + std::to_string(static_cast<int>(r)) +
                             ":cuptiSubscribe: " + cupti_error(r) + " (holder: " + holder + ")");
  }
  const CUpti_CallbackId ids[] = {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                                  CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
                                  CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
                                  CUPTI_CBID_RESOURCE_GRAPH_CLONED};
  for (auto id : ids) {
    r = cupti.EnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, id);
    if (r != CUPTI_SUCCESS) {
      cupti.Unsubscribe(sub);
      raise_cupti("cuptiEnableCallback", r);
    }
  }
  rec.sub = sub;
  rec.active = true;
}

void recorder_stop() {
  if (!rec.active) return;
  CUptiResult r = cupti.Unsubscribe(rec.sub);
  rec.sub = nullptr;
  rec.active = false;
  if (r != CUPTI_SUCCESS) raise_cupti("cuptiUnsubscribe", r);
}

nb::dict recorder_records() {
  std::lock_guard<std::mutex> g(rec.mu);
  nb::dict d;
  d["node_id"] = as_bytes(rec.node_id);
  d["graph_id"] = as_bytes(rec.graph_id);
  d["node_type"] = as_bytes(rec.node_type);
  d["scope"] = as_bytes(rec.scope);
  d["op"] = as_bytes(rec.op);
  d["thread"] = as_bytes(rec.thread);
  d["clone_id"] = as_bytes(rec.clone_id);
  d["clone_origin"] = as_bytes(rec.clone_origin);
  d["exec_id"] = as_bytes(rec.exec_id);
  d["exec_graph"] = as_bytes(rec.exec_graph);
  d["gclone_id"] = as_bytes(rec.gclone_id);
  d["gclone_origin"] = as_bytes(rec.gclone_origin);
  d["callback_errors"] = static_cast<uint64_t>(rec.callback_errors);
  return d;
}

// ---------------------------------------------------------------- graph inspection
std::string demangle(const char* mangled) {
  if (!mangled) return "";
  int status = 0;
  char* out = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || !out) return std::string(mangled);
  std::string s(out);
  std::free(out);
  return s;
}

nb::dict inspect_graph(uintptr_t graph_ptr) {
  require_loaded();
  auto graph = reinterpret_cast<CUgraph>(graph_ptr);
  size_t n = 0;
  CUresult r = drv.GraphGetNodes(graph, nullptr, &n);
  if (r != CUDA_SUCCESS) raise_cuda("cuGraphGetNodes", r);
  std::vector<CUgraphNode> nodes(n);
  if (n) {
    r = drv.GraphGetNodes(graph, nodes.data(), &n);
    if (r != CUDA_SUCCESS) raise_cuda("cuGraphGetNodes", r);
  }
  std::vector<uint64_t> ids(n);
  std::vector<int32_t> types(n);
  std::vector<int32_t> grid(3 * n, 0), block(3 * n, 0);
  std::vector<uint32_t> smem(n, 0);
  std::vector<uint64_t> bytes(n, 0);
  std::vector<int32_t> name_idx(n, -1);
  std::vector<std::string> names;
  std::unordered_map<std::string, int32_t> name_of;
  std::unordered_map<CUgraphNode, uint64_t> id_of;
  auto intern = [&](const char* s) -> int32_t {
    std::string k = s ? s : "";
    auto it = name_of.find(k);
    if (it != name_of.end()) return it->second;
    int32_t i = static_cast<int32_t>(names.size());
    names.push_back(k);
    name_of.emplace(k, i);
    return i;
  };
  for (size_t i = 0; i < n; ++i) {
    ids[i] = node_id_of(nodes[i]);
    id_of[nodes[i]] = ids[i];
    CUgraphNodeType t;
    drv.GraphNodeGetType(nodes[i], &t);
    types[i] = static_cast<int32_t>(t);
    if (t == CU_GRAPH_NODE_TYPE_KERNEL) {
      CUDA_KERNEL_NODE_PARAMS p;
      std::memset(&p, 0, sizeof(p));
      if (drv.GraphKernelNodeGetParams(nodes[i], &p) == CUDA_SUCCESS) {
        const char* nm = nullptr;
        if (p.func) drv.FuncGetName(&nm, p.func);
        if (!nm && p.kern && drv.KernelGetName) drv.KernelGetName(&nm, p.kern);
        name_idx[i] = intern(nm ? nm : "<unknown kernel>");
        grid[3 * i] = p.gridDimX; grid[3 * i + 1] = p.gridDimY; grid[3 * i + 2] = p.gridDimZ;
        block[3 * i] = p.blockDimX; block[3 * i + 1] = p.blockDimY;
        block[3 * i + 2] = p.blockDimZ;
        smem[i] = p.sharedMemBytes;
      }
    } else if (t == CU_GRAPH_NODE_TYPE_MEMCPY) {
      CUDA_MEMCPY3D p;
      std::memset(&p, 0, sizeof(p));
      if (drv.GraphMemcpyNodeGetParams(nodes[i], &p) == CUDA_SUCCESS) {
        bytes[i] = static_cast<uint64_t>(p.WidthInBytes) * (p.Height ? p.Height : 1) *
                   (p.Depth ? p.Depth : 1);
      }
    } else if (t == CU_GRAPH_NODE_TYPE_MEMSET) {
      CUDA_MEMSET_NODE_PARAMS p;
      std::memset(&p, 0, sizeof(p));
      if (drv.GraphMemsetNodeGetParams(nodes[i], &p) == CUDA_SUCCESS) {
        bytes[i] = static_cast<uint64_t>(p.width) * p.elementSize * (p.height ? p.height : 1);
      }
    }
  }
  size_t ne = 0;
  r = drv.GraphGetEdges(graph, nullptr, nullptr, nullptr, &ne);  // count only
  if (r != CUDA_SUCCESS) raise_cuda("cuGraphGetEdges", r);
  std::vector<CUgraphNode> from(ne), to(ne);
  // Edge data must be asked for: edges with non-default data (port/type, e.g. programmatic
  // dependent launch) make a query without it fail with CUDA_ERROR_LOSSY_QUERY.
  std::vector<CUgraphEdgeData> edge_data(ne);
  if (ne) {
    r = drv.GraphGetEdges(graph, from.data(), to.data(), edge_data.data(), &ne);
    if (r != CUDA_SUCCESS) raise_cuda("cuGraphGetEdges", r);
  }
  std::vector<uint64_t> efrom(ne), eto(ne);
  for (size_t i = 0; i < ne; ++i) {
    efrom[i] = id_of.count(from[i]) ? id_of[from[i]] : node_id_of(from[i]);
    eto[i] = id_of.count(to[i]) ? id_of[to[i]] : node_id_of(to[i]);
  }
  std::vector<std::string> demangled;
  demangled.reserve(names.size());
  for (auto& s : names) demangled.push_back(demangle(s.c_str()));
  nb::dict d;
  d["graph_id"] = graph_id_of(graph);
  d["node_id"] = as_bytes(ids);
  d["node_type"] = as_bytes(types);
  d["grid"] = as_bytes(grid);
  d["block"] = as_bytes(block);
  d["smem"] = as_bytes(smem);
  d["bytes"] = as_bytes(bytes);
  d["name_idx"] = as_bytes(name_idx);
  d["names"] = names;
  d["demangled"] = demangled;
  d["edge_from"] = as_bytes(efrom);
  d["edge_to"] = as_bytes(eto);
  return d;
}

uint32_t exec_id(uintptr_t exec_ptr) {
  require_loaded();
  uint32_t v = 0;
  CUptiResult r = cupti.GetGraphExecId(reinterpret_cast<CUgraphExec>(exec_ptr), &v);
  if (r != CUPTI_SUCCESS) raise_cupti("cuptiGetGraphExecId", r);
  return v;
}

uint32_t graph_id(uintptr_t graph_ptr) {
  require_loaded();
  uint32_t v = 0;
  CUptiResult r = cupti.GetGraphId(reinterpret_cast<CUgraph>(graph_ptr), &v);
  if (r != CUPTI_SUCCESS) raise_cupti("cuptiGetGraphId", r);
  return v;
}

void debug_dot_print(uintptr_t graph_ptr, const std::string& path) {
  require_loaded();
  // 1 = CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE
  CUresult r = drv.GraphDebugDotPrint(reinterpret_cast<CUgraph>(graph_ptr), path.c_str(), 1);
  if (r != CUDA_SUCCESS) raise_cuda("cuGraphDebugDotPrint", r);
}

// ---------------------------------------------------------------- activity tracer
constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kAlign = 8;

struct Tracer {
  std::mutex mu;
  std::vector<std::pair<uint8_t*, size_t>> done;  // (buffer, valid bytes)
  std::atomic<bool> active{false};
  std::atomic<uint64_t> buffers{0};
};
Tracer tracer;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = nullptr;
  if (posix_memalign(&p, kAlign, kBufferBytes) != 0) p = nullptr;
  *buffer = static_cast<uint8_t*>(p);
  *size = p ? kBufferBytes : 0;
  *max_records = 0;
  tracer.buffers++;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> g(tracer.mu);
  tracer.done.emplace_back(buffer, valid);
}

const CUpti_ActivityKind kTraceKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                          CUPTI_ACTIVITY_KIND_MEMCPY,
                                          CUPTI_ACTIVITY_KIND_MEMSET};

// Record layouts. CUPTI writes the newest record struct that the *loaded* library knows. The
// fields read here sit at the same offsets in every layout from CUDA 12.0's CUPTI (API v19:
// Kernel9 / Memcpy5 / Memset4) to CUDA 13.x (Kernel10 / Memcpy6 / Memset4); the asserts pin it.
struct KernelLayout {
  size_t start, end, device, stream, correlation, grid, block, name, graph_node, graph_id;
};
constexpr KernelLayout kKernel{offsetof(CUpti_ActivityKernel10, start),
                               offsetof(CUpti_ActivityKernel10, end),
                               offsetof(CUpti_ActivityKernel10, deviceId),
                               offsetof(CUpti_ActivityKernel10, streamId),
                               offsetof(CUpti_ActivityKernel10, correlationId),
                               offsetof(CUpti_ActivityKernel10, gridX),
                               offsetof(CUpti_ActivityKernel10, blockX),
                               offsetof(CUpti_ActivityKernel10, name),
                               offsetof(CUpti_ActivityKernel10, graphNodeId),
                               offsetof(CUpti_ActivityKernel10, graphId)};
static_assert(offsetof(CUpti_ActivityKernel9, graphNodeId) ==
                  offsetof(CUpti_ActivityKernel10, graphNodeId),
              "kernel record layout moved");
static_assert(offsetof(CUpti_ActivityKernel9, graphId) ==
                  offsetof(CUpti_ActivityKernel10, graphId),
              "kernel record layout moved");
static_assert(offsetof(CUpti_ActivityMemcpy5, graphNodeId) ==
                  offsetof(CUpti_ActivityMemcpy6, graphNodeId),
              "memcpy record layout moved");
constexpr uint32_t kMinCuptiVersion = 19;  // CUDA 12.0

struct TraceColumns {
  std::vector<int32_t> kind;
  std::vector<uint64_t> start, end, graph_node_id;
  std::vector<uint32_t> device, stream, correlation, graph_id;
  std::vector<int32_t> grid, block, name_idx;
  std::vector<uint64_t> bytes;
  std::vector<std::string> names;
  std::unordered_map<std::string, int32_t> name_of;
  uint64_t unknown = 0;
};

template <typename T>
T field(const uint8_t* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(T));
  return v;
}

void decode(TraceColumns& c, const uint8_t* r) {
  const auto kind = field<CUpti_ActivityKind>(r, 0);
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL) {
    c.kind.push_back(0);
    c.start.push_back(field<uint64_t>(r, kKernel.start));
    c.end.push_back(field<uint64_t>(r, kKernel.end));
    c.device.push_back(field<uint32_t>(r, kKernel.device));
    c.stream.push_back(field<uint32_t>(r, kKernel.stream));
    c.correlation.push_back(field<uint32_t>(r, kKernel.correlation));
    for (int k = 0; k < 3; ++k) {
      c.grid.push_back(field<int32_t>(r, kKernel.grid + 4 * k));
      c.block.push_back(field<int32_t>(r, kKernel.block + 4 * k));
    }
    const char* nm = field<const char*>(r, kKernel.name);
    std::string key = nm ? nm : "";
    auto it = c.name_of.find(key);
    int32_t idx;
    if (it == c.name_of.end()) {
      idx = static_cast<int32_t>(c.names.size());
      c.names.push_back(key);
      c.name_of.emplace(key, idx);
    } else {
      idx = it->second;
    }
    c.name_idx.push_back(idx);
    c.graph_node_id.push_back(field<uint64_t>(r, kKernel.graph_node));
    c.graph_id.push_back(field<uint32_t>(r, kKernel.graph_id));
    c.bytes.push_back(0);
    return;
  }
  if (kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
    c.kind.push_back(1);
    c.start.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemcpy6, start)));
    c.end.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemcpy6, end)));
    c.device.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemcpy6, deviceId)));
    c.stream.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemcpy6, streamId)));
    c.correlation.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemcpy6, correlationId)));
    c.graph_node_id.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemcpy6, graphNodeId)));
    c.graph_id.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemcpy6, graphId)));
    c.bytes.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemcpy6, bytes)));
  } else if (kind == CUPTI_ACTIVITY_KIND_MEMSET) {
    c.kind.push_back(2);
    c.start.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemset4, start)));
    c.end.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemset4, end)));
    c.device.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemset4, deviceId)));
    c.stream.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemset4, streamId)));
    c.correlation.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemset4, correlationId)));
    c.graph_node_id.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemset4, graphNodeId)));
    c.graph_id.push_back(field<uint32_t>(r, offsetof(CUpti_ActivityMemset4, graphId)));
    c.bytes.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityMemset4, bytes)));
  } else {
    c.unknown++;
    return;
  }
  for (int k = 0; k < 3; ++k) {
    c.grid.push_back(0);
    c.block.push_back(0);
  }
  c.name_idx.push_back(-1);
}

void tracer_start() {
  require_loaded();
  if (tracer.active) throw std::runtime_error("state:0:the graphscope tracer is already running");
  uint32_t v = 0;
  cupti.GetVersion(&v);
  if (v < kMinCuptiVersion) {
    throw std::runtime_error("version:" + std::to_string(v) +
                             ":CUPTI API version " + std::to_string(v) +
                             " is older than CUDA 12.0's (19); its activity records are not "
                             "decoded by graphscope");
  }
  CUptiResult r = cupti.ActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) raise_cupti("cuptiActivityRegisterCallbacks", r);
  {
    std::lock_guard<std::mutex> g(tracer.mu);
    for (auto& b : tracer.done) std::free(b.first);
    tracer.done.clear();
  }
  for (auto k : kTraceKinds) {
    r = cupti.ActivityEnable(k);
    if (r != CUPTI_SUCCESS) {
      for (auto k2 : kTraceKinds) cupti.ActivityDisable(k2);
      raise_cupti("cuptiActivityEnable", r);
    }
  }
  tracer.active = true;
}

nb::dict tracer_stop() {
  require_loaded();
  if (!tracer.active) throw std::runtime_error("state:0:the graphscope tracer is not running");
  CUptiResult flush = cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto k : kTraceKinds) cupti.ActivityDisable(k);
  tracer.active = false;
  size_t dropped = 0;
  cupti.ActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  std::vector<std::pair<uint8_t*, size_t>> bufs;
  {
    std::lock_guard<std::mutex> g(tracer.mu);
    bufs.swap(tracer.done);
  }
  TraceColumns c;
  for (auto& b : bufs) {
    CUpti_Activity* rec_ptr = nullptr;
    while (cupti.ActivityGetNextRecord(b.first, b.second, &rec_ptr) == CUPTI_SUCCESS) {
      decode(c, reinterpret_cast<const uint8_t*>(rec_ptr));
    }
    std::free(b.first);
  }
  if (flush != CUPTI_SUCCESS) raise_cupti("cuptiActivityFlushAll", flush);
  nb::dict d;
  d["kind"] = as_bytes(c.kind);
  d["start"] = as_bytes(c.start);
  d["end"] = as_bytes(c.end);
  d["device"] = as_bytes(c.device);
  d["stream"] = as_bytes(c.stream);
  d["correlation"] = as_bytes(c.correlation);
  d["graph_id"] = as_bytes(c.graph_id);
  d["graph_node_id"] = as_bytes(c.graph_node_id);
  d["grid"] = as_bytes(c.grid);
  d["block"] = as_bytes(c.block);
  d["name_idx"] = as_bytes(c.name_idx);
  d["bytes"] = as_bytes(c.bytes);
  d["names"] = c.names;
  d["dropped"] = static_cast<uint64_t>(dropped);
  d["unknown_records"] = c.unknown;
  return d;
}

// ---------------------------------------------------------------- probe
nb::dict probe(bool try_subscribe) {
  nb::dict d;
  d["cupti_path"] = cupti.path;
  d["cupti_loaded"] = cupti.handle != nullptr;
  d["driver_loaded"] = drv.handle != nullptr;
  d["header_cupti_api_version"] = static_cast<uint32_t>(CUPTI_API_VERSION);
  d["header_cuda_version"] = static_cast<int>(CUDA_VERSION);
  if (drv.handle) {
    int v = 0;
    drv.Init(0);
    drv.DriverGetVersion(&v);
    d["driver_cuda_version"] = v;
    d["tools_id_api"] = drv.GraphNodeGetToolsId != nullptr;
  }
  if (cupti.handle) {
    uint32_t v = 0;
    cupti.GetVersion(&v);
    d["cupti_api_version"] = v;
    d["cupti_subscribe_v2"] = cupti.Subscribe_v2 != nullptr;
    d["recorder_active"] = static_cast<bool>(rec.active);
    d["tracer_active"] = static_cast<bool>(tracer.active);
    if (try_subscribe && !rec.active) {
      try {
        recorder_start(false);
        recorder_stop();
        d["subscribe"] = "ok";
      } catch (const std::exception& e) {
        d["subscribe"] = std::string(e.what());
      }
    }
  }
  return d;
}

// ---------------------------------------------------------------- trace event scanning
// A byte-level reader of Chrome/Kineto trace events for annotate-trace: per event it finds the
// few fields the annotator reads (and the byte spans it rewrites) without building Python
// objects for the rest. Events are JSON objects; values it does not need are skipped with
// string-aware bracket matching. Malformed input raises ("json:<offset>:...").
namespace ev {

struct Incomplete {};  // the buffer ends inside an event: read more and resume at its start

inline size_t skip_ws(const char* b, size_t p, size_t n) {
  while (p < n && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t')) ++p;
  return p;
}

[[noreturn]] void bad(size_t at, const char* what) {
  throw std::runtime_error("json:" + std::to_string(at) + ":" + what);
}

// End (exclusive) of the string starting at b[p] == '"'.
inline size_t str_end(const char* b, size_t p, size_t n) {
  ++p;
  while (true) {
    const void* hit = p < n ? std::memchr(b + p, '"', n - p) : nullptr;
    if (!hit) throw Incomplete{};
    size_t q = static_cast<const char*>(hit) - b;
    size_t k = q;
    while (k > p && b[k - 1] == '\\') --k;
    if (((q - k) & 1) == 0) return q + 1;  // an even run of backslashes: a real quote
    p = q + 1;
  }
}

// End (exclusive) of the value starting at b[p].
size_t value_end(const char* b, size_t p, size_t n) {
  if (p >= n) throw Incomplete{};
  char c = b[p];
  if (c == '"') return str_end(b, p, n);
  if (c == '{' || c == '[') {
    int depth = 0;
    for (; p < n; ++p) {
      char d = b[p];
      if (d == '"') { p = str_end(b, p, n) - 1; continue; }
      if (d == '{' || d == '[') ++depth;
      else if ((d == '}' || d == ']') && --depth == 0) return p + 1;
    }
    throw Incomplete{};
  }
  size_t q = p;
  while (q < n && b[q] != ',' && b[q] != '}' && b[q] != ']' && b[q] != ' ' && b[q] != '\n' &&
         b[q] != '\r' && b[q] != '\t') {
    ++q;
  }
  if (q >= n) throw Incomplete{};
  if (q == p) bad(p, "unexpected character");
  for (size_t i = p; i < q; ++i) {
    char d = b[i];
    bool ok = (d >= '0' && d <= '9') || d == '-' || d == '+' || d == '.' || d == 'e' ||
              d == 'E' || d == 't' || d == 'r' || d == 'u' || d == 'f' || d == 'a' ||
              d == 'l' || d == 's' || d == 'n';
    if (!ok) bad(i, "invalid literal");
  }
  return q;
}

inline bool key_is(const char* b, size_t ks, size_t ke, const char* lit) {
  size_t len = std::strlen(lit);
  return ke - ks == len + 2 && std::memcmp(b + ks + 1, lit, len) == 0;
}

inline double num(const char* b, size_t s, size_t e) {
  if (s >= e || b[s] == '"' || b[s] == 'n' || b[s] == 't' || b[s] == 'f') return NAN;
  double v = NAN;
  auto r = std::from_chars(b + s, b + e, v);
  return r.ec == std::errc() ? v : NAN;
}

inline uint64_t unum(const char* b, size_t s, size_t e, bool* ok) {
  *ok = false;
  if (s >= e || !(b[s] >= '0' && b[s] <= '9')) return 0;
  char tmp[64];
  size_t len = std::min<size_t>(e - s, sizeof(tmp) - 1);
  std::memcpy(tmp, b + s, len);
  tmp[len] = 0;
  char* end = nullptr;
  uint64_t v = std::strtoull(tmp, &end, 10);
  if (end && (*end == '.' || *end == 'e' || *end == 'E')) v = (uint64_t)std::strtod(tmp, nullptr);
  *ok = true;
  return v;
}

int8_t cat_code(const char* b, size_t s, size_t e) {
  static const char* cats[] = {"kernel", "gpu_memcpy", "gpu_memset", "ac2g", "cuda_runtime",
                               "gpu_user_annotation"};
  for (int i = 0; i < 6; ++i) {
    if (key_is(b, s, e, cats[i])) return static_cast<int8_t>(i + 1);
  }
  return 0;
}

}  // namespace ev

// Step to the next member of an object: skips ',' and whitespace; false at the object's '}'
// (pos then just past it); else the key spans [ks, ke) and its value starts at vs.
inline bool next_member(const char* b, size_t& pos, size_t n, size_t& ks, size_t& ke,
                        size_t& vs) {
  using namespace ev;
  while (true) {
    if (pos >= n) throw Incomplete{};
    if (b[pos] == '}') { ++pos; return false; }
    if (b[pos] != ',') break;
    pos = skip_ws(b, pos + 1, n);
  }
  if (b[pos] != '"') bad(pos, "expected a key");
  ks = pos;
  ke = str_end(b, pos, n);
  pos = skip_ws(b, ke, n);
  if (pos >= n) throw Incomplete{};
  if (b[pos] != ':') bad(pos, "expected ':'");
  vs = skip_ws(b, pos + 1, n);
  if (vs >= n) throw Incomplete{};
  return true;
}

// Scan the events of a traceEvents array held in data, from pos: the columns above for every
// complete event, where to resume once more bytes are read, and whether the array closed.
nb::dict scan_events(nb::bytes data, size_t pos) {
  using namespace ev;
  const char* b = data.c_str();
  const size_t n = data.size();
  std::vector<int64_t> ev_b, ev_e, tid_b, tid_e, ts_b, ts_e, args_close, stream_b, stream_e,
      name_b, name_e, corr;
  std::vector<int8_t> cat, ph;
  std::vector<double> tid, ts, dur;
  std::vector<uint64_t> gnid, gid;
  std::vector<uint8_t> has_gnid;
  size_t p = pos, resume = pos;
  bool closed = false;
  while (true) {
    while (p < n && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t' ||
                     b[p] == ',')) {
      ++p;
    }
    if (p >= n) { resume = p; break; }
    if (b[p] == ']') { closed = true; resume = p + 1; break; }
    if (b[p] != '{') bad(p, "expected an event object");
    const size_t e_begin = p;
    size_t e_end = 0;
    int64_t tb = -1, te = -1, sb = -1, se = -1, ac = -1, stb = -1, ste = -1, nb_ = -1, ne = -1;
    int8_t c = 0, h = 0;
    double vtid = NAN, vts = NAN, vdur = NAN;
    uint64_t vg = 0, vgid = 0;
    bool hg = false;
    int64_t vcorr = -1;
    try {
    size_t q = skip_ws(b, p + 1, n), ks, ke, vs;
    while (next_member(b, q, n, ks, ke, vs)) {
      size_t ve;
      if (ke - ks == 6 && b[vs] == '{' && key_is(b, ks, ke, "args")) {
        // args: walk its members once, noting the few the annotator needs
        size_t r = skip_ws(b, vs + 1, n), aks, ake, avs;
        while (next_member(b, r, n, aks, ake, avs)) {
          size_t ave = value_end(b, avs, n);
          bool ok = false;
          size_t klen = ake - aks;
          if (klen == 15 && key_is(b, aks, ake, "graph node id")) {
            vg = unum(b, avs, ave, &ok); hg = ok;
          } else if (klen == 10 && key_is(b, aks, ake, "graph id")) {
            vgid = unum(b, avs, ave, &ok);
          } else if (klen == 13 && key_is(b, aks, ake, "correlation")) {
            uint64_t v = unum(b, avs, ave, &ok);
            if (ok) vcorr = static_cast<int64_t>(v);
          } else if (klen == 8 && key_is(b, aks, ake, "stream")) {
            stb = avs; ste = ave;
          }
          r = skip_ws(b, ave, n);
        }
        ve = r;  // just past the args object's '}'
        ac = ve - 1;
        q = skip_ws(b, ve, n);
        continue;
      }
      ve = value_end(b, vs, n);
      switch (ke - ks) {
        case 4:
          if (key_is(b, ks, ke, "ph")) h = (ve - vs >= 3 && b[vs] == '"') ? b[vs + 1] : 0;
          else if (key_is(b, ks, ke, "ts")) { sb = vs; se = ve; vts = num(b, vs, ve); }
          break;
        case 5:
          if (key_is(b, ks, ke, "cat")) c = cat_code(b, vs, ve);
          else if (key_is(b, ks, ke, "tid")) { tb = vs; te = ve; vtid = num(b, vs, ve); }
          else if (key_is(b, ks, ke, "dur")) vdur = num(b, vs, ve);
          break;
        case 6:
          if (key_is(b, ks, ke, "name")) { nb_ = vs; ne = ve; }
          break;
        default:
          break;
      }
      q = skip_ws(b, ve, n);
    }
    e_end = q;  // just past the event's '}'
    } catch (const Incomplete&) {
      resume = e_begin;
      break;
    }
    ev_b.push_back(e_begin); ev_e.push_back(e_end);
    cat.push_back(c); ph.push_back(h);
    tid_b.push_back(tb); tid_e.push_back(te); ts_b.push_back(sb); ts_e.push_back(se);
    tid.push_back(vtid); ts.push_back(vts); dur.push_back(vdur);
    args_close.push_back(ac); stream_b.push_back(stb); stream_e.push_back(ste);
    name_b.push_back(nb_); name_e.push_back(ne);
    gnid.push_back(vg); gid.push_back(vgid); has_gnid.push_back(hg); corr.push_back(vcorr);
    p = e_end;
    resume = p;
  }
  nb::dict d;
  d["begin"] = as_bytes(ev_b); d["end"] = as_bytes(ev_e);
  d["cat"] = as_bytes(cat); d["ph"] = as_bytes(ph);
  d["tid"] = as_bytes(tid); d["ts"] = as_bytes(ts); d["dur"] = as_bytes(dur);
  d["tid_b"] = as_bytes(tid_b); d["tid_e"] = as_bytes(tid_e);
  d["ts_b"] = as_bytes(ts_b); d["ts_e"] = as_bytes(ts_e);
  d["args_close"] = as_bytes(args_close);
  d["stream_b"] = as_bytes(stream_b); d["stream_e"] = as_bytes(stream_e);
  d["name_b"] = as_bytes(name_b); d["name_e"] = as_bytes(name_e);
  d["gnid"] = as_bytes(gnid); d["gid"] = as_bytes(gid); d["has_gnid"] = as_bytes(has_gnid);
  d["corr"] = as_bytes(corr);
  d["resume"] = resume;
  d["closed"] = closed;
  return d;
}

// Rewrite the events scanned above (same order) per a plan: keep flag, new tid / ts /
// args.stream (sentinels: INT64_MIN / NaN = unchanged), and an args fragment to append
// (",\"k\": \"v\"..." without the leading comma) by index. Returns the kept events joined by ','.
nb::bytes rewrite_events(nb::bytes data, nb::bytes begin_, nb::bytes end_, nb::bytes tid_b_,
                         nb::bytes tid_e_, nb::bytes ts_b_, nb::bytes ts_e_,
                         nb::bytes args_close_, nb::bytes stream_b_, nb::bytes stream_e_,
                         nb::bytes keep_, nb::bytes new_tid_, nb::bytes new_ts_,
                         nb::bytes new_stream_, nb::bytes frag_, std::vector<std::string> frags) {
  const char* b = data.c_str();
  auto I64 = [](const nb::bytes& x) { return reinterpret_cast<const int64_t*>(x.c_str()); };
  const int64_t *eb = I64(begin_), *ee = I64(end_), *tb = I64(tid_b_), *te = I64(tid_e_),
                *sb = I64(ts_b_), *se = I64(ts_e_), *ac = I64(args_close_),
                *stb = I64(stream_b_), *ste = I64(stream_e_), *ntid = I64(new_tid_),
                *nstr = I64(new_stream_);
  const double* nts = reinterpret_cast<const double*>(new_ts_.c_str());
  const uint8_t* keep = reinterpret_cast<const uint8_t*>(keep_.c_str());
  const int32_t* frag = reinterpret_cast<const int32_t*>(frag_.c_str());
  const size_t count = begin_.size() / sizeof(int64_t);
  std::string out;
  out.reserve(static_cast<size_t>(ee[count ? count - 1 : 0] - eb[0]) + 1024);
  bool first = true;
  struct Edit { int64_t at, until; std::string text; };
  std::vector<Edit> edits;
  char nbuf[64];
  for (size_t i = 0; i < count; ++i) {
    if (!keep[i]) continue;
    if (!first) out.push_back(',');
    first = false;
    bool changed = ntid[i] != INT64_MIN || !std::isnan(nts[i]) || nstr[i] != INT64_MIN ||
                   frag[i] >= 0;
    if (!changed) { out.append(b + eb[i], ee[i] - eb[i]); continue; }
    edits.clear();
    if (ntid[i] != INT64_MIN && tb[i] >= 0) {
      auto r = std::to_chars(nbuf, nbuf + sizeof(nbuf), ntid[i]);
      edits.push_back({tb[i], te[i], std::string(nbuf, r.ptr)});
    }
    if (!std::isnan(nts[i]) && sb[i] >= 0) {
      auto r = std::to_chars(nbuf, nbuf + sizeof(nbuf), nts[i]);
      std::string t(nbuf, r.ptr);
      if (t.find_first_of(".e") == std::string::npos) t += ".0";
      edits.push_back({sb[i], se[i], t});
    }
    std::string tail;  // appended before the args object's closing brace
    if (nstr[i] != INT64_MIN) {
      auto r = std::to_chars(nbuf, nbuf + sizeof(nbuf), nstr[i]);
      std::string v(nbuf, r.ptr);
      if (stb[i] >= 0) edits.push_back({stb[i], ste[i], v});
      else tail += "\"stream\": " + v;
    }
    if (frag[i] >= 0) {
      if (!tail.empty()) tail += ", ";
      tail += frags[static_cast<size_t>(frag[i])];
    }
    if (!tail.empty() && ac[i] >= 0) {
      int64_t k = ac[i] - 1;
      while (k > eb[i] && (b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t')) --k;
      edits.push_back({ac[i], ac[i], (b[k] == '{' ? "" : ", ") + tail});
    }
    std::sort(edits.begin(), edits.end(), [](const Edit& x, const Edit& y) { return x.at < y.at; });
    int64_t cur = eb[i];
    for (auto& ed : edits) {
      out.append(b + cur, ed.at - cur);
      out += ed.text;
      cur = ed.until;
    }
    out.append(b + cur, ee[i] - cur);
  }
  return nb::bytes(out.data(), out.size());
}

}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "graphscope native core: CUPTI recorder, graph inspector, activity tracer";
  m.def("load_driver", &load_driver, "Open libcuda.so.1; returns '' or why not.");
  m.def("load_cupti", &load_cupti, nb::arg("path"), "Open libcupti at path; '' or why not.");
  m.def("probe", &probe, nb::arg("try_subscribe") = false);
  m.def("push_scope", [](int64_t s) { tls.scopes.push_back(s); }, nb::arg("scope"));
  m.def("pop_scope", []() -> int64_t {
    if (tls.scopes.empty()) return -1;
    int64_t s = tls.scopes.back();
    tls.scopes.pop_back();
    return s;
  });
  m.def("current_scope", []() -> int64_t { return tls.current(); });
  m.def("set_slot", [](int64_t s) {
    tls.slot = s;
    tls.slot_gen = g_slot_generation.load(std::memory_order_relaxed);
  }, nb::arg("scope"), "Set this thread's backward slot (used when no scope is pushed).");
  m.def("retire_slots", []() { g_slot_generation.fetch_add(1); },
        "Retire every thread's backward slot.");
  m.def("scope_depth", []() -> size_t { return tls.scopes.size(); });
  m.def("set_current_op", [](int64_t op) {
    int64_t prev = tls.op;
    tls.op = op;
    return prev;
  }, nb::arg("op"));
  m.def("current_op", []() -> int64_t { return tls.op; });
  m.def("recorder_start", &recorder_start, nb::arg("clear") = true);
  m.def("recorder_stop", &recorder_stop);
  m.def("recorder_active", []() -> bool { return rec.active; });
  m.def("recorder_records", &recorder_records);
  m.def("inspect_graph", &inspect_graph, nb::arg("graph"));
  m.def("exec_id", &exec_id, nb::arg("graph_exec"));
  m.def("graph_id", &graph_id, nb::arg("graph"));
  m.def("debug_dot_print", &debug_dot_print, nb::arg("graph"), nb::arg("path"));
  m.def("tracer_start", &tracer_start);
  m.def("tracer_stop", &tracer_stop);
  m.def("tracer_active", []() -> bool { return tracer.active; });
  m.def("demangle", [](const std::string& s) { return demangle(s.c_str()); }, nb::arg("name"));
  m.def("scan_events", &scan_events, nb::arg("data"), nb::arg("pos"));
  m.def("rewrite_events", &rewrite_events);
}
