// The CUPTI activity tracer: kernel, memcpy and memset records of replays, as columns.
//
// Threads: CUPTI hands completed buffers back on its own worker thread while the replays run
// (or, at the flush in tracer_stop, on the calling thread); each is decoded there into
// mutex-guarded columns and returned to a small pool. The activity buffer callbacks are
// process-global: never trace while torch.profiler runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common.h"

namespace gs {

constexpr size_t kBufferBytes = 1u << 20;  // ~5,000 kernel records: several per step
constexpr size_t kAlign = 8;

struct Tracer {
  std::mutex mu;       // the decoded columns and the counters below
  std::mutex pool_mu;  // the pool (buffer requests never wait for a decode)
  std::vector<std::pair<void*, size_t>> pool;  // emptied buffers (and their sizes), reused
  std::atomic<bool> active{false};
  bool launches = false;  // CUPTI_ACTIVITY_KIND_RUNTIME on (graph launch intervals)
  std::atomic<uint64_t> buffers{0};
  std::atomic<size_t> buffer_bytes{kBufferBytes};
  // under mu:
  bool decode = true;       // false: records counted, not decoded (the bench's CUPTI floor)
  uint64_t records = 0;
  uint64_t decode_ns = 0;
};
extern Tracer tracer;

void tracer_start(bool decode_records = true, size_t buffer_kb = 0);
nb::dict tracer_stop();
// Detach CUPTI from the process (cuptiFinalize, from a driver call's exit callsite, as NVIDIA's
// cupti_finalize sample and Kineto's teardown do): once its activity records have been on, an
// attached CUPTI keeps slowing the program's later captures. Any later CUPTI call attaches it
// again. Returns "" or why it did not (the tracer or recorder running, PM sampling on, another
// subscriber such as torch.profiler's holding CUPTI).
std::string cupti_detach();

}  // namespace gs
