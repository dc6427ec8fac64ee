#include "pmsampling.h"

#include <dlfcn.h>

#include <stdexcept>

#include "dl.h"

#if __has_include(<cupti_pmsampling.h>) && __has_include(<cupti_profiler_host.h>)
#define GS_HAVE_PMSAMPLING 1
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#else
#define GS_HAVE_PMSAMPLING 0
#endif

namespace gs {

#if GS_HAVE_PMSAMPLING
namespace {

#define GS_PM_SYMBOLS(X)                             \
  X(cuptiProfilerInitialize)                         \
  X(cuptiDeviceGetChipName)                          \
  X(cuptiProfilerHostInitialize)                     \
  X(cuptiProfilerHostDeinitialize)                   \
  X(cuptiProfilerHostConfigAddMetrics)               \
  X(cuptiProfilerHostGetConfigImageSize)             \
  X(cuptiProfilerHostGetConfigImage)                 \
  X(cuptiProfilerHostGetNumOfPasses)                 \
  X(cuptiProfilerHostEvaluateToGpuValues)            \
  X(cuptiPmSamplingSetConfig)                        \
  X(cuptiPmSamplingEnable)                           \
  X(cuptiPmSamplingDisable)                          \
  X(cuptiPmSamplingStart)                            \
  X(cuptiPmSamplingStop)                             \
  X(cuptiPmSamplingDecodeData)                       \
  X(cuptiPmSamplingGetCounterAvailability)           \
  X(cuptiPmSamplingGetCounterDataSize)               \
  X(cuptiPmSamplingCounterDataImageInitialize)       \
  X(cuptiPmSamplingGetCounterDataInfo)               \
  X(cuptiPmSamplingCounterDataGetSampleInfo)

struct PmApi {
  bool resolved = false;
  std::string missing;
#define GS_PM_PTR(name) decltype(&::name) name = nullptr;
  GS_PM_SYMBOLS(GS_PM_PTR)
#undef GS_PM_PTR
} api;

void resolve() {  // needs libcupti only (PM sampling makes no driver call of graphscope's)
  if (api.resolved) return;
  api.missing.clear();
#define GS_PM_SYM(name)                                                       \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(cupti.handle, #name)); \
  if (!api.name && api.missing.empty()) api.missing = #name;
  GS_PM_SYMBOLS(GS_PM_SYM)
#undef GS_PM_SYM
  api.resolved = true;
}

void check(const char* what, CUptiResult r) {
  if (r != CUPTI_SUCCESS) raise_cupti(what, r);
}

struct Session {
  CUpti_PmSampling_Object* obj = nullptr;
  CUpti_Profiler_Host_Object* host = nullptr;
  bool profiler_initialized = false;
  bool started = false;
  std::string chip;
  std::vector<std::string> names;
  std::vector<const char*> ptrs;
  std::vector<uint8_t> avail, config, data;
} s;

void init_counter_data() {
  CUpti_PmSampling_CounterDataImage_Initialize_Params ci = {
      CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  ci.pPmSamplingObject = s.obj;
  ci.counterDataSize = s.data.size();
  ci.pCounterData = s.data.data();
  check("cuptiPmSamplingCounterDataImageInitialize",
        api.cuptiPmSamplingCounterDataImageInitialize(&ci));
}

}  // namespace

std::string pm_supported() {
  if (!cupti.handle) return "libcupti is not loaded";
  resolve();
  if (!api.missing.empty()) {
    return cupti.path + " lacks " + api.missing + " (PM sampling needs CUPTI 12.6 or newer)";
  }
  return "";
}

bool pm_active() { return s.obj != nullptr; }
void pm_forget_init() { s.profiler_initialized = false; }

namespace {

// The profiler initialized (once per process), the device's chip and counter availability, and
// PM sampling enabled on it.
void open_device(int device) {
  if (!s.profiler_initialized) {
    CUpti_Profiler_Initialize_Params p = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    check("cuptiProfilerInitialize", api.cuptiProfilerInitialize(&p));
    s.profiler_initialized = true;
  }
  CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  cn.deviceIndex = static_cast<size_t>(device);
  check("cuptiDeviceGetChipName", api.cuptiDeviceGetChipName(&cn));
  s.chip = cn.pChipName ? cn.pChipName : "";
  CUpti_PmSampling_GetCounterAvailability_Params av = {
      CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
  av.deviceIndex = static_cast<size_t>(device);
  check("cuptiPmSamplingGetCounterAvailability", api.cuptiPmSamplingGetCounterAvailability(&av));
  s.avail.assign(av.counterAvailabilityImageSize, 0);
  av.pCounterAvailabilityImage = s.avail.data();
  check("cuptiPmSamplingGetCounterAvailability", api.cuptiPmSamplingGetCounterAvailability(&av));

  CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
  en.deviceIndex = static_cast<size_t>(device);
  check("cuptiPmSamplingEnable", api.cuptiPmSamplingEnable(&en));
  s.obj = en.pPmSamplingObject;
}

// The host's configuration image of `metrics`; returns its passes (PM sampling takes one).
size_t configure(const std::vector<std::string>& metrics) {
  CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
  hi.pChipName = s.chip.c_str();
  hi.pCounterAvailabilityImage = s.avail.data();
  check("cuptiProfilerHostInitialize", api.cuptiProfilerHostInitialize(&hi));
  s.host = hi.pHostObject;

  s.names = metrics;
  s.ptrs.clear();
  for (auto& n : s.names) s.ptrs.push_back(n.c_str());
  CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = s.host;
  add.ppMetricNames = s.ptrs.data();
  add.numMetrics = s.ptrs.size();
  check("cuptiProfilerHostConfigAddMetrics", api.cuptiProfilerHostConfigAddMetrics(&add));
  CUpti_Profiler_Host_GetConfigImageSize_Params sz = {
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  sz.pHostObject = s.host;
  check("cuptiProfilerHostGetConfigImageSize", api.cuptiProfilerHostGetConfigImageSize(&sz));
  s.config.assign(sz.configImageSize, 0);
  CUpti_Profiler_Host_GetConfigImage_Params gi = {
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  gi.pHostObject = s.host;
  gi.configImageSize = s.config.size();
  gi.pConfigImage = s.config.data();
  check("cuptiProfilerHostGetConfigImage", api.cuptiProfilerHostGetConfigImage(&gi));
  CUpti_Profiler_Host_GetNumOfPasses_Params np = {
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  np.configImageSize = s.config.size();
  np.pConfigImage = s.config.data();
  check("cuptiProfilerHostGetNumOfPasses", api.cuptiProfilerHostGetNumOfPasses(&np));
  if (np.numOfPasses != 1) {
    throw std::runtime_error("state:0:the metrics need " + std::to_string(np.numOfPasses) +
                             " passes; PM sampling collects one");
  }
  return np.numOfPasses;
}

// The counter data image for `max_samples`, and the configuration set on the device.
void arm(uint64_t interval_ns, uint64_t hw_buffer_bytes, uint32_t max_samples) {
  CUpti_PmSampling_GetCounterDataSize_Params ds = {
      CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
  ds.pPmSamplingObject = s.obj;
  ds.pMetricNames = s.ptrs.data();
  ds.numMetrics = s.ptrs.size();
  ds.maxSamples = max_samples;
  check("cuptiPmSamplingGetCounterDataSize", api.cuptiPmSamplingGetCounterDataSize(&ds));
  s.data.assign(ds.counterDataSize, 0);
  init_counter_data();

  CUpti_PmSampling_SetConfig_Params sc = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
  sc.pPmSamplingObject = s.obj;
  sc.configSize = s.config.size();
  sc.pConfig = s.config.data();
  sc.hardwareBufferSize = hw_buffer_bytes;
  sc.samplingInterval = interval_ns;
  sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  check("cuptiPmSamplingSetConfig", api.cuptiPmSamplingSetConfig(&sc));
}

}  // namespace

size_t pm_setup(int device, const std::vector<std::string>& metrics, uint64_t interval_ns,
                uint64_t hw_buffer_bytes, uint32_t max_samples) {
  std::string why = pm_supported();
  if (!why.empty()) throw std::runtime_error("notloaded:0:" + why);
  if (s.obj) throw std::runtime_error("state:0:a PM sampling session is already set up");
  if (metrics.empty()) throw std::runtime_error("state:0:no metrics to sample");
  try {
    open_device(device);
    const size_t passes = configure(metrics);
    arm(interval_ns, hw_buffer_bytes, max_samples);
    return passes;
  } catch (...) {
    pm_teardown();
    throw;
  }
}

void pm_start() {
  if (!s.obj) throw std::runtime_error("state:0:PM sampling is not set up");
  init_counter_data();  // a fresh image per session
  CUpti_PmSampling_Start_Params p = {CUpti_PmSampling_Start_Params_STRUCT_SIZE};
  p.pPmSamplingObject = s.obj;
  check("cuptiPmSamplingStart", api.cuptiPmSamplingStart(&p));
  s.started = true;
}

void pm_stop() {
  if (!s.obj || !s.started) return;
  CUpti_PmSampling_Stop_Params p = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
  p.pPmSamplingObject = s.obj;
  s.started = false;
  check("cuptiPmSamplingStop", api.cuptiPmSamplingStop(&p));
}

nb::dict pm_decode() {
  if (!s.obj) throw std::runtime_error("state:0:PM sampling is not set up");
  std::vector<uint64_t> start, end;
  std::vector<double> values;
  const size_t m = s.ptrs.size();
  std::vector<double> row(m);
  bool overflow = false;
  size_t eval_failures = 0;
  for (int round = 0; round < 1024; ++round) {
    CUpti_PmSampling_DecodeData_Params d = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
    d.pPmSamplingObject = s.obj;
    d.pCounterDataImage = s.data.data();
    d.counterDataImageSize = s.data.size();
    check("cuptiPmSamplingDecodeData", api.cuptiPmSamplingDecodeData(&d));
    overflow = overflow || d.overflow;
    CUpti_PmSampling_GetCounterDataInfo_Params info = {
        CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = s.data.data();
    info.counterDataImageSize = s.data.size();
    check("cuptiPmSamplingGetCounterDataInfo", api.cuptiPmSamplingGetCounterDataInfo(&info));
    for (size_t i = 0; i < info.numCompletedSamples; ++i) {
      CUpti_PmSampling_CounterData_GetSampleInfo_Params si = {
          CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
      si.pPmSamplingObject = s.obj;
      si.pCounterDataImage = s.data.data();
      si.counterDataImageSize = s.data.size();
      si.sampleIndex = i;
      if (api.cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS) {
        ++eval_failures;
        continue;
      }
      CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {
          CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
      ev.pHostObject = s.host;
      ev.pCounterDataImage = s.data.data();
      ev.counterDataImageSize = s.data.size();
      ev.rangeIndex = i;
      ev.ppMetricNames = s.ptrs.data();
      ev.numMetrics = m;
      ev.pMetricValues = row.data();
      if (api.cuptiProfilerHostEvaluateToGpuValues(&ev) != CUPTI_SUCCESS) {
        ++eval_failures;
        continue;
      }
      start.push_back(si.startTimestamp);
      end.push_back(si.endTimestamp);
      values.insert(values.end(), row.begin(), row.end());
    }
    if (d.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
    init_counter_data();  // full: evaluated; start over with a fresh image for the rest
  }
  nb::dict out;
  out["start"] = as_bytes(start);
  out["end"] = as_bytes(end);
  out["values"] = as_bytes(values);
  out["metrics"] = s.names;
  out["overflow"] = overflow;
  out["eval_failures"] = eval_failures;
  out["chip"] = s.chip;
  return out;
}

void pm_teardown() {
  s.started = false;
  if (s.host) {
    CUpti_Profiler_Host_Deinitialize_Params p = {
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = s.host;
    api.cuptiProfilerHostDeinitialize(&p);
    s.host = nullptr;
  }
  if (s.obj) {
    CUpti_PmSampling_Disable_Params p = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
    p.pPmSamplingObject = s.obj;
    api.cuptiPmSamplingDisable(&p);
    s.obj = nullptr;
  }
  s.data.clear();
  s.data.shrink_to_fit();
}

#else  // headers without PM sampling (CUDA < 12.6): the API says why, nothing else

std::string pm_supported() {
  return "graphscope was built against CUPTI headers without PM sampling (CUDA < 12.6)";
}
bool pm_active() { return false; }
void pm_forget_init() {}
size_t pm_setup(int, const std::vector<std::string>&, uint64_t, uint64_t, uint32_t) {
  throw std::runtime_error("notloaded:0:" + pm_supported());
}
void pm_start() { throw std::runtime_error("notloaded:0:" + pm_supported()); }
void pm_stop() {}
nb::dict pm_decode() { throw std::runtime_error("notloaded:0:" + pm_supported()); }
void pm_teardown() {}

#endif

}  // namespace gs
