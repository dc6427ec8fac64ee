#include "tracer.h"

#include <cuda.h>
#include <cupti.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>

#include "dl.h"
#include "pmsampling.h"
#include "recorder.h"

namespace gs {

Tracer tracer;

namespace {


// Buffers are kept for the next trace (their pages are already mapped): at most kPoolMax.
constexpr size_t kPoolMax = 4;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> g(tracer.pool_mu);
    while (!tracer.pool.empty() && p == nullptr) {
      auto [b, size] = tracer.pool.back();
      tracer.pool.pop_back();
      if (size == tracer.buffer_bytes) {
        p = b;
      } else {
        std::free(b);  // the buffer size changed since
      }
    }
  }
  size_t bytes = tracer.buffer_bytes;
  if (p == nullptr && posix_memalign(&p, kAlign, bytes) != 0) p = nullptr;
  *buffer = static_cast<uint8_t*>(p);
  *size = p ? bytes : 0;
  *max_records = 0;
  tracer.buffers++;
}

void decode_buffer(uint8_t* buffer, size_t size, size_t valid);  // below; holds tracer.mu

// CUPTI hands a buffer back when it is full (on its worker thread, while the replays still
// run) or at the flush in tracer_stop: decode it right away, so that only the last buffer's
// records are decoded after the replays.
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t size,
                               size_t valid) {
  std::lock_guard<std::mutex> g(tracer.mu);
  if (buffer == nullptr) return;
  decode_buffer(buffer, size, valid);
}

// Back to the pool (or freed).
void release_buffer(uint8_t* b, size_t size) {
  std::lock_guard<std::mutex> g(tracer.pool_mu);
  if (tracer.pool.size() < kPoolMax) {
    tracer.pool.emplace_back(b, size);
  } else {
    std::free(b);
  }
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

// The host side of each graph launch: cudaGraphLaunch's runtime-API activity record (its CPU
// interval on CUPTI's clock, the one kernel records use, and the correlation id that every node
// of that launch carries). CUPTI_ACTIVITY_KIND_RUNTIME is enabled for the traced replays only
// (as Kineto does); every other runtime call's record is counted and dropped at decode.
const CUpti_CallbackId kLaunchCbids[] = {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};

struct TraceColumns {
  std::vector<int32_t> kind;
  std::vector<uint64_t> start, end, graph_node_id;
  std::vector<uint32_t> device, stream, correlation, graph_id;
  std::vector<int32_t> grid, block, name_idx;
  std::vector<uint64_t> bytes;
  std::vector<uint64_t> launch_start, launch_end;  // cudaGraphLaunch host intervals
  std::vector<uint32_t> launch_correlation;
  uint64_t runtime_records = 0;  // every runtime-API record seen (launches among them)
  std::vector<std::string> names;
  std::unordered_map<std::string, int32_t> name_of;
  // CUPTI hands the same name pointer for every launch of a function: look that up first, so
  // that the string is hashed (and copied) once per kernel, not once per record
  std::unordered_map<const char*, int32_t> name_at;
  uint64_t unknown = 0;

  void reserve(size_t n) {
    kind.reserve(n); start.reserve(n); end.reserve(n); graph_node_id.reserve(n);
    device.reserve(n); stream.reserve(n); correlation.reserve(n); graph_id.reserve(n);
    grid.reserve(3 * n); block.reserve(3 * n); name_idx.reserve(n); bytes.reserve(n);
  }
};

template <typename T>
T field(const uint8_t* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(T));
  return v;
}

