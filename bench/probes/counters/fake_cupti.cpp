// A fake libcupti (and libcuda) with the real headers' signatures: enough behaviour to run
// every gs_* function of counters_probe.cpp on a CPU (tests/unit/test_counters_probe.py
// builds it, copies it to libcuda.so.1 too, and checks each result). Not for the GPU.
#include <string.h>
#include <cuda.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>
#include <cupti_version.h>

static int obj;
static int rp_stops, pm_decodes;
static const char* base[] = {"dram__throughput", "sm__pipe_tensor_op_gmma_cycles_active"};
static const char* chips[] = {"GH100", "GB100"};
static const char* ranges[] = {"0", "1", "2"};
static bool bogus(const char* n) { return strstr(n, "bogus") != nullptr; }

extern "C" {
CUresult cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext* c) { *c = (CUcontext)&obj; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice* d) { *d = 0; return CUDA_SUCCESS; }
CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
    *s = r == 0 ? "CUPTI_SUCCESS" : r == 35 ? "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"
                                            : "CUPTI_ERROR_INVALID_METRIC_NAME";
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetErrorMessage(CUptiResult, const char** s) { *s = "fake \"quoted\" message"; return CUPTI_SUCCESS; }
CUptiResult cuptiGetVersion(uint32_t* v) { *v = 130001; return CUPTI_SUCCESS; }
CUptiResult cuptiGetTimestamp(uint64_t* t) { static uint64_t n = 1000; *t = n += 10; return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerDeviceSupported(CUpti_Profiler_DeviceSupported_Params* p) {
    p->isSupported = p->architecture = p->sli = p->vGpu = p->confidentialCompute = p->cmp = p->wsl =
        CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
    return p->api == CUPTI_PROFILER_SASS_METRICS ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}
CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params* p) { p->pChipName = "GH100"; return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerGetCounterAvailability(CUpti_Profiler_GetCounterAvailability_Params* p) {
    if (!p->pCounterAvailabilityImage) p->counterAvailabilityImageSize = 16;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params* p) {
    if (!p->pCounterAvailabilityImage) p->counterAvailabilityImageSize = 16;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params* p) {
    p->pHostObject = (CUpti_Profiler_Host_Object*)&obj;
    return strcmp(p->pChipName, "GH100") == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerHostGetSupportedChips(CUpti_Profiler_Host_GetSupportedChips_Params* p) {
    p->numChips = 2; p->ppChipNames = chips; return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetBaseMetrics(CUpti_Profiler_Host_GetBaseMetrics_Params* p) {
    p->ppMetricNames = base; p->numMetrics = 2; return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetSubMetrics(CUpti_Profiler_Host_GetSubMetrics_Params* p) {
    p->numOfSubmetrics = 0; return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetMetricProperties(CUpti_Profiler_Host_GetMetricProperties_Params* p) {
    if (bogus(p->pMetricName)) return CUPTI_ERROR_INVALID_METRIC_NAME;
    p->pDescription = "a\tfake\nmetric"; p->pHwUnit = "dram"; p->pDimUnit = "%";
    p->metricType = CUPTI_METRIC_TYPE_THROUGHPUT;
    return CUPTI_SUCCESS;
}
static size_t added;
CUptiResult cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params* p) {
    for (size_t i = 0; i < p->numMetrics; ++i) if (bogus(p->ppMetricNames[i])) return CUPTI_ERROR_INVALID_METRIC_NAME;
    added = p->numMetrics;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params* p) {
    p->configImageSize = 64; return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params* p) {
    p->pConfigImage[0] = (uint8_t)added; return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params* p) {
    p->numOfPasses = p->pConfigImage[0] > 2 ? 2 : 1; return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params* p) {
    for (size_t k = 0; k < p->numMetrics; ++k) p->pMetricValues[k] = 10.0 * p->rangeIndex + k;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiProfilerHostGetMaxNumHardwareMetricsPerPass(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params* p) {
    p->maxMetricsPerPass = 8; return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params* p) {
    p->pPmSamplingObject = (CUpti_PmSampling_Object*)&obj; return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params* p) {
    return p->samplingInterval < 50000 ? CUPTI_ERROR_INVALID_PARAMETER : CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingStart(CUpti_PmSampling_Start_Params*) { pm_decodes = 0; return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params* p) {
    p->counterDataSize = 64 + 8 * p->maxSamples; return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingCounterDataImageInitialize(CUpti_PmSampling_CounterDataImage_Initialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params* p) {
    // The first decode fills the image (3 samples), the second ends the records (2 more).
    p->decodeStopReason = ++pm_decodes == 1 ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
                                            : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
    p->overflow = 0;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params* p) {
    p->numTotalSamples = 100; p->numPopulatedSamples = p->numCompletedSamples = pm_decodes == 1 ? 3 : 2;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params* p) {
    p->startTimestamp = 2000 + 100 * p->sampleIndex; p->endTimestamp = p->startTimestamp + 100;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiRangeProfilerEnable(CUpti_RangeProfiler_Enable_Params* p) {
    rp_stops = 0; p->pRangeProfilerObject = (CUpti_RangeProfiler_Object*)&obj; return CUPTI_SUCCESS;
}
CUptiResult cuptiRangeProfilerDisable(CUpti_RangeProfiler_Disable_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiRangeProfilerSetConfig(CUpti_RangeProfiler_SetConfig_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiRangeProfilerStart(CUpti_RangeProfiler_Start_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiRangeProfilerStop(CUpti_RangeProfiler_Stop_Params* p) {
    p->passIndex = ++rp_stops; p->targetNestingLevel = 1; p->isAllPassSubmitted = rp_stops >= 2;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiRangeProfilerPushRange(CUpti_RangeProfiler_PushRange_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiRangeProfilerPopRange(CUpti_RangeProfiler_PopRange_Params*) { return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES; }
CUptiResult cuptiRangeProfilerDecodeData(CUpti_RangeProfiler_DecodeData_Params* p) { p->numOfRangeDropped = 0; return CUPTI_SUCCESS; }
CUptiResult cuptiRangeProfilerGetCounterDataSize(CUpti_RangeProfiler_GetCounterDataSize_Params* p) {
    p->counterDataSize = 64 * p->maxNumOfRanges; return CUPTI_SUCCESS;
}
CUptiResult cuptiRangeProfilerCounterDataImageInitialize(CUpti_RangeProfiler_CounterDataImage_Initialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiRangeProfilerGetCounterDataInfo(CUpti_RangeProfiler_GetCounterDataInfo_Params* p) {
    p->numTotalRanges = 3; return CUPTI_SUCCESS;
}
CUptiResult cuptiRangeProfilerCounterDataGetRangeInfo(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params* p) {
    p->rangeName = ranges[p->rangeIndex]; return CUPTI_SUCCESS;
}
}
