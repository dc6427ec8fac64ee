#include "inspect.h"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dl.h"
#include "nodecount.h"
#include "recorder.h"

namespace gs {

std::string demangle(const char* mangled) {
  if (!mangled) return "";
  int status = 0;
  char* out = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || !out) return std::string(mangled);
  std::string s(out);
  std::free(out);
  return s;
}

namespace {
std::atomic<int> g_positional{-1};
}  // namespace

int positional_ids() { return g_positional.load(); }
void set_positional_ids(int state) { g_positional.store(state < 0 ? -1 : state > 0 ? 1 : 0); }

bool node_ids(CUgraph g, const std::vector<CUgraphNode>& nodes, std::vector<uint64_t>& ids,
              int64_t graph_id) {
  const size_t n = nodes.size();
  ids.resize(n);
  const int state = g_positional.load();
  if (n > 0 && state != 0) {
    const uint64_t base = static_cast<uint64_t>(graph_id >= 0 ? static_cast<uint32_t>(graph_id)
                                                              : graph_id_of(g)) << 32;
    if (state == 1) {
      if (node_id_of(nodes[0]) == base && node_id_of(nodes[n - 1]) == (base | (n - 1))) {
        for (size_t i = 0; i < n; ++i) ids[i] = base | i;
        return true;
      }
    } else {
      bool same = true;
      for (size_t i = 0; i < n; ++i) {
        ids[i] = node_id_of(nodes[i]);
        same = same && ids[i] == (base | i);
      }
      if (n >= 2) {
        int unknown = -1;
        g_positional.compare_exchange_strong(unknown, same ? 1 : 0);
      }
      return same;
    }
  }
  for (size_t i = 0; i < n; ++i) ids[i] = node_id_of(nodes[i]);
  return false;
}

int64_t NodeList::index_of(CUgraphNode node) const {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), node,
                             [](const std::pair<CUgraphNode, uint32_t>& e, CUgraphNode x) {
                               return std::less<CUgraphNode>()(e.first, x);
                             });
  return it != sorted.end() && it->first == node ? static_cast<int64_t>(it->second) : -1;
}

CUresult list_nodes(CUgraph graph, NodeList& out) {
  size_t n = 0;
  CUresult r = drv.GraphGetNodes(graph, nullptr, &n);
  if (r != CUDA_SUCCESS) return r;
  out.nodes.assign(n, nullptr);
  if (n) {
    r = drv.GraphGetNodes(graph, out.nodes.data(), &n);
    if (r != CUDA_SUCCESS) return r;
    out.nodes.resize(n);
  }
  out.graph_id = graph_id_of(graph);
  node_ids(graph, out.nodes, out.ids, out.graph_id);
  out.sorted.resize(n);
  for (size_t i = 0; i < n; ++i) out.sorted[i] = {out.nodes[i], static_cast<uint32_t>(i)};
  std::sort(out.sorted.begin(), out.sorted.end(),
            [](const std::pair<CUgraphNode, uint32_t>& a,
               const std::pair<CUgraphNode, uint32_t>& b) {
              return std::less<CUgraphNode>()(a.first, b.first);
            });
  return CUDA_SUCCESS;
}

nb::dict inspect_graph(uintptr_t graph_ptr, bool demangle_names) {
  require_loaded();
  auto graph = reinterpret_cast<CUgraph>(graph_ptr);
  NodeList listed;
  CUresult r = list_nodes(graph, listed);
  if (r != CUDA_SUCCESS) raise_cuda("cuGraphGetNodes", r);
  return inspect_listed(graph, listed, demangle_names);
}

nb::object read_capture(uintptr_t stream, bool detach_count) {
  uintptr_t g = 0;
  try {
    g = capture_graph(stream);
  } catch (...) {  // counting stops however the read ends
    if (detach_count) count_detach();
    throw;
  }
  auto graph = reinterpret_cast<CUgraph>(g);
  if (!g) {
    if (detach_count) count_detach();
    return nb::none();
  }
  NodeList listed;
  CUresult r = list_nodes(graph, listed);
  if (detach_count) count_detach(r == CUDA_SUCCESS ? &listed : nullptr, graph);
  if (r != CUDA_SUCCESS) raise_cuda("cuGraphGetNodes", r);
  return inspect_listed(graph, listed, false);
}