void decode(TraceColumns& c, const uint8_t* r) {
  const auto kind = field<CUpti_ActivityKind>(r, 0);
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    ++c.runtime_records;
    const auto cbid = field<CUpti_CallbackId>(r, offsetof(CUpti_ActivityAPI, cbid));
    if (cbid == kLaunchCbids[0] || cbid == kLaunchCbids[1]) {
      c.launch_start.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityAPI, start)));
      c.launch_end.push_back(field<uint64_t>(r, offsetof(CUpti_ActivityAPI, end)));
      c.launch_correlation.push_back(
          field<uint32_t>(r, offsetof(CUpti_ActivityAPI, correlationId)));
    }
    return;
  }
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
    int32_t idx;
    auto at = c.name_at.find(nm);
    if (at != c.name_at.end()) {
      idx = at->second;
    } else {
      std::string key = nm ? nm : "";
      auto it = c.name_of.find(key);
      if (it == c.name_of.end()) {
        idx = static_cast<int32_t>(c.names.size());
        c.names.push_back(key);
        c.name_of.emplace(std::move(key), idx);
      } else {
        idx = it->second;
      }
      c.name_at.emplace(nm, idx);
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

TraceColumns g_cols;  // guarded by tracer.mu

void decode_buffer(uint8_t* buffer, size_t size, size_t valid) {
  auto t0 = std::chrono::steady_clock::now();
  CUpti_Activity* rec_ptr = nullptr;
  while (cupti.ActivityGetNextRecord(buffer, valid, &rec_ptr) == CUPTI_SUCCESS) {
    ++tracer.records;
    if (tracer.decode) decode(g_cols, reinterpret_cast<const uint8_t*>(rec_ptr));
  }
  release_buffer(buffer, size);
  tracer.decode_ns += static_cast<uint64_t>(
      std::chrono::nanoseconds(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

void tracer_start(bool decode_records, size_t buffer_kb) {
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
    g_cols = TraceColumns();
    g_cols.reserve(1 << 14);
    tracer.decode = decode_records;
    tracer.records = 0;
    tracer.decode_ns = 0;
    if (buffer_kb) tracer.buffer_bytes = std::max<size_t>(buffer_kb, 64) << 10;
  }
  for (auto k : kTraceKinds) {
    r = cupti.ActivityEnable(k);
    if (r != CUPTI_SUCCESS) {
      for (auto k2 : kTraceKinds) cupti.ActivityDisable(k2);
      raise_cupti("cuptiActivityEnable", r);
    }
  }
  // launches are optional: a CUPTI that refuses the runtime kind still traces the nodes
  tracer.launches = cupti.ActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS;
  tracer.active = true;
}

nb::dict tracer_stop() {
  require_loaded();
  if (!tracer.active) throw std::runtime_error("state:0:the graphscope tracer is not running");
  auto t0 = std::chrono::steady_clock::now();
  uint64_t decoded_before;
  {
    std::lock_guard<std::mutex> g(tracer.mu);
    decoded_before = tracer.decode_ns;
  }
  // the remaining buffers come back through buffer_completed, decoded there
  CUptiResult flush = cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  auto t1 = std::chrono::steady_clock::now();
  for (auto k : kTraceKinds) cupti.ActivityDisable(k);
  if (tracer.launches) cupti.ActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  tracer.active = false;
  size_t dropped = 0;
  cupti.ActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  TraceColumns c;
  uint64_t n_records, decode_ns;
  {
    std::lock_guard<std::mutex> g(tracer.mu);
    std::swap(c, g_cols);
    n_records = tracer.records;
    decode_ns = tracer.decode_ns;
  }
  if (flush != CUPTI_SUCCESS) raise_cupti("cuptiActivityFlushAll", flush);
  nb::dict d;
  // flush_ns includes decoding the buffers it completed (tail_decode_ns of it); decode_ns is
  // all decoding, most of it on CUPTI's thread while the replays ran
  d["flush_ns"] = static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count());
  d["tail_decode_ns"] = decode_ns - decoded_before;
  d["decode_ns"] = decode_ns;
  d["records"] = n_records;
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
  d["launch_start"] = as_bytes(c.launch_start);
  d["launch_end"] = as_bytes(c.launch_end);
  d["launch_correlation"] = as_bytes(c.launch_correlation);
  d["runtime_records"] = c.runtime_records;
  d["launch_tracing"] = tracer.launches;
  d["names"] = c.names;
  d["dropped"] = static_cast<uint64_t>(dropped);
  d["unknown_records"] = c.unknown;
  return d;
}


namespace {

// 0: no detach under way, 1: a callback is finalizing, 2: finalized (g_detach_rc says how)
std::atomic<int> g_detach{0};
std::atomic<int> g_detach_rc{CUPTI_SUCCESS};

// The detaching subscriber's callback: at the exit of the driver call cupti_detach makes (or
// of another thread's cuGraphCreate that gets here first), finalize once. Finalizing frees
// the subscriber.
void CUPTIAPI detach_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d == nullptr || d->callbackSite != CUPTI_API_EXIT) return;
  int expected = 0;
  if (!g_detach.compare_exchange_strong(expected, 1)) return;
  g_detach_rc = static_cast<int>(cupti.Finalize());
  g_detach = 2;
}

}  // namespace

std::string cupti_detach() {
  require_loaded();
  if (!cupti.Finalize) return cupti.path + " has no cuptiFinalize";
  if (!drv.GraphCreate || !drv.GraphDestroy) return "libcuda lacks cuGraphCreate/cuGraphDestroy";
  if (tracer.active) return "the graphscope tracer is running";
  if (rec.active) return "the graphscope recorder is subscribed";
  if (pm_active()) return "PM sampling is on";
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult r = cupti.Subscribe(&sub, detach_callback, nullptr);
  // another subscriber (torch.profiler's, once it has run) owns CUPTI: it stays attached
  if (r != CUPTI_SUCCESS) return "cuptiSubscribe: " + cupti_error(r);
  g_detach = 0;
  g_detach_rc = CUPTI_SUCCESS;
  r = cupti.EnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                           CUPTI_DRIVER_TRACE_CBID_cuGraphCreate);
  if (r != CUPTI_SUCCESS) {
    cupti.Unsubscribe(sub);
    return "cuptiEnableCallback: " + cupti_error(r);
  }
  CUgraph g = nullptr;
  CUresult cr = drv.GraphCreate(&g, 0);  // the callback finalizes at its exit
  if (cr == CUDA_SUCCESS) drv.GraphDestroy(g);
  if (g_detach.load() == 0) {
    cupti.Unsubscribe(sub);
    return "cuGraphCreate's callback did not come (error " + std::to_string(static_cast<int>(cr)) +
           ")";
  }
  // another thread's cuGraphCreate may have reached the callback first: wait for its finalize
  for (int i = 0; g_detach.load() == 1 && i < 10000; ++i) std::this_thread::yield();
  if (g_detach.load() != 2) return "cuptiFinalize did not return on the thread that called it";
  pm_forget_init();
  auto rc = static_cast<CUptiResult>(g_detach_rc.load());
  if (rc != CUPTI_SUCCESS) return "cuptiFinalize: " + cupti_error(rc);
  return "";
}

}  // namespace gs
