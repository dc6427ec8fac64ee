// A cheap clock for graphscope's accounting of its own time inside a capture (module calls,
// node-count queries): the TSC where there is one (~10 ns a read against ~50 ns for
// clock_gettime, read several times per module call), converted to seconds by its rate against
// CLOCK_MONOTONIC since the extension loaded.
#pragma once

#include <cstdint>
#include <ctime>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace gs {

inline int64_t mono_ns_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline int64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return static_cast<int64_t>(__rdtsc());
#else
  return mono_ns_now();
#endif
}

// Both clocks when the extension loaded (dynamic initialisation of inline variables)
inline const int64_t kTicksAtLoad = ticks();
inline const int64_t kMonoAtLoad = mono_ns_now();

// Seconds in `n` ticks: the tick rate measured from the extension's load to now (nanoseconds
// exactly where ticks are CLOCK_MONOTONIC's).
inline double ticks_to_s(int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  const int64_t dt = ticks() - kTicksAtLoad, dm = mono_ns_now() - kMonoAtLoad;
  if (dt <= 0 || dm <= 0) return 0.0;
  return static_cast<double>(n) * (static_cast<double>(dm) / static_cast<double>(dt)) * 1e-9;
#else
  return static_cast<double>(n) * 1e-9;
#endif
}

}  // namespace gs
