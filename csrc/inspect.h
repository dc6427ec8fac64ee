// Graph inspection: walk a template cudaGraph_t (nodes in creation order, kernel names and
// launch dimensions, memcpy/memset sizes, edges) and read exec/graph ids.
#pragma once

#include <cstdint>
#include <string>

#include "common.h"

namespace gs {

std::string demangle(const char* mangled);
nb::dict inspect_graph(uintptr_t graph_ptr, bool demangle_names = true);
// The graph being captured on `stream` (0: the stream is not capturing). The driver permits
// every operation but destroy and node removal on it until the capture ends.
uintptr_t capture_graph(uintptr_t stream);
uint32_t exec_id(uintptr_t exec_ptr);
uint32_t graph_id(uintptr_t graph_ptr);
// Read CUPTI's ids of an empty graph made and dropped here: a process's first id read costs
// ~15 ms (bench/probes/first_call_gpu.py); done at install, not in the program's first
// capture. Returns why it could not be done ('' when done).
std::string warm_graph_ids();
void debug_dot_print(uintptr_t graph_ptr, const std::string& path);

}  // namespace gs
