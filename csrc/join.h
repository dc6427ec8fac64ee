// Activity records -> captured nodes (graphs/join.py's join, natively): no CUDA needed.
#pragma once

#include "common.h"

namespace gs {

nb::dict join_records(nb::bytes graph_node_id, nb::bytes correlation, nb::bytes start,
                      nb::bytes end, nb::bytes known, int64_t keep_events);

}  // namespace gs
