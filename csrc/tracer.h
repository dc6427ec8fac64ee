// The CUPTI activity tracer: kernel, memcpy and memset records of replays, as columns.
//
// Threads: CUPTI hands completed buffers back on its own worker thread; they go into a
// mutex-guarded list and are decoded on the Python thread in tracer_stop(). The activity
// buffer callbacks are process-global: never trace while torch.profiler runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "common.h"

namespace gs {

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kAlign = 8;

struct Tracer {
  std::mutex mu;
  std::vector<std::pair<uint8_t*, size_t>> done;  // (buffer, valid bytes)
  std::vector<void*> pool;                          // emptied buffers, reused
  std::atomic<bool> active{false};
  std::atomic<uint64_t> buffers{0};
};
extern Tracer tracer;

void tracer_start();
nb::dict tracer_stop(bool decode_records = true);

}  // namespace gs