namespace {

// inspect_listed's node columns, filled node by node.
struct NodeColumns {
  explicit NodeColumns(size_t n)
      : types(n), grid(3 * n, 0), block(3 * n, 0), smem(n, 0), regs(n, -1), bytes(n, 0),
        name_idx(n, -1) {}

  std::vector<int32_t> types;
  std::vector<int32_t> grid, block;
  std::vector<uint32_t> smem;
  std::vector<int32_t> regs;  // registers per thread; -1: the driver did not say
  std::vector<uint64_t> bytes;
  std::vector<int32_t> name_idx;
  std::vector<std::string> names;

  // Node i: its type and what that type has (a kernel's name and launch dimensions, a copy's
  // or a fill's bytes).
  void read(CUgraphNode node, size_t i) {
    // Most nodes of a captured graph are kernels: their parameters are asked for first, and
    // only a node that has none is asked its type (one driver call less per kernel node, in a
    // program's capture loop; the call fails on any other type of node)
    CUDA_KERNEL_NODE_PARAMS kp;
    std::memset(&kp, 0, sizeof(kp));
    const bool kernel_params = drv.GraphKernelNodeGetParams(node, &kp) == CUDA_SUCCESS;
    CUgraphNodeType t = CU_GRAPH_NODE_TYPE_KERNEL;
    if (!kernel_params && drv.GraphNodeGetType(node, &t) != CUDA_SUCCESS)
      t = CU_GRAPH_NODE_TYPE_EMPTY;  // a node the driver will not describe: nothing to read
    types[i] = static_cast<int32_t>(t);
    if (t == CU_GRAPH_NODE_TYPE_KERNEL) {
      if (kernel_params) kernel(kp, i);
    } else if (t == CU_GRAPH_NODE_TYPE_MEMCPY) {
      CUDA_MEMCPY3D p;
      std::memset(&p, 0, sizeof(p));
      if (drv.GraphMemcpyNodeGetParams(node, &p) == CUDA_SUCCESS) {
        bytes[i] = static_cast<uint64_t>(p.WidthInBytes) * (p.Height ? p.Height : 1) *
                   (p.Depth ? p.Depth : 1);
      }
    } else if (t == CU_GRAPH_NODE_TYPE_MEMSET) {
      CUDA_MEMSET_NODE_PARAMS p;
      std::memset(&p, 0, sizeof(p));
      if (drv.GraphMemsetNodeGetParams(node, &p) == CUDA_SUCCESS) {
        bytes[i] = static_cast<uint64_t>(p.width) * p.elementSize * (p.height ? p.height : 1);
      }
    }
  }

 private:
  void kernel(const CUDA_KERNEL_NODE_PARAMS& p, size_t i) {
    // a graph launches few distinct functions many times: each named (and its name hashed)
    // once
    const void* fn = p.func ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
    auto hit = fn ? name_of_fn_.find(fn) : name_of_fn_.end();
    if (hit != name_of_fn_.end()) {
      name_idx[i] = hit->second;
    } else {
      const char* nm = nullptr;
      if (p.func) drv.FuncGetName(&nm, p.func);
      if (!nm && p.kern && drv.KernelGetName) drv.KernelGetName(&nm, p.kern);
      name_idx[i] = intern(nm ? nm : "<unknown kernel>");
      if (fn && nm) name_of_fn_.emplace(fn, name_idx[i]);
    }
    grid[3 * i] = p.gridDimX; grid[3 * i + 1] = p.gridDimY; grid[3 * i + 2] = p.gridDimZ;
    block[3 * i] = p.blockDimX; block[3 * i + 1] = p.blockDimY; block[3 * i + 2] = p.blockDimZ;
    smem[i] = p.sharedMemBytes;
    regs[i] = registers(p.func);
  }

  // A function's registers per thread, asked once per function.
  int32_t registers(CUfunction f) {
    if (!f || !drv.FuncGetAttribute) return -1;
    auto hit = regs_of_fn_.find(f);
    if (hit != regs_of_fn_.end()) return hit->second;
    int v = -1;
    if (drv.FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f) != CUDA_SUCCESS) v = -1;
    regs_of_fn_.emplace(f, v);
    return v;
  }

  int32_t intern(const char* s) {
    std::string k = s ? s : "";
    auto it = name_of_.find(k);
    if (it != name_of_.end()) return it->second;
    int32_t i = static_cast<int32_t>(names.size());
    names.push_back(k);
    name_of_.emplace(k, i);
    return i;
  }

