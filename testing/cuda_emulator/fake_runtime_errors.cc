// The emulated runtime's error state (fake_runtime_internal.h): the last
// error of each thread, the sticky fault of a broken context, and the names
// and texts of the errors.
#include "cuda_emulator/fake_runtime_internal.h"

#include <cstdio>

#include "cuda_emulator/launch_status.h"

namespace dgemma::cuda_emu {

thread_local constinit cudaError_t t_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

// The sticky error of the current device's broken context, else success.
cudaError_t broken() {
  Device& d = device();
  std::lock_guard lock(d.mu);
  return d.sticky[t_device];
}

void break_context(cudaError_t e, const std::string& what) {
  Device& d = device();
  {
    std::lock_guard lock(d.mu);
    if (d.sticky[t_device] == cudaSuccess) d.sticky[t_device] = e;
  }
  t_last_error = e;
  std::fprintf(stderr, "dgemma CUDA emulator: device %d: %s: %s\n", t_device, cudaGetErrorName(e), what.c_str());
}

void illegal_address(const std::string& what) { break_context(cudaErrorIllegalAddress, what); }

}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

cudaError_t cudaGetLastError() {
  const cudaError_t sticky = emu::broken();
  const cudaError_t e = emu::t_last_error;
  emu::t_last_error = cudaSuccess;
  return sticky ? sticky : e;
}

cudaError_t cudaPeekAtLastError() {
  const cudaError_t sticky = emu::broken();
  return sticky ? sticky : emu::t_last_error;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalState: return "the resource is not in a valid state to perform the requested operation";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorGraphExecUpdateFailure:
      return "the graph update was not performed because it included changes which violated constraints specific "
             "to instantiated graph update";
    default: return "unknown error";
  }
}
