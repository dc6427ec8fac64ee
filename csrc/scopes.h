// Per-thread scope state read by the CUPTI resource callback.
//
// The innermost pushed scope wins; with nothing pushed, the thread's backward "slot" (set by
// autograd-node pre-hooks) applies if it belongs to the current generation. Bumping the
// generation (end of a backward call, end of a capture) retires every thread's slot at once.
// Each thread touches only its own state: no locks.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace gs {

extern std::atomic<uint64_t> g_slot_generation;

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
extern thread_local ThreadState tls;

}  // namespace gs
