// Hardware-counter probe: which of CUPTI's PM sampling API and range
// profiler work on this machine, with which metrics, at what cost.
//
// Built on the GPU machine by run.sh (g++ -shared -fPIC, CUPTI headers only; no link to
// libcupti or libcuda). The driver probe.py loads this library with ctypes, hands it the
// path of the libcupti that torch uses (gs_load), and launches the workloads with torch
// between the calls below. Every CUPTI call is recorded (name, result code, result name,
// CUPTI's message, milliseconds) in the JSON that each gs_* function returns, and echoed on
// stderr as it happens, so that a hang or a crash inside CUPTI still leaves its last call.
// Nothing here aborts: a failed step returns its log and the caller decides what to try next.

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <chrono>
#include <string>
#include <vector>

#include <cuda.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>
#include <cupti_version.h>

// cuptiGetTimestamp lives in cupti_activity.h, which pulls in much more; its signature is
// stable (CUPTI 4+), so it is declared here for decltype only.
extern "C" CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp);

#define GS_CUPTI_FUNCS(X)                          \
    X(cuptiGetResultString)                        \
    X(cuptiGetErrorMessage)                        \
    X(cuptiGetVersion)                             \
    X(cuptiGetTimestamp)                           \
    X(cuptiProfilerInitialize)                     \
    X(cuptiProfilerDeInitialize)                   \
    X(cuptiProfilerDeviceSupported)                \
    X(cuptiDeviceGetChipName)                      \
    X(cuptiProfilerGetCounterAvailability)         \
    X(cuptiProfilerHostInitialize)                 \
    X(cuptiProfilerHostDeinitialize)               \
    X(cuptiProfilerHostGetSupportedChips)          \
    X(cuptiProfilerHostGetBaseMetrics)             \
    X(cuptiProfilerHostGetSubMetrics)              \
    X(cuptiProfilerHostGetMetricProperties)        \
    X(cuptiProfilerHostConfigAddMetrics)           \
    X(cuptiProfilerHostGetConfigImageSize)         \
    X(cuptiProfilerHostGetConfigImage)             \
    X(cuptiProfilerHostGetNumOfPasses)             \
    X(cuptiProfilerHostEvaluateToGpuValues)        \
    X(cuptiProfilerHostGetMaxNumHardwareMetricsPerPass) \
    X(cuptiPmSamplingSetConfig)                    \
    X(cuptiPmSamplingEnable)                       \
    X(cuptiPmSamplingDisable)                      \
    X(cuptiPmSamplingStart)                        \
    X(cuptiPmSamplingStop)                         \
    X(cuptiPmSamplingDecodeData)                   \
    X(cuptiPmSamplingGetCounterAvailability)       \
    X(cuptiPmSamplingGetCounterDataSize)           \
    X(cuptiPmSamplingCounterDataImageInitialize)   \
    X(cuptiPmSamplingGetCounterDataInfo)           \
    X(cuptiPmSamplingCounterDataGetSampleInfo)     \
    X(cuptiRangeProfilerSetConfig)                 \
    X(cuptiRangeProfilerEnable)                    \
    X(cuptiRangeProfilerDisable)                   \
    X(cuptiRangeProfilerStart)                     \
    X(cuptiRangeProfilerStop)                      \
    X(cuptiRangeProfilerPushRange)                 \
    X(cuptiRangeProfilerPopRange)                  \
    X(cuptiRangeProfilerDecodeData)                \
    X(cuptiRangeProfilerGetCounterDataSize)        \
    X(cuptiRangeProfilerCounterDataImageInitialize) \
    X(cuptiRangeProfilerGetCounterDataInfo)        \
    X(cuptiRangeProfilerCounterDataGetRangeInfo)

#define GS_CUDA_FUNCS(X) \
    X(cuDriverGetVersion) \
    X(cuCtxGetCurrent)    \
    X(cuCtxGetDevice)

#define GS_DECLARE(fn) static decltype(&fn) p_##fn = nullptr;
GS_CUPTI_FUNCS(GS_DECLARE)
GS_CUDA_FUNCS(GS_DECLARE)
#undef GS_DECLARE

namespace {

// ---- a small JSON writer -------------------------------------------------------------

std::string jstr(const char* s) {
    if (s == nullptr) return "null";
    std::string out = "\"";
    for (const char* c = s; *c; ++c) {
        unsigned char u = static_cast<unsigned char>(*c);
        switch (u) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (u < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\u%04x", u);
                    out += buf;
                } else {
                    out += static_cast<char>(u);
                }
        }
    }
    return out + "\"";
}

std::string jstr(const std::string& s) { return jstr(s.c_str()); }

