// Graph inspection: walk a template cudaGraph_t (nodes in creation order, kernel names and
// launch dimensions, memcpy/memset sizes, edges) and read exec/graph ids.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common.h"

namespace gs {

std::string demangle(const char* mangled);
// CUPTI's id of each of `nodes` (graph `g`'s nodes as cuGraphGetNodes lists them) into `ids`:
// the graph's id << 32 | the node's creation index. The driver lists a graph's nodes in
// creation order (bench/probes/inspect_parts_gpu.py: every graph of a 67-bucket ladder), so
// the ids are the positions where that holds: asking CUPTI costs ~0.9 us a node on the H200,
// 60% of reading a graph. The process's first graph of two or more nodes is checked node by
// node against CUPTI; once that held, each graph's first and last node are (a removed node or
// another order asks CUPTI for every node of that graph); once it failed, CUPTI is asked for
// every node. Returns whether the ids are positions.
// `graph_id`: g's CUPTI id when the caller has it (-1: asked here).
bool node_ids(CUgraph g, const std::vector<CUgraphNode>& nodes, std::vector<uint64_t>& ids,
              int64_t graph_id = -1);
// Whether ids are positions: -1 unknown (not checked yet), 0 no, 1 yes; set_positional_ids
// forces it (tests; GRAPHSCOPE_NODE_IDS=cupti sets 0).
int positional_ids();
void set_positional_ids(int state);
// A graph's nodes as cuGraphGetNodes lists them, their ids (node_ids) and, for finding a node
// handle's position, the handles sorted (a flat vector searched by halves: one allocation for
// the graph, where a hash map allocated per node).
struct NodeList {
  uint32_t graph_id = 0;  // CUPTI's id of the graph
  std::vector<CUgraphNode> nodes;
  std::vector<uint64_t> ids;
  std::vector<std::pair<CUgraphNode, uint32_t>> sorted;
  // the position of `node` in `nodes`, or -1
  int64_t index_of(CUgraphNode node) const;
};
// List `graph`'s nodes into `out` (CUDA_SUCCESS, or the driver's error).
CUresult list_nodes(CUgraph graph, NodeList& out);
nb::dict inspect_graph(uintptr_t graph_ptr, bool demangle_names = true);
// inspect_graph's answer from nodes already listed
nb::dict inspect_listed(CUgraph graph, const NodeList& listed, bool demangle_names);
// graphscope run's read of the graph being captured on `stream`, just before capture_end: its
// nodes listed once, node counting detached (with `detach_count`: its waiting notes resolved
// from that list, nodecount.h) and the graph inspected (inspect_graph(demangle=False)'s
// answer). None when the stream is not capturing (counting is detached all the same).
nb::object read_capture(uintptr_t stream, bool detach_count);
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
