// CUPTI PM sampling (cupti_pmsampling.h + cupti_profiler_host.h): hardware counters sampled at
// a fixed GPU-time interval, on the activity records' clock. One session a process; the
// bench/probes/counters probe showed it working on the H200 (driver 580, CUPTI 13.0).
//
// Flow: pm_setup (enable, host config image of the metrics (must be one pass), counter data
// image sized for max_samples, set config) -> pm_start -> the work -> pm_stop -> pm_decode
// (decode the hardware buffer, evaluate each completed sample) -> pm_teardown. Symbols are
// resolved from the libcupti already opened (dl.*): a CUPTI without them says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common.h"

namespace gs {

// "" when this build and this libcupti have the PM sampling API, else why not.
std::string pm_supported();
// Returns the number of passes (1: the only count accepted; more raise).
size_t pm_setup(int device, const std::vector<std::string>& metrics, uint64_t interval_ns,
                uint64_t hw_buffer_bytes, uint32_t max_samples);
void pm_start();
void pm_stop();
// {"start": bytes(u64), "end": bytes(u64), "values": bytes(f64, samples x metrics, row-major),
//  "metrics": [names], "overflow": bool, "not_evaluated": int, "eval_failures": int}
nb::dict pm_decode();
void pm_teardown();
bool pm_active();
// CUPTI was finalized (cupti_detach): the profiler API is initialized again at the next setup.
void pm_forget_init();

}  // namespace gs
