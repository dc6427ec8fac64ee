// The activity/callback symbols graphscope's load_cupti requires, as stubs that refuse: linked
// with bench/probes/counters/fake_cupti.cpp (its PM sampling fakes) into a fake libcupti on
// which tests/unit/test_counters.py runs csrc/pmsampling.cpp's session on a CPU.
#include <cuda.h>
#include <cupti.h>

#define NO return CUPTI_ERROR_NOT_SUPPORTED;
extern "C" {
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) { NO }
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) { NO }
CUptiResult cuptiEnableCallback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) { NO }
CUptiResult cuptiGetGraphNodeId(CUgraphNode, uint64_t*) { NO }
CUptiResult cuptiGetGraphId(CUgraph, uint32_t*) { NO }
CUptiResult cuptiGetGraphExecId(CUgraphExec, uint32_t*) { NO }
CUptiResult cuptiActivityEnable(CUpti_ActivityKind) { NO }
CUptiResult cuptiActivityDisable(CUpti_ActivityKind) { NO }
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) { NO }
CUptiResult cuptiActivityFlushAll(uint32_t) { NO }
CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**) { NO }
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t*) { NO }
}
