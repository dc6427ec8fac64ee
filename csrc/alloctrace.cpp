// graphscope._alloctrace: the CUDA caching allocator's events inside capture windows, recorded by
// an AllocatorTraceTracker (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker)
// instead of torch's allocator history (torch.cuda.memory._record_memory_history).
//
// Why: with the history on, every allocator event is also copied into torch's ring buffer
// (a TraceEntry with two strings and a context pointer); on a 67-bucket decode ladder that
// cost 0.08-0.22 ms of each ~3.5 ms capture, the tracker 0.04 ms
// (bench/probes/held_callbacks_gpu.py, 2026-12-02). The allocator calls its trackers for every
// event whether the history is on or not; graphscope's keeps the time, action, device,
// address, size and pool of the events that fall inside an open window, and nothing
// otherwise (one relaxed load).
//
// Built only where torch's CUDA libraries (libc10_cuda.so) and the CUDA runtime headers are
// present at build time (the GPU machine's --no-build-isolation build), against that torch;
// graphscope/native.py uses it only when torch.__version__ matches TORCH_VERSION and the
// allocator backend is torch's native one, and falls back to the allocator history otherwise.
//
// The tracker is attached once per process (torch has no detach) and runs under the
// allocator's per-device lock: it takes only its own mutex, never the GIL. Times are
// CLOCK_REALTIME nanoseconds, the clock of Python's time.time_ns() that the meter's scope marks
// use, so an event's scope is found without a clock conversion.

#include <nanobind/nanobind.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <vector>

namespace nb = nanobind;

namespace {

using c10::cuda::CUDACachingAllocator::TraceEntry;

struct Event {
  int64_t t_ns;
  uint64_t addr;
  uint64_t size;
  uint64_t pool0;
  uint64_t pool1;
  int8_t action;  // an index into ACTIONS (code_of)
  int8_t device;
};

std::atomic<bool> g_open{false};
std::mutex g_mu;
std::vector<Event> g_events;  // since start(), in the order the allocator made them
size_t g_cap = 0;
uint64_t g_dropped = 0;        // events of open windows not kept (the buffer was full)
int64_t g_first_drop_ns = 0;   // when the first of them happened
std::once_flag g_attached;

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// The action's index in the module's ACTIONS, by name (the enum's order is torch's to change).
int8_t code_of(TraceEntry::Action a) {
  switch (a) {
    case TraceEntry::ALLOC: return 0;
    case TraceEntry::FREE_REQUESTED: return 1;
    case TraceEntry::FREE_COMPLETED: return 2;
    case TraceEntry::SEGMENT_ALLOC: return 3;
    case TraceEntry::SEGMENT_FREE: return 4;
    case TraceEntry::SEGMENT_MAP: return 5;
    case TraceEntry::SEGMENT_UNMAP: return 6;
    default: return 7;  // snapshot, oom and any action a later torch adds
  }
}

void on_event(const TraceEntry& te) {
  if (!g_open.load(std::memory_order_relaxed)) return;
  const int64_t t = realtime_ns();
  std::lock_guard<std::mutex> g(g_mu);
  if (g_events.size() >= g_cap) {
    if (g_dropped++ == 0) g_first_drop_ns = t;
    return;
  }
  g_events.push_back(Event{t, static_cast<uint64_t>(te.addr_), static_cast<uint64_t>(te.size_),
                           static_cast<uint64_t>(te.mempool_.first),
                           static_cast<uint64_t>(te.mempool_.second),
                           code_of(te.action_), static_cast<int8_t>(te.device_)});
}

void attach() {
  std::call_once(g_attached, [] {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(&on_event);
  });
}

// A batch of windows begins: events from now on are kept (the earlier ones are dropped).
void start(size_t max_events) {
  attach();
  std::lock_guard<std::mutex> g(g_mu);
  g_events.clear();
  g_events.reserve(max_events < 65536 ? max_events : 65536);
  g_cap = max_events;
  g_dropped = 0;
  g_first_drop_ns = 0;
  g_open.store(true, std::memory_order_relaxed);
}

// Events taken since start(): rows (time_ns, action, device, addr, size, pool0, pool1); the
// buffer is emptied and closed. Returns (rows, dropped, first_drop_ns).
nb::tuple take() {
  std::vector<Event> events;
  uint64_t dropped;
  int64_t first;
  {
    std::lock_guard<std::mutex> g(g_mu);
    g_open.store(false, std::memory_order_relaxed);
    events.swap(g_events);
    dropped = g_dropped;
    first = g_first_drop_ns;
    g_dropped = 0;
    g_first_drop_ns = 0;
  }
  nb::list rows;
  for (const Event& e : events) {
    rows.append(nb::make_tuple(e.t_ns, static_cast<int>(e.action), static_cast<int>(e.device),
                               e.addr, e.size, e.pool0, e.pool1));
  }
  return nb::make_tuple(rows, dropped, first);
}

}  // namespace

NB_MODULE(_alloctrace, m) {
  m.doc() = "graphscope's allocator trace tracker (CUDA caching allocator events), built "
            "against one torch";
  m.attr("TORCH_VERSION") = GRAPHSCOPE_TORCH_VERSION;
  m.attr("ACTIONS") = nb::make_tuple("alloc", "free_requested", "free_completed",
                                     "segment_alloc", "segment_free", "segment_map",
                                     "segment_unmap", "other");
  m.def("start", &start, nb::arg("max_events"),
        "Open the buffer, emptied, for up to max_events events (attaches the tracker once).");
  m.def("resume", [] { g_open.store(true, std::memory_order_relaxed); },
        "Open the buffer again, keeping its events (the next window of a batch).");
  m.def("pause", [] { g_open.store(false, std::memory_order_relaxed); },
        "Close the buffer: events until the next resume() or start() are not kept.");
  m.def("take", &take, "(rows, dropped, first_drop_ns): the events since start(); closed.");
  m.def("is_open", [] { return g_open.load(std::memory_order_relaxed); });
}