std::string jnum(double v) {
    if (v != v || v > 1.7e308 || v < -1.7e308) return "null";  // NaN / inf are not JSON
    char buf[40];
    snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

std::string jint(long long v) { return std::to_string(v); }

// An object built field by field: add("k", <already JSON text>).
struct Obj {
    std::string body;
    Obj& add(const char* key, const std::string& json) {
        if (!body.empty()) body += ",";
        body += jstr(key) + ":" + json;
        return *this;
    }
    std::string str() const { return "{" + body + "}"; }
};

std::string jlist(const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
    return out + "]";
}

// ---- the call log --------------------------------------------------------------------

struct Log {
    std::vector<std::string> calls;
    int failures = 0;
    int last = 0;
};

const char* result_name(int rc) {
    if (rc == -1) return "SYMBOL_MISSING";
    const char* s = nullptr;
    if (p_cuptiGetResultString == nullptr ||
        p_cuptiGetResultString(static_cast<CUptiResult>(rc), &s) != CUPTI_SUCCESS || !s)
        return "UNKNOWN";
    return s;
}

const char* result_message(int rc) {
    if (rc <= 0) return "";
    const char* s = nullptr;
    if (p_cuptiGetErrorMessage == nullptr ||
        p_cuptiGetErrorMessage(static_cast<CUptiResult>(rc), &s) != CUPTI_SUCCESS || !s)
        return "";
    return s;
}

double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

template <typename F, typename P>
int call(Log& log, const char* name, F fn, P* params) {
    fprintf(stderr, "GSCALL %s ...\n", name);
    fflush(stderr);
    int rc = -1;
    double t0 = now_ms();
    if (fn != nullptr) rc = static_cast<int>(fn(params));
    double ms = now_ms() - t0;
    Obj o;
    o.add("call", jstr(name)).add("rc", jint(rc)).add("name", jstr(result_name(rc)));
    if (rc != 0) o.add("msg", jstr(result_message(rc)));
    o.add("ms", jnum(ms));
    log.calls.push_back(o.str());
    log.last = rc;
    if (rc != 0) ++log.failures;
    fprintf(stderr, "GSCALL %s rc=%d %s %.3f ms\n", name, rc, result_name(rc), ms);
    fflush(stderr);
    return rc;
}

#define CALL(log, fn, params) call(log, #fn, p_##fn, params)

// For calls made once per sample or range: logged the first time and on failure only.
template <typename F, typename P>
int call_quiet(Log& log, const char* name, F fn, P* params, bool first) {
    if (first || fn == nullptr) return call(log, name, fn, params);
    int rc = static_cast<int>(fn(params));
    if (rc != 0) return call(log, name, fn, params);
    return 0;
}

#define CALL_QUIET(log, fn, params, first) call_quiet(log, #fn, p_##fn, params, first)

// Every gs_* function returns a pointer into this buffer (valid until the next gs_* call).
std::string g_out;

const char* finish(Obj& o, Log& log) {
    o.add("ok", log.failures == 0 ? "true" : "false");
    o.add("calls", jlist(log.calls));
    g_out = o.str();
    return g_out.c_str();
}

std::vector<std::string> split_csv(const char* csv) {
    std::vector<std::string> out;
    if (csv == nullptr) return out;
    std::string cur;
    for (const char* c = csv; ; ++c) {
        if (*c == ',' || *c == '\0') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
            if (*c == '\0') break;
        } else {
            cur += *c;
        }
    }
    return out;
}

const char* support_name(int level) {
    switch (level) {
        case CUPTI_PROFILER_CONFIGURATION_UNKNOWN: return "UNKNOWN";
        case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED: return "UNSUPPORTED";
        case CUPTI_PROFILER_CONFIGURATION_DISABLED: return "DISABLED";
        case CUPTI_PROFILER_CONFIGURATION_SUPPORTED: return "SUPPORTED";
        default: return "?";
    }
}

// ---- state ---------------------------------------------------------------------------

void* g_cupti = nullptr;
void* g_cuda = nullptr;
bool g_profiler_initialized = false;
std::string g_chip;

// A metric list whose const char* stay valid as long as the object lives.
struct Metrics {
    std::vector<std::string> names;
    std::vector<const char*> ptrs;
    void set(const char* csv) {
        names = split_csv(csv);
        ptrs.clear();
        for (auto& n : names) ptrs.push_back(n.c_str());
    }
};

struct Host {
    CUpti_Profiler_Host_Object* obj = nullptr;
    void close(Log& log) {
        if (obj == nullptr) return;
        CUpti_Profiler_Host_Deinitialize_Params p = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        p.pHostObject = obj;
        CALL(log, cuptiProfilerHostDeinitialize, &p);
        obj = nullptr;
    }
};

int host_open(Log& log, Host& host, CUpti_ProfilerType type, const std::vector<uint8_t>& avail) {
    CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    p.profilerType = type;
    p.pChipName = g_chip.c_str();
    p.pCounterAvailabilityImage = avail.empty() ? nullptr : avail.data();
    int rc = CALL(log, cuptiProfilerHostInitialize, &p);
    host.obj = rc == 0 ? p.pHostObject : nullptr;
    return rc;
}

// The config image of metrics (on a host object opened for them), and its number of passes.
int host_config(Log& log, Host& host, Metrics& m, std::vector<uint8_t>& image, size_t* passes) {
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host.obj;
    add.ppMetricNames = m.ptrs.data();
    add.numMetrics = m.ptrs.size();
    int rc = CALL(log, cuptiProfilerHostConfigAddMetrics, &add);
    if (rc) return rc;
    CUpti_Profiler_Host_GetConfigImageSize_Params sz = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    sz.pHostObject = host.obj;
    if ((rc = CALL(log, cuptiProfilerHostGetConfigImageSize, &sz))) return rc;
    image.assign(sz.configImageSize, 0);
    CUpti_Profiler_Host_GetConfigImage_Params gi = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gi.pHostObject = host.obj;
    gi.configImageSize = image.size();
    gi.pConfigImage = image.data();
    if ((rc = CALL(log, cuptiProfilerHostGetConfigImage, &gi))) return rc;
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = image.size();
    np.pConfigImage = image.data();
    if ((rc = CALL(log, cuptiProfilerHostGetNumOfPasses, &np))) return rc;
    *passes = np.numOfPasses;
    return 0;
}

