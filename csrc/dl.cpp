#include "dl.h"

#include <dlfcn.h>

#include <stdexcept>

namespace gs {

CuptiApi cupti;
DriverApi drv;

namespace {
template <typename F>
bool sym(void* h, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(h, name));
  return out != nullptr;
}
}  // namespace

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  if (cupti.GetResultString && cupti.GetResultString(r, &s) == CUPTI_SUCCESS && s) {
    return std::string(s);
  }
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

[[noreturn]] void raise_cupti(const char* what, CUptiResult r) {
  // Python maps "cupti:<code>:" prefixes onto GraphscopeError subclasses.
  throw std::runtime_error("cupti:" + std::to_string(static_cast<int>(r)) + ":" + what + ": " +
                           cupti_error(r));
}

[[noreturn]] void raise_cuda(const char* what, CUresult r) {
  throw std::runtime_error("cuda:" + std::to_string(static_cast<int>(r)) + ":" + what +
                           " failed with CUresult " + std::to_string(static_cast<int>(r)));
}

void require_loaded() {
  if (!cupti.handle || !drv.handle) {
    throw std::runtime_error("notloaded:0:libcupti/libcuda not loaded; call load() first");
  }
}

std::string load_driver() {
  if (drv.handle) return "";
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return std::string("libcuda.so.1 not found: ") + dlerror();
  bool ok = sym(h, "cuInit", drv.Init) && sym(h, "cuDriverGetVersion", drv.DriverGetVersion) &&
            sym(h, "cuGraphGetNodes", drv.GraphGetNodes) &&
            sym(h, "cuGraphNodeGetType", drv.GraphNodeGetType) &&
            sym(h, "cuGraphKernelNodeGetParams_v2", drv.GraphKernelNodeGetParams) &&
            sym(h, "cuGraphMemcpyNodeGetParams", drv.GraphMemcpyNodeGetParams) &&
            sym(h, "cuGraphMemsetNodeGetParams", drv.GraphMemsetNodeGetParams) &&
            sym(h, "cuGraphGetEdges_v2", drv.GraphGetEdges) &&
            sym(h, "cuFuncGetName", drv.FuncGetName) &&
            sym(h, "cuGraphDebugDotPrint", drv.GraphDebugDotPrint);
  if (!ok) return "libcuda.so.1 lacks a required graph symbol (driver older than CUDA 12.3?)";
  sym(h, "cuKernelGetName", drv.KernelGetName);
  sym(h, "cuFuncGetAttribute", drv.FuncGetAttribute);
  sym(h, "cuGraphNodeGetToolsId", drv.GraphNodeGetToolsId);
  sym(h, "cuGraphCreate", drv.GraphCreate);
  sym(h, "cuGraphAddEmptyNode", drv.GraphAddEmptyNode);
  sym(h, "cuGraphDestroy", drv.GraphDestroy);
  if (!sym(h, "cuStreamGetCaptureInfo_v3", drv.StreamGetCaptureInfo)) {
    // the entry point of the CUDA 12.3 signature (the one with edge data), by version
    CUresult (*get_proc)(const char*, void**, int, cuuint64_t,
                         CUdriverProcAddressQueryResult*) = nullptr;
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (sym(h, "cuGetProcAddress_v2", get_proc) &&
        get_proc("cuStreamGetCaptureInfo", &fn, 12030, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
            CUDA_SUCCESS &&
        found == CU_GET_PROC_ADDRESS_SUCCESS)
      drv.StreamGetCaptureInfo = reinterpret_cast<decltype(drv.StreamGetCaptureInfo)>(fn);
  }
  drv.handle = h;
  return "";
}

std::string load_cupti(const std::string& path) {
  if (cupti.handle) {
    if (path != cupti.path) return "a different libcupti is already loaded: " + cupti.path;
    return "";
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) return std::string("cannot open ") + path + ": " + dlerror();
  CuptiApi a;
  bool ok = sym(h, "cuptiGetVersion", a.GetVersion) &&
            sym(h, "cuptiGetResultString", a.GetResultString) &&
            sym(h, "cuptiSubscribe", a.Subscribe) && sym(h, "cuptiUnsubscribe", a.Unsubscribe) &&
            sym(h, "cuptiEnableCallback", a.EnableCallback) &&
            sym(h, "cuptiGetGraphNodeId", a.GetGraphNodeId) &&
            sym(h, "cuptiGetGraphId", a.GetGraphId) &&
            sym(h, "cuptiGetGraphExecId", a.GetGraphExecId) &&
            sym(h, "cuptiActivityEnable", a.ActivityEnable) &&
            sym(h, "cuptiActivityDisable", a.ActivityDisable) &&
            sym(h, "cuptiActivityRegisterCallbacks", a.ActivityRegisterCallbacks) &&
            sym(h, "cuptiActivityFlushAll", a.ActivityFlushAll) &&
            sym(h, "cuptiActivityGetNextRecord", a.ActivityGetNextRecord) &&
            sym(h, "cuptiActivityGetNumDroppedRecords", a.ActivityGetNumDroppedRecords) &&
            sym(h, "cuptiGetTimestamp", a.GetTimestamp);
  if (!ok) return path + " lacks a required CUPTI symbol (CUPTI older than CUDA 12?)";
  sym(h, "cuptiSubscribe_v2", a.Subscribe_v2);
  sym(h, "cuptiFinalize", a.Finalize);
  a.handle = h;
  a.path = path;
  cupti = a;
  return "";
}


}  // namespace gs
