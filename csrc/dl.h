// The libcuda and libcupti entry points graphscope uses, opened at run time with dlopen.
//
// Built against CUDA/CUPTI *headers* only: importing the extension never fails on a machine
// without a GPU, and the libcupti copy torch already loaded is preferred (native.py picks the
// path), so two CUPTI copies never meet in one process.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <string>

namespace gs {

struct CuptiApi {
  void* handle = nullptr;
  std::string path;
  CUptiResult (*GetVersion)(uint32_t*) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                              CUpti_SubscriberParams*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) = nullptr;
  CUptiResult (*GetGraphNodeId)(CUgraphNode, uint64_t*) = nullptr;
  CUptiResult (*GetGraphId)(CUgraph, uint32_t*) = nullptr;
  CUptiResult (*GetGraphExecId)(CUgraphExec, uint32_t*) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
  CUptiResult (*Finalize)() = nullptr;  // optional: detach (cupti_detach)
};

struct DriverApi {
  void* handle = nullptr;
  CUresult (*Init)(unsigned int) = nullptr;
  CUresult (*DriverGetVersion)(int*) = nullptr;
  CUresult (*GraphGetNodes)(CUgraph, CUgraphNode*, size_t*) = nullptr;
  CUresult (*GraphNodeGetType)(CUgraphNode, CUgraphNodeType*) = nullptr;
  CUresult (*GraphKernelNodeGetParams)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) = nullptr;
  CUresult (*GraphMemcpyNodeGetParams)(CUgraphNode, CUDA_MEMCPY3D*) = nullptr;
  CUresult (*GraphMemsetNodeGetParams)(CUgraphNode, CUDA_MEMSET_NODE_PARAMS*) = nullptr;
  CUresult (*GraphGetEdges)(CUgraph, CUgraphNode*, CUgraphNode*, CUgraphEdgeData*,
                            size_t*) = nullptr;
  CUresult (*FuncGetName)(const char**, CUfunction) = nullptr;
  CUresult (*KernelGetName)(const char**, CUkernel) = nullptr;
  // optional: a kernel node's registers per thread (inspect.cpp)
  CUresult (*FuncGetAttribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*GraphDebugDotPrint)(CUgraph, const char*, unsigned int) = nullptr;
  // optional: node counting (nodecount.cpp) needs it
  CUresult (*StreamGetCaptureInfo)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                   const CUgraphNode**, const CUgraphEdgeData**,
                                   size_t*) = nullptr;
  // optional: warm_graph_ids (inspect.cpp) makes and drops an empty graph
  CUresult (*GraphCreate)(CUgraph*, unsigned int) = nullptr;
  CUresult (*GraphAddEmptyNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t) = nullptr;
  CUresult (*GraphDestroy)(CUgraph) = nullptr;
  // CUDA >= 13.1 driver only: probed, never required.
  CUresult (*GraphNodeGetToolsId)(CUgraphNode, unsigned long long*) = nullptr;
};


extern CuptiApi cupti;
extern DriverApi drv;

std::string cupti_error(CUptiResult r);
[[noreturn]] void raise_cupti(const char* what, CUptiResult r);
[[noreturn]] void raise_cuda(const char* what, CUresult r);
void require_loaded();
std::string load_driver();
std::string load_cupti(const std::string& path);

}  // namespace gs
