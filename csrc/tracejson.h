// annotate-trace's native parts: no CUDA here, they build and run on any CPU. scan_events
// (tracejson.cpp) reads a trace's events with the JSON scanner of jsonscan.h, rewrite_events
// (tracerewrite.cpp) writes them out per a plan, ModuleSpans (modulespans.cpp) draws the
// module-span track.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common.h"

namespace gs {

// `data` (and rewrite_events' columns) may be any object with the buffer protocol: bytes, or a
// memoryview of a memory-mapped trace file.
nb::dict scan_events(nb::handle data, size_t pos, bool need_comma, size_t end = 0);
nb::bytes rewrite_events(nb::handle data, nb::handle begin_, nb::handle end_, nb::handle tid_b_,
                         nb::handle tid_e_, nb::handle ts_b_, nb::handle ts_e_,
                         nb::handle args_close_, nb::handle stream_b_, nb::handle stream_e_,
                         nb::handle keep_, nb::handle new_tid_, nb::handle new_ts_,
                         nb::handle new_stream_, nb::handle frag_, std::vector<std::string> frags);
// The module-span track: per (graph launch, module prefix), one slice from the first start to
// the last end of that prefix's work. Aggregated when made (without the GIL); rendered as JSON
// piece by piece (next_piece) as it is written.
class ModuleSpans {
 public:
  struct Span { double lo, hi; };
  struct Slice { int64_t corr, prefix; Span span; };

  ModuleSpans(nb::bytes corr, nb::bytes leaf, nb::bytes t0, nb::bytes t1, nb::bytes table,
              size_t depth, std::vector<std::string> heads);
  size_t size() const { return slices_.size(); }
  nb::object next_piece();

 private:
  std::vector<std::string> heads_;
  std::vector<Slice> slices_;  // by (launch, start): a parent before its children
  size_t next_ = 0;
};

// All of a ModuleSpans' pieces at once.
nb::list module_spans(nb::bytes corr, nb::bytes leaf, nb::bytes t0, nb::bytes t1,
                      nb::bytes table, size_t depth, std::vector<std::string> heads);

}  // namespace gs
