// The CUPTI resource-callback recorder: one row per graph node created (GRAPHNODE_CREATED),
// clone (GRAPHNODE_CLONED), exec graph (GRAPHEXEC_CREATED) and graph clone while subscribed.
//
// Threads: callbacks run on whichever thread makes the CUDA call (the main thread for
// forward, autograd's device thread for backward); each reads its own thread's scope/op
// (scopes.h) and appends under one mutex. Subscribe only between capture begin and
// instantiate end: CUPTI allows one subscriber per process (torch.profiler needs it later).
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common.h"

namespace gs {

struct Recorder {
  std::mutex mu;
  CUpti_SubscriberHandle sub = nullptr;
  std::atomic<bool> active{false};
  // the subscription is kept across capture windows (graphscope run's batch: Python's
  // HeldRecorder), not one window's (recording()); set by recorder_start, reset by stop
  bool held = false;
  // whether callbacks record: graphscope run holds the subscription across a batch of
  // captures and opens the gate for each capture window only
  std::atomic<bool> gate{true};
  // whether CUPTI calls the callbacks at all: off while the gate is shut (a subscription held
  // with its callbacks on made CUPTI build and deliver a record for every node a counted
  // capture created and every node instantiate cloned, for the gate to drop)
  bool callbacks = false;
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
extern Recorder rec;

uint64_t node_id_of(CUgraphNode n);
uint32_t graph_id_of(CUgraph g);
void recorder_start(bool clear, bool held = false);
void recorder_stop();
void recorder_gate(bool open, int callbacks = -1);
void recorder_clear();
nb::dict recorder_records();

}  // namespace gs
