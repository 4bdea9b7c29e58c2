#pragma once
// Backends by name: "cpu", "inject:OP:LAYER:PASS:STEP:KIND[:SITE][@BACKEND]"
// (one injected fault in an op of BACKEND, the CPU by default:
// inject_backend.h), "cuda" (when built with CUDA and a device is present),
// "opencl", "opencl:P.D" (when built with OpenCL, docs/opencl.md §2).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace dgemma {

std::unique_ptr<Backend> make_backend(const std::string& spec, int threads = 0);

// Throws what make_backend would throw for a malformed or unbuilt name,
// without touching an OpenCL driver: an OpenCL name is only parsed, its
// device found when the backend is made. For a process that forks before it
// makes the backend (`doctor`): a driver with threads of its own does not
// survive fork(). Other names are checked by making the backend.
void check_backend_name(const std::string& spec);
// Whether `spec` (a backend name, an inject: one included) runs on OpenCL
// and this process has already started an OpenCL driver: a backend made in a
// forked child would then not work (opencl_devices.h
// opencl_started_in_this_process). False in a build without OpenCL.
bool opencl_unusable_after_fork(const std::string& spec);

// The CPU backend with `threads` workers (0: one per hardware thread) and its
// dot modes (backend/cpu/cpu_backend.h CpuBackendOptions::bf16_dot, int8_dot),
// for callers that should not depend on the CPU backend's own header.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0, bool bf16_dot = false, bool int8_dot = false);

// The CUDA devices this build can use: their count (cuda_backend.h
// cuda_device_count, taken in a child process), or -1 when this build has no
// CUDA backend. For `dgemma devices`, which the CUDA backend's own header is
// not a layer of.
int cuda_devices_in_this_build();

// One CUDA device as `dgemma devices` lists it (cuda_backend.h cuda_devices).
struct CudaDeviceSummary {
  std::string backend;  // "cuda:N", the --backend string that selects it
  std::string name;     // empty when its properties could not be read
  uint64_t memory_bytes = 0;
  std::string compute_capability;  // "9.0"
  int multiprocessors = 0;
};
// The CUDA devices with their properties (empty without the CUDA backend or
// a device); taken in a child process, like the count.
std::vector<CudaDeviceSummary> cuda_device_list();

// The memory of the device a plan names ("opencl:P.D", "opencl", "cuda:N"),
// read from the device: for `dgemma plan --devices NAME` without a size
// (placement/planner.h parse_device_list). Throws naming the device when it
// does not exist, its backend is not built, or it is not a device with memory
// of its own (a virtual CPU device needs NAME=SIZE).
uint64_t device_memory_bytes(const std::string& name);

// Adds a device option ("sync", "debug") to a backend name: "cuda" becomes
// "cuda:sync", "cuda:1" becomes "cuda:1,sync", "opencl:0.0" becomes
// "opencl:0.0,sync" (OpenCL takes both as debug). Other backends run every op
// synchronously on the host and have no device buffers to guard, so their
// names are returned unchanged.
std::string with_device_option(const std::string& spec, const std::string& option);

}  // namespace dgemma
