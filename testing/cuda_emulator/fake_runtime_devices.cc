// The emulated devices (fake_runtime_internal.h): how many, the current one
// of each thread, and what they report of themselves.
#include "cuda_emulator/fake_runtime_internal.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_emulator/launch_status.h"

namespace dgemma::cuda_emu {

Device& device() {
  static Device* d = new Device;  // lives until exit (objects may be freed by static destructors)
  return *d;
}

thread_local constinit int t_device = 0;

// DGEMMA_CUDA_EMULATED_DEVICES (1 to 16, default 1): how many devices the
// emulator reports, e.g. to run a placement plan over cuda:0 and cuda:1.
int device_count() {
  static const int n = [] {
    const char* e = std::getenv("DGEMMA_CUDA_EMULATED_DEVICES");
    if (!e || !*e) return 1;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end != '\0' || v < 1 || v > kMaxDevices) {
      std::fprintf(stderr,
                   "dgemma CUDA emulator: DGEMMA_CUDA_EMULATED_DEVICES='%s' is not a count in [1, %d]; using 1\n", e,
                   kMaxDevices);
      return 1;
    }
    return int(v);
  }();
  return n;
}

int current_device() { return t_device; }

bool env_switch(const char* name, const char* off, const char* on) {
  const char* e = std::getenv(name);
  if (!e || !*e || std::strcmp(e, off) == 0) return false;
  if (std::strcmp(e, on) == 0) return true;
  std::fprintf(stderr, "dgemma CUDA emulator: %s='%s' is neither %s nor %s; using %s\n", name, e, off, on, off);
  return false;
}

}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return emu::fail(cudaErrorInvalidValue);
  *count = emu::device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  if (dev < 0 || dev >= emu::device_count()) return emu::fail(cudaErrorInvalidDevice);
  emu::t_device = dev;
  return emu::broken() ? emu::fail(emu::broken()) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* dev) {
  if (!dev) return emu::fail(cudaErrorInvalidValue);
  *dev = emu::t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int dev) {
  if (!prop) return emu::fail(cudaErrorInvalidValue);
  if (dev < 0 || dev >= emu::device_count()) return emu::fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "dgemma emulated device %d", dev);
  prop->totalGlobalMem = size_t(16) << 30;  // nominal: the emulator allocates host memory
  prop->major = 8;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev) {
  if (!value) return emu::fail(cudaErrorInvalidValue);
  if (dev < 0 || dev >= emu::device_count()) return emu::fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMemoryPoolsSupported: *value = 1; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrMaxGridDimX: *value = 0x7fffffff; return cudaSuccess;
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ: *value = 65535; return cudaSuccess;
    default: return emu::fail(cudaErrorInvalidValue);
  }
}
