#include "recorder.h"

#include <cstring>
#include <string>

#include "dl.h"
#include "scopes.h"

namespace gs {

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
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || !data || !rec.gate.load(std::memory_order_acquire))
    return;
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

namespace {
const CUpti_CallbackId kCallbacks[] = {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                                       CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
                                       CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
                                       CUPTI_CBID_RESOURCE_GRAPH_CLONED};

CUptiResult enable_callbacks(CUpti_SubscriberHandle sub, bool on) {
  for (auto id : kCallbacks) {
    CUptiResult r = cupti.EnableCallback(on ? 1 : 0, sub, CUPTI_CB_DOMAIN_RESOURCE, id);
    if (r != CUPTI_SUCCESS) return r;
  }
  return CUPTI_SUCCESS;
}
}  // namespace

// Subscribe to the resource callbacks. Returns "" or the holder's name on error 39.
void recorder_start(bool clear, bool held) {
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
  r = enable_callbacks(sub, true);
  if (r != CUPTI_SUCCESS) {
    cupti.Unsubscribe(sub);
    raise_cupti("cuptiEnableCallback", r);
  }
  rec.sub = sub;
  rec.callbacks = true;
  rec.gate = true;
  rec.held = held;
  rec.active = true;
}

// The gate, and CUPTI's callbacks with it (`callbacks` -1: as the gate; 0/1: off/on whatever the
// gate, for bench/probes/held_callbacks_gpu.py to measure the difference). Shut, the callbacks
// are disabled: a subscription held across a batch of captures costs the captures made
// between its windows nothing per node. An enable that fails raises (the window would record
// nothing); a disable that fails leaves them delivered and dropped by the gate, as before.
void recorder_gate(bool open, int callbacks) {
  const bool want = callbacks < 0 ? open : callbacks != 0;
  if (!open) rec.gate.store(false, std::memory_order_release);
  if (rec.active && rec.callbacks != want) {
    CUptiResult r = enable_callbacks(rec.sub, want);
    if (r == CUPTI_SUCCESS) {
      rec.callbacks = want;
    } else if (want) {
      raise_cupti("cuptiEnableCallback", r);
    }
  }
  if (open) rec.gate.store(true, std::memory_order_release);
}

void recorder_clear() {
  std::lock_guard<std::mutex> g(rec.mu);
  rec.clear();
}

void recorder_stop() {
  if (!rec.active) return;
  CUptiResult r = cupti.Unsubscribe(rec.sub);
  rec.sub = nullptr;
  rec.callbacks = false;
  rec.held = false;
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

}  // namespace gs