  std::unordered_map<std::string, int32_t> name_of_;
  std::unordered_map<const void*, int32_t> name_of_fn_;  // CUfunction (or CUkernel) -> name
  std::unordered_map<CUfunction, int32_t> regs_of_fn_;
};

// The graph's edges as (from, to) node ids.
std::pair<std::vector<uint64_t>, std::vector<uint64_t>> edge_ids(CUgraph graph,
                                                                 const NodeList& listed) {
  size_t ne = 0;
  CUresult r = drv.GraphGetEdges(graph, nullptr, nullptr, nullptr, &ne);  // count only
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
  auto id_of_node = [&](CUgraphNode x) {
    const int64_t i = listed.index_of(x);
    return i >= 0 ? listed.ids[static_cast<size_t>(i)] : node_id_of(x);
  };
  for (size_t i = 0; i < ne; ++i) {
    efrom[i] = id_of_node(from[i]);
    eto[i] = id_of_node(to[i]);
  }
  return {std::move(efrom), std::move(eto)};
}

}  // namespace

nb::dict inspect_listed(CUgraph graph, const NodeList& listed, bool demangle_names) {
  const size_t n = listed.nodes.size();
  NodeColumns cols(n);
  for (size_t i = 0; i < n; ++i) cols.read(listed.nodes[i], i);
  auto [efrom, eto] = edge_ids(graph, listed);
  std::vector<std::string> demangled;
  demangled.reserve(cols.names.size());
  for (auto& s : cols.names) demangled.push_back(demangle_names ? demangle(s.c_str()) : s);
  nb::dict d;
  d["graph_id"] = listed.graph_id;
  d["node_id"] = as_bytes(listed.ids);
  d["node_type"] = as_bytes(cols.types);
  d["grid"] = as_bytes(cols.grid);
  d["block"] = as_bytes(cols.block);
  d["smem"] = as_bytes(cols.smem);
  d["regs"] = as_bytes(cols.regs);
  d["bytes"] = as_bytes(cols.bytes);
  d["name_idx"] = as_bytes(cols.name_idx);
  d["names"] = cols.names;
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

uintptr_t capture_graph(uintptr_t stream) {
  require_loaded();
  if (!drv.StreamGetCaptureInfo)
    throw std::runtime_error("notloaded:0:libcuda lacks cuStreamGetCaptureInfo_v3");
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = nullptr;
  CUresult r = drv.StreamGetCaptureInfo(reinterpret_cast<CUstream>(stream), &status, nullptr,
                                        &graph, nullptr, nullptr, nullptr);
  if (r != CUDA_SUCCESS) raise_cuda("cuStreamGetCaptureInfo", r);
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || graph == nullptr) return 0;
  return reinterpret_cast<uintptr_t>(graph);
}

std::string warm_graph_ids() {
  require_loaded();
  if (!drv.GraphCreate || !drv.GraphAddEmptyNode || !drv.GraphDestroy)
    return "libcuda lacks cuGraphCreate/cuGraphAddEmptyNode/cuGraphDestroy";
  CUgraph g = nullptr;
  CUresult r = drv.GraphCreate(&g, 0);
  if (r != CUDA_SUCCESS) return "cuGraphCreate: error " + std::to_string(static_cast<int>(r));
  CUgraphNode n = nullptr;
  std::string why;
  r = drv.GraphAddEmptyNode(&n, g, nullptr, 0);
  if (r != CUDA_SUCCESS) {
    why = "cuGraphAddEmptyNode: error " + std::to_string(static_cast<int>(r));
  } else {
    uint64_t nid = 0;
    uint32_t gid = 0;
    CUptiResult c = cupti.GetGraphNodeId(n, &nid);
    if (c == CUPTI_SUCCESS) c = cupti.GetGraphId(g, &gid);
    if (c != CUPTI_SUCCESS) why = "cuptiGetGraphNodeId: " + cupti_error(c);
  }
  drv.GraphDestroy(g);
  return why;
}

void debug_dot_print(uintptr_t graph_ptr, const std::string& path) {
  require_loaded();
  // 1 = CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE
  CUresult r = drv.GraphDebugDotPrint(reinterpret_cast<CUgraph>(graph_ptr), path.c_str(), 1);
  if (r != CUDA_SUCCESS) raise_cuda("cuGraphDebugDotPrint", r);
}


}  // namespace gs
