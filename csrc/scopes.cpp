#include "scopes.h"

namespace gs {

std::atomic<uint64_t> g_slot_generation{1};
thread_local ThreadState tls;

}  // namespace gs