int profiler_init(Log& log) {
    if (g_profiler_initialized) return 0;
    CUpti_Profiler_Initialize_Params p = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    int rc = CALL(log, cuptiProfilerInitialize, &p);
    g_profiler_initialized = rc == 0;
    return rc;
}

int chip_name(Log& log, size_t device) {
    CUpti_Device_GetChipName_Params p = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    p.deviceIndex = device;
    int rc = CALL(log, cuptiDeviceGetChipName, &p);
    if (rc == 0 && p.pChipName) g_chip = p.pChipName;
    return rc;
}

int pm_availability(Log& log, size_t device, std::vector<uint8_t>& avail) {
    CUpti_PmSampling_GetCounterAvailability_Params p = {CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    p.deviceIndex = device;
    int rc = CALL(log, cuptiPmSamplingGetCounterAvailability, &p);
    if (rc) return rc;
    avail.assign(p.counterAvailabilityImageSize, 0);
    p.pCounterAvailabilityImage = avail.data();
    return CALL(log, cuptiPmSamplingGetCounterAvailability, &p);
}

int current_ctx(Log& log, CUcontext* ctx) {
    *ctx = nullptr;
    if (p_cuCtxGetCurrent == nullptr) {
        log.calls.push_back(Obj().add("call", jstr("cuCtxGetCurrent")).add("rc", "-1")
                                .add("name", jstr("SYMBOL_MISSING")).str());
        ++log.failures;
        return -1;
    }
    int rc = static_cast<int>(p_cuCtxGetCurrent(ctx));
    if (rc != 0 || *ctx == nullptr) {
        log.calls.push_back(Obj().add("call", jstr("cuCtxGetCurrent")).add("rc", jint(rc))
                                .add("name", jstr(*ctx ? "CUDA_ERROR" : "NO_CURRENT_CONTEXT")).str());
        ++log.failures;
        return rc ? rc : -2;
    }
    return 0;
}

int rp_availability(Log& log, CUcontext ctx, std::vector<uint8_t>& avail) {
    CUpti_Profiler_GetCounterAvailability_Params p = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    p.ctx = ctx;
    int rc = CALL(log, cuptiProfilerGetCounterAvailability, &p);
    if (rc) return rc;
    avail.assign(p.counterAvailabilityImageSize, 0);
    p.pCounterAvailabilityImage = avail.data();
    return CALL(log, cuptiProfilerGetCounterAvailability, &p);
}

// Values of metrics at range/sample index i of an evaluated counter data image.
int evaluate(Log& log, Host& host, Metrics& m, std::vector<uint8_t>& data, size_t i,
             std::vector<double>& values) {
    values.assign(m.ptrs.size(), 0.0);
    CUpti_Profiler_Host_EvaluateToGpuValues_Params p = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    p.pHostObject = host.obj;
    p.pCounterDataImage = data.data();
    p.counterDataImageSize = data.size();
    p.rangeIndex = i;
    p.ppMetricNames = m.ptrs.data();
    p.numMetrics = m.ptrs.size();
    p.pMetricValues = values.data();
    // Per-sample calls are many: log only failures (and the first call) to keep the JSON small.
    return CALL_QUIET(log, cuptiProfilerHostEvaluateToGpuValues, &p, i == 0);
}

// ---- PM sampling state ---------------------------------------------------------------

struct Pm {
    CUpti_PmSampling_Object* obj = nullptr;
    Host host;
    Metrics metrics;
    std::vector<uint8_t> avail, config, data;
    size_t device = 0;
} g_pm;

// ---- range profiler state ------------------------------------------------------------

struct Rp {
    CUpti_RangeProfiler_Object* obj = nullptr;
    Host host;
    Metrics metrics;
    std::vector<uint8_t> avail, config, data;
    CUcontext ctx = nullptr;
    size_t pass_index = 0;
    size_t target_nesting = 1;
} g_rp;

}  // namespace

