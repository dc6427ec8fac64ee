// Trace-event scanning for annotate-trace: no CUDA here, it builds and runs on any CPU.
#pragma once

#include <cstddef>

#include "common.h"

namespace gs {

nb::dict scan_events(nb::bytes data, size_t pos, bool need_comma, size_t end = 0);
nb::bytes rewrite_events(nb::bytes data, nb::bytes begin_, nb::bytes end_, nb::bytes tid_b_,
                         nb::bytes tid_e_, nb::bytes ts_b_, nb::bytes ts_e_,
                         nb::bytes args_close_, nb::bytes stream_b_, nb::bytes stream_e_,
                         nb::bytes keep_, nb::bytes new_tid_, nb::bytes new_ts_,
                         nb::bytes new_stream_, nb::bytes frag_, std::vector<std::string> frags);
nb::list module_spans(nb::bytes corr, nb::bytes leaf, nb::bytes t0, nb::bytes t1,
                      nb::bytes table, size_t depth, std::vector<std::string> heads);

}  // namespace gs