extern "C" {

// Loads libcupti (the given path: the one torch uses) and libcuda, resolves every symbol.
const char* gs_load(const char* cupti_path) {
    Obj o;
    std::vector<std::string> missing;
    g_cupti = dlopen(cupti_path, RTLD_NOW | RTLD_GLOBAL);
    o.add("cupti_path", jstr(cupti_path));
    if (g_cupti == nullptr) {
        const char* e = dlerror();
        o.add("cupti_dlerror", jstr(e ? e : "?"));
    }
    g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    o.add("cuda_was_loaded", g_cuda ? "true" : "false");
    if (g_cuda == nullptr) g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (g_cuda == nullptr) {
        const char* e = dlerror();
        o.add("cuda_dlerror", jstr(e ? e : "?"));
    }
#define GS_RESOLVE(fn)                                                          \
    if (g_cupti) p_##fn = reinterpret_cast<decltype(&fn)>(dlsym(g_cupti, #fn)); \
    if (p_##fn == nullptr) missing.push_back(jstr(#fn));
    GS_CUPTI_FUNCS(GS_RESOLVE)
#undef GS_RESOLVE
#define GS_RESOLVE(fn)                                                        \
    if (g_cuda) p_##fn = reinterpret_cast<decltype(&fn)>(dlsym(g_cuda, #fn)); \
    if (p_##fn == nullptr) missing.push_back(jstr(#fn));
    // cuCtxGetCurrent etc. have versioned exports (_v2) in some drivers; the unversioned
    // names are what cuda.h's macros map to, so try those first and fall back.
    GS_CUDA_FUNCS(GS_RESOLVE)
#undef GS_RESOLVE
    if (g_cuda && p_cuCtxGetDevice == nullptr)
        p_cuCtxGetDevice = reinterpret_cast<decltype(&cuCtxGetDevice)>(dlsym(g_cuda, "cuCtxGetDevice_v2"));
    Dl_info info;
    if (p_cuptiGetVersion && dladdr(reinterpret_cast<void*>(p_cuptiGetVersion), &info) && info.dli_fname)
        o.add("cupti_resolved_from", jstr(info.dli_fname));
    o.add("header_cupti_api_version", jint(CUPTI_API_VERSION));
    o.add("header_cuda_version", jint(CUDA_VERSION));
    o.add("missing", jlist(missing));
    o.add("ok", g_cupti && g_cuda && missing.empty() ? "true" : "false");
    g_out = o.str();
    return g_out.c_str();
}

// Environment as CUPTI sees it: versions, chip, device support per profiling API.
const char* gs_env(int device) {
    Log log;
    Obj o;
    int v = 0;
    if (p_cuDriverGetVersion && p_cuDriverGetVersion(&v) == CUDA_SUCCESS) o.add("cuda_driver_version", jint(v));
    uint32_t cv = 0;
    if (CALL(log, cuptiGetVersion, &cv) == 0) o.add("cupti_api_version", jint(cv));
    uint64_t ts = 0;
    if (CALL(log, cuptiGetTimestamp, &ts) == 0) o.add("cupti_timestamp_ns", jint(static_cast<long long>(ts)));
    profiler_init(log);
    if (chip_name(log, static_cast<size_t>(device)) == 0) o.add("chip", jstr(g_chip));
    struct { const char* name; CUpti_Profiler_API api; } apis[] = {
        {"range_profiling", CUPTI_PROFILER_RANGE_PROFILING},
        {"pm_sampling", CUPTI_PROFILER_PM_SAMPLING},
        {"pc_sampling", CUPTI_PROFILER_PC_SAMPLING},
        {"sass_metrics", CUPTI_PROFILER_SASS_METRICS},
    };
    Obj sup;
    for (auto& a : apis) {
        CUpti_Profiler_DeviceSupported_Params p = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
        p.cuDevice = device;
        p.api = a.api;
        int rc = CALL(log, cuptiProfilerDeviceSupported, &p);
        Obj s;
        s.add("rc", jint(rc)).add("rc_name", jstr(result_name(rc)));
        if (rc == 0) {
            s.add("isSupported", jstr(support_name(p.isSupported)))
                .add("architecture", jstr(support_name(p.architecture)))
                .add("sli", jstr(support_name(p.sli)))
                .add("vGpu", jstr(support_name(p.vGpu)))
                .add("confidentialCompute", jstr(support_name(p.confidentialCompute)))
                .add("cmp", jstr(support_name(p.cmp)))
                .add("wsl", jstr(support_name(p.wsl)));
        }
        sup.add(a.name, s.str());
    }
    o.add("device_supported", sup.str());
    CUpti_Profiler_Host_GetSupportedChips_Params chips = {CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE};
    if (CALL(log, cuptiProfilerHostGetSupportedChips, &chips) == 0) {
        std::vector<std::string> names;
        for (size_t i = 0; i < chips.numChips; ++i) names.push_back(jstr(chips.ppChipNames[i]));
        o.add("host_supported_chips", jlist(names));
    }
    if (!g_chip.empty()) {
        struct { const char* name; CUpti_ProfilerType type; } types[] = {
            {"range_profiler", CUPTI_PROFILER_TYPE_RANGE_PROFILER},
            {"pm_sampling", CUPTI_PROFILER_TYPE_PM_SAMPLING},
        };
        Obj mx;
        for (auto& t : types) {
            CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params p = {
                CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params_STRUCT_SIZE};
            p.profilerType = t.type;
            p.pChipName = g_chip.c_str();
            if (CALL(log, cuptiProfilerHostGetMaxNumHardwareMetricsPerPass, &p) == 0)
                mx.add(t.name, jint(static_cast<long long>(p.maxMetricsPerPass)));
        }
        o.add("max_hw_metrics_per_pass", mx.str());
    }
    return finish(o, log);
}

// Metric names the host API knows for this chip (profiler_type 0 = range profiler,
// 1 = PM sampling), filtered by substrings (comma separated; empty = all), at most `limit`,
// with the total count per metric type. Uses the counter availability image of that
// profiler (PM sampling: by device index; range profiler: the current context).
const char* gs_list_metrics(int profiler_type, int device, const char* filters, int limit) {
    Log log;
    Obj o;
    std::vector<std::string> subs = split_csv(filters);
    profiler_init(log);
    if (g_chip.empty()) chip_name(log, static_cast<size_t>(device));
    std::vector<uint8_t> avail;
    CUpti_ProfilerType type = profiler_type == 1 ? CUPTI_PROFILER_TYPE_PM_SAMPLING : CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    int arc;
    if (type == CUPTI_PROFILER_TYPE_PM_SAMPLING) {
        arc = pm_availability(log, static_cast<size_t>(device), avail);
    } else {
        CUcontext ctx = nullptr;
        arc = current_ctx(log, &ctx);
        if (arc == 0) arc = rp_availability(log, ctx, avail);
    }
    o.add("counter_availability_rc", jint(arc)).add("counter_availability_bytes", jint(static_cast<long long>(avail.size())));
    Host host;
    // Without an availability image the host API still lists the chip's metrics.
    if (host_open(log, host, type, arc == 0 ? avail : std::vector<uint8_t>()) == 0) {
        const char* tnames[] = {"counter", "ratio", "throughput"};
        std::vector<std::string> out;
        Obj totals;
        for (int t = 0; t < CUPTI_METRIC_TYPE__COUNT; ++t) {
            CUpti_Profiler_Host_GetBaseMetrics_Params p = {CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
            p.pHostObject = host.obj;
            p.metricType = static_cast<CUpti_MetricType>(t);
            if (CALL(log, cuptiProfilerHostGetBaseMetrics, &p) != 0) continue;
            totals.add(tnames[t], jint(static_cast<long long>(p.numMetrics)));
            for (size_t i = 0; i < p.numMetrics; ++i) {
                const char* n = p.ppMetricNames[i];
                if (n == nullptr) continue;
                bool keep = subs.empty();
                for (auto& s : subs) keep = keep || strstr(n, s.c_str()) != nullptr;
                if (keep && static_cast<int>(out.size()) < limit)
                    out.push_back(Obj().add("name", jstr(n)).add("type", jstr(tnames[t])).str());
            }
        }
        o.add("totals", totals.str()).add("metrics", jlist(out));
        host.close(log);
    }
    o.add("chip", jstr(g_chip));
    return finish(o, log);
}

// Each metric alone (when per_metric): known to the host API (properties), accepted in a
// config, passes. Then all of them together. profiler_type as in gs_list_metrics.
const char* gs_check_metrics(int profiler_type, int device, const char* csv, int per_metric) {
    Log log;
    Obj o;
    profiler_init(log);
    if (g_chip.empty()) chip_name(log, static_cast<size_t>(device));
    CUpti_ProfilerType type = profiler_type == 1 ? CUPTI_PROFILER_TYPE_PM_SAMPLING : CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    std::vector<uint8_t> avail;
    int arc;
    if (type == CUPTI_PROFILER_TYPE_PM_SAMPLING) {
        arc = pm_availability(log, static_cast<size_t>(device), avail);
    } else {
        CUcontext ctx = nullptr;
        arc = current_ctx(log, &ctx);
        if (arc == 0) arc = rp_availability(log, ctx, avail);
    }
    if (arc) avail.clear();
    o.add("counter_availability_rc", jint(arc));
    Metrics all;
    all.set(csv);
    std::vector<std::string> per;
    const char* tnames[] = {"counter", "ratio", "throughput"};
    for (auto& name : all.names) {
        if (!per_metric) break;
        Obj m;
        m.add("metric", jstr(name));
        Host host;
        Log sub;  // per-metric failures are findings, not probe failures
        if (host_open(sub, host, type, avail) == 0) {
            CUpti_Profiler_Host_GetMetricProperties_Params pp = {CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
            pp.pHostObject = host.obj;
            pp.pMetricName = name.c_str();
            int rc = CALL(sub, cuptiProfilerHostGetMetricProperties, &pp);
            m.add("properties_rc", jint(rc)).add("properties_rc_name", jstr(result_name(rc)));
            if (rc == 0) {
                m.add("description", jstr(pp.pDescription)).add("hw_unit", jstr(pp.pHwUnit))
                    .add("dim_unit", jstr(pp.pDimUnit));
                if (pp.metricType >= 0 && pp.metricType < CUPTI_METRIC_TYPE__COUNT)
                    m.add("type", jstr(tnames[pp.metricType]));
            }
            Metrics one;
            one.set(name.c_str());
            std::vector<uint8_t> image;
            size_t passes = 0;
            int crc = host_config(sub, host, one, image, &passes);
            m.add("config_rc", jint(crc)).add("config_rc_name", jstr(result_name(crc)));
            if (crc == 0) m.add("passes", jint(static_cast<long long>(passes)));
            host.close(sub);
        } else {
            m.add("host_init_rc", jint(sub.last)).add("host_init_rc_name", jstr(result_name(sub.last)));
        }
        per.push_back(m.str());
    }
    o.add("metrics", jlist(per));
    if (!all.names.empty()) {
        Host host;
        Log sub;
        if (host_open(sub, host, type, avail) == 0) {
            std::vector<uint8_t> image;
            size_t passes = 0;
            int crc = host_config(sub, host, all, image, &passes);
            o.add("together_rc", jint(crc)).add("together_rc_name", jstr(result_name(crc)));
            if (crc == 0) o.add("together_passes", jint(static_cast<long long>(passes)))
                              .add("config_image_bytes", jint(static_cast<long long>(image.size())));
            host.close(sub);
        }
    }
    return finish(o, log);
}

uint64_t gs_timestamp() {
    uint64_t ts = 0;
    if (p_cuptiGetTimestamp) p_cuptiGetTimestamp(&ts);
    return ts;
}

// ---- PM sampling ---------------------------------------------------------------------

// Enable, host config image (must be one pass), counter data image, set config.
// trigger 1 = GPU time interval (interval in ns), 0 = sysclk interval (in cycles).
const char* gs_pm_setup(int device, const char* csv, unsigned long long interval, int trigger,
                        unsigned long long hw_buffer_bytes, unsigned int max_samples) {
    Log log;
    Obj o;
    g_pm.device = static_cast<size_t>(device);
    g_pm.metrics.set(csv);
    profiler_init(log);
    if (g_chip.empty()) chip_name(log, g_pm.device);
    pm_availability(log, g_pm.device, g_pm.avail);
    CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    en.deviceIndex = g_pm.device;
    if (CALL(log, cuptiPmSamplingEnable, &en) != 0) {
        o.add("stage", jstr("enable"));
        return finish(o, log);
    }
    g_pm.obj = en.pPmSamplingObject;
    if (host_open(log, g_pm.host, CUPTI_PROFILER_TYPE_PM_SAMPLING, g_pm.avail) != 0) {
        o.add("stage", jstr("host_initialize"));
        return finish(o, log);
    }
    size_t passes = 0;
    if (host_config(log, g_pm.host, g_pm.metrics, g_pm.config, &passes) != 0) {
        o.add("stage", jstr("config_image"));
        return finish(o, log);
    }
    o.add("passes", jint(static_cast<long long>(passes)));
    o.add("config_image_bytes", jint(static_cast<long long>(g_pm.config.size())));
    CUpti_PmSampling_GetCounterDataSize_Params ds = {CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pPmSamplingObject = g_pm.obj;
    ds.pMetricNames = g_pm.metrics.ptrs.data();
    ds.numMetrics = g_pm.metrics.ptrs.size();
    ds.maxSamples = max_samples;
    if (CALL(log, cuptiPmSamplingGetCounterDataSize, &ds) != 0) {
        o.add("stage", jstr("counter_data_size"));
        return finish(o, log);
    }
    g_pm.data.assign(ds.counterDataSize, 0);
    o.add("counter_data_bytes", jint(static_cast<long long>(ds.counterDataSize)));
    CUpti_PmSampling_CounterDataImage_Initialize_Params ci = {CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ci.pPmSamplingObject = g_pm.obj;
    ci.counterDataSize = g_pm.data.size();
    ci.pCounterData = g_pm.data.data();
    if (CALL(log, cuptiPmSamplingCounterDataImageInitialize, &ci) != 0) {
        o.add("stage", jstr("counter_data_init"));
        return finish(o, log);
    }
    CUpti_PmSampling_SetConfig_Params sc = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    sc.pPmSamplingObject = g_pm.obj;
    sc.configSize = g_pm.config.size();
    sc.pConfig = g_pm.config.data();
    sc.hardwareBufferSize = hw_buffer_bytes;
    sc.samplingInterval = interval;
    sc.triggerMode = trigger == 0 ? CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL
                                  : CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    if (CALL(log, cuptiPmSamplingSetConfig, &sc) != 0) {
        o.add("stage", jstr("set_config"));
        return finish(o, log);
    }
    o.add("stage", jstr("configured"));
    return finish(o, log);
}

const char* gs_pm_start() {
    Log log;
    Obj o;
    CUpti_PmSampling_CounterDataImage_Initialize_Params ci = {CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ci.pPmSamplingObject = g_pm.obj;
    ci.counterDataSize = g_pm.data.size();
    ci.pCounterData = g_pm.data.data();
    CALL(log, cuptiPmSamplingCounterDataImageInitialize, &ci);  // a fresh image per session
    CUpti_PmSampling_Start_Params p = {CUpti_PmSampling_Start_Params_STRUCT_SIZE};
    p.pPmSamplingObject = g_pm.obj;
    CALL(log, cuptiPmSamplingStart, &p);
    return finish(o, log);
}

const char* gs_pm_stop() {
    Log log;
    Obj o;
    CUpti_PmSampling_Stop_Params p = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
    p.pPmSamplingObject = g_pm.obj;
    CALL(log, cuptiPmSamplingStop, &p);
    return finish(o, log);
}

// Decodes what the hardware buffer holds, then evaluates each completed sample:
// {"samples": {"start": [...], "end": [...], "<metric>": [...]}, ...}. At most max_eval
// samples are evaluated (the count of the rest is reported).
const char* gs_pm_decode(unsigned int max_eval) {
    Log log;
    Obj o;
    std::vector<std::string> decodes;
    std::vector<std::vector<double>> cols(g_pm.metrics.ptrs.size());
    std::vector<std::string> starts, ends;
    size_t evaluated = 0, skipped = 0, eval_failures = 0;
    int first_eval_failure = 0;
    double t_decode = 0, t_eval = 0;
    for (int round = 0; round < 64; ++round) {
        CUpti_PmSampling_DecodeData_Params d = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
        d.pPmSamplingObject = g_pm.obj;
        d.pCounterDataImage = g_pm.data.data();
        d.counterDataImageSize = g_pm.data.size();
        double t0 = now_ms();
        int rc = CALL(log, cuptiPmSamplingDecodeData, &d);
        t_decode += now_ms() - t0;
        decodes.push_back(Obj().add("rc", jint(rc)).add("stop_reason", jint(d.decodeStopReason))
                              .add("overflow", jint(d.overflow)).str());
        if (rc != 0) break;
        CUpti_PmSampling_GetCounterDataInfo_Params info = {CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
        info.pCounterDataImage = g_pm.data.data();
        info.counterDataImageSize = g_pm.data.size();
        if (CALL(log, cuptiPmSamplingGetCounterDataInfo, &info) != 0) break;
        o.add(("info_" + std::to_string(round)).c_str(),
              Obj().add("total", jint(static_cast<long long>(info.numTotalSamples)))
                  .add("populated", jint(static_cast<long long>(info.numPopulatedSamples)))
                  .add("completed", jint(static_cast<long long>(info.numCompletedSamples))).str());
        t0 = now_ms();
        for (size_t i = 0; i < info.numCompletedSamples; ++i) {
            if (evaluated >= max_eval) { ++skipped; continue; }
            CUpti_PmSampling_CounterData_GetSampleInfo_Params si = {CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
            si.pPmSamplingObject = g_pm.obj;
            si.pCounterDataImage = g_pm.data.data();
            si.counterDataImageSize = g_pm.data.size();
            si.sampleIndex = i;
            int src = CALL_QUIET(log, cuptiPmSamplingCounterDataGetSampleInfo, &si, i == 0);
            std::vector<double> vals;
            int erc = src == 0 ? evaluate(log, g_pm.host, g_pm.metrics, g_pm.data, i, vals) : src;
            if (erc != 0) {
                if (!eval_failures) first_eval_failure = erc;
                ++eval_failures;
                continue;
            }
            starts.push_back(jint(static_cast<long long>(si.startTimestamp)));
            ends.push_back(jint(static_cast<long long>(si.endTimestamp)));
            for (size_t k = 0; k < vals.size(); ++k) cols[k].push_back(vals[k]);
            ++evaluated;
        }
        t_eval += now_ms() - t0;
        if (d.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
        // Full: the samples are evaluated, start over with a fresh image and decode the rest.
        CUpti_PmSampling_CounterDataImage_Initialize_Params ci = {CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
        ci.pPmSamplingObject = g_pm.obj;
        ci.counterDataSize = g_pm.data.size();
        ci.pCounterData = g_pm.data.data();
        if (CALL(log, cuptiPmSamplingCounterDataImageInitialize, &ci) != 0) break;
    }
    Obj s;
    s.add("start", jlist(starts)).add("end", jlist(ends));
    for (size_t k = 0; k < cols.size(); ++k) {
        std::vector<std::string> v;
        v.reserve(cols[k].size());
        for (double x : cols[k]) v.push_back(jnum(x));
        s.add(g_pm.metrics.ptrs[k], jlist(v));
    }
    o.add("decodes", jlist(decodes)).add("evaluated", jint(static_cast<long long>(evaluated)))
        .add("not_evaluated", jint(static_cast<long long>(skipped)))
        .add("eval_failures", jint(static_cast<long long>(eval_failures)))
        .add("first_eval_failure", jstr(result_name(first_eval_failure)))
        .add("decode_ms", jnum(t_decode)).add("evaluate_ms", jnum(t_eval))
        .add("samples", s.str());
    return finish(o, log);
}

const char* gs_pm_teardown() {
    Log log;
    Obj o;
    g_pm.host.close(log);
    if (g_pm.obj) {
        CUpti_PmSampling_Disable_Params p = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
        p.pPmSamplingObject = g_pm.obj;
        CALL(log, cuptiPmSamplingDisable, &p);
        g_pm.obj = nullptr;
    }
    return finish(o, log);
}

// ---- range profiler ------------------------------------------------------------------

// range: 1 = auto (per kernel), 2 = user (push/pop); replay: 1 = application, 2 = kernel,
// 3 = user. Enable on the current context, config image, counter data image, set config.
const char* gs_rp_setup(const char* csv, int range, int replay, unsigned int max_ranges) {
    Log log;
    Obj o;
    g_rp.metrics.set(csv);
    g_rp.pass_index = 0;
    g_rp.target_nesting = 1;
    profiler_init(log);
    if (current_ctx(log, &g_rp.ctx) != 0) {
        o.add("stage", jstr("context"));
        return finish(o, log);
    }
    if (g_chip.empty()) {
        CUdevice dev = 0;
        if (p_cuCtxGetDevice) p_cuCtxGetDevice(&dev);
        chip_name(log, static_cast<size_t>(dev));
    }
    rp_availability(log, g_rp.ctx, g_rp.avail);
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = g_rp.ctx;
    if (CALL(log, cuptiRangeProfilerEnable, &en) != 0) {
        o.add("stage", jstr("enable"));
        return finish(o, log);
    }
    g_rp.obj = en.pRangeProfilerObject;
    if (host_open(log, g_rp.host, CUPTI_PROFILER_TYPE_RANGE_PROFILER, g_rp.avail) != 0) {
        o.add("stage", jstr("host_initialize"));
        return finish(o, log);
    }
    size_t passes = 0;
    if (host_config(log, g_rp.host, g_rp.metrics, g_rp.config, &passes) != 0) {
        o.add("stage", jstr("config_image"));
        return finish(o, log);
    }
    o.add("passes", jint(static_cast<long long>(passes)));
    CUpti_RangeProfiler_GetCounterDataSize_Params ds = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pRangeProfilerObject = g_rp.obj;
    ds.pMetricNames = g_rp.metrics.ptrs.data();
    ds.numMetrics = g_rp.metrics.ptrs.size();
    ds.maxNumOfRanges = max_ranges;
    ds.maxNumRangeTreeNodes = max_ranges;
    if (CALL(log, cuptiRangeProfilerGetCounterDataSize, &ds) != 0) {
        o.add("stage", jstr("counter_data_size"));
        return finish(o, log);
    }
    g_rp.data.assign(ds.counterDataSize, 0);
    o.add("counter_data_bytes", jint(static_cast<long long>(ds.counterDataSize)));
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ci = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ci.pRangeProfilerObject = g_rp.obj;
    ci.counterDataSize = g_rp.data.size();
    ci.pCounterData = g_rp.data.data();
    if (CALL(log, cuptiRangeProfilerCounterDataImageInitialize, &ci) != 0) {
        o.add("stage", jstr("counter_data_init"));
        return finish(o, log);
    }
    CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    sc.pRangeProfilerObject = g_rp.obj;
    sc.configSize = g_rp.config.size();
    sc.pConfig = g_rp.config.data();
    sc.counterDataImageSize = g_rp.data.size();
    sc.pCounterDataImage = g_rp.data.data();
    sc.range = range == 2 ? CUPTI_UserRange : CUPTI_AutoRange;
    sc.replayMode = replay == 1 ? CUPTI_ApplicationReplay : replay == 3 ? CUPTI_UserReplay : CUPTI_KernelReplay;
    sc.maxRangesPerPass = max_ranges;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    if (CALL(log, cuptiRangeProfilerSetConfig, &sc) != 0) {
        o.add("stage", jstr("set_config"));
        return finish(o, log);
    }
    o.add("stage", jstr("configured"));
    return finish(o, log);
}

const char* gs_rp_start() {
    Log log;
    Obj o;
    CUpti_RangeProfiler_Start_Params p = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = g_rp.obj;
    CALL(log, cuptiRangeProfilerStart, &p);
    return finish(o, log);
}

const char* gs_rp_push(const char* name) {
    Log log;
    Obj o;
    CUpti_RangeProfiler_PushRange_Params p = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = g_rp.obj;
    p.pRangeName = name;
    CALL(log, cuptiRangeProfilerPushRange, &p);
    return finish(o, log);
}

const char* gs_rp_pop() {
    Log log;
    Obj o;
    CUpti_RangeProfiler_PopRange_Params p = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = g_rp.obj;
    CALL(log, cuptiRangeProfilerPopRange, &p);
    return finish(o, log);
}

// {"all_passes_submitted": bool, "pass_index": n, ...}
const char* gs_rp_stop() {
    Log log;
    Obj o;
    CUpti_RangeProfiler_Stop_Params p = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = g_rp.obj;
    int rc = CALL(log, cuptiRangeProfilerStop, &p);
    if (rc == 0) {
        g_rp.pass_index = p.passIndex;
        g_rp.target_nesting = p.targetNestingLevel;
    }
    o.add("all_passes_submitted", rc == 0 && p.isAllPassSubmitted ? "true" : "false")
        .add("pass_index", jint(static_cast<long long>(p.passIndex)))
        .add("target_nesting_level", jint(static_cast<long long>(p.targetNestingLevel)));
    return finish(o, log);
}

// Decodes, then names and evaluates each range: {"ranges": [{"name", "values": {...}}]}.
const char* gs_rp_decode(unsigned int max_ranges_out) {
    Log log;
    Obj o;
    CUpti_RangeProfiler_DecodeData_Params d = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    d.pRangeProfilerObject = g_rp.obj;
    double t0 = now_ms();
    int rc = CALL(log, cuptiRangeProfilerDecodeData, &d);
    o.add("decode_ms", jnum(now_ms() - t0));
    if (rc != 0) return finish(o, log);
    o.add("ranges_dropped", jint(static_cast<long long>(d.numOfRangeDropped)));
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = g_rp.data.data();
    info.counterDataImageSize = g_rp.data.size();
    if (CALL(log, cuptiRangeProfilerGetCounterDataInfo, &info) != 0) return finish(o, log);
    o.add("num_ranges", jint(static_cast<long long>(info.numTotalRanges)));
    std::vector<std::string> ranges;
    t0 = now_ms();
    for (size_t i = 0; i < info.numTotalRanges && i < max_ranges_out; ++i) {
        Obj r;
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri = {CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
        ri.pCounterDataImage = g_rp.data.data();
        ri.counterDataImageSize = g_rp.data.size();
        ri.rangeIndex = i;
        ri.rangeDelimiter = "/";
        if (CALL_QUIET(log, cuptiRangeProfilerCounterDataGetRangeInfo, &ri, i == 0) == 0)
            r.add("name", jstr(ri.rangeName));
        std::vector<double> vals;
        int erc = evaluate(log, g_rp.host, g_rp.metrics, g_rp.data, i, vals);
        if (erc == 0) {
            Obj v;
            for (size_t k = 0; k < vals.size(); ++k) v.add(g_rp.metrics.ptrs[k], jnum(vals[k]));
            r.add("values", v.str());
        } else {
            r.add("evaluate_rc", jint(erc)).add("evaluate_rc_name", jstr(result_name(erc)));
        }
        ranges.push_back(r.str());
    }
    o.add("evaluate_ms", jnum(now_ms() - t0));
    o.add("ranges", jlist(ranges));
    return finish(o, log);
}

const char* gs_rp_teardown() {
    Log log;
    Obj o;
    g_rp.host.close(log);
    if (g_rp.obj) {
        CUpti_RangeProfiler_Disable_Params p = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = g_rp.obj;
        CALL(log, cuptiRangeProfilerDisable, &p);
        g_rp.obj = nullptr;
    }
    return finish(o, log);
}

}  // extern "C"
