// Kernel launches on the emulated runtime (fake_runtime_internal.h): the
// checks before a launch (grid, block, stream, dynamic shared memory and its
// per-kernel opt-in), and the fault after it.
#include "cuda_emulator/fake_runtime_internal.h"

#include <algorithm>
#include <cstdio>

#include "cuda_emulator/launch_status.h"

namespace dgemma::cuda_emu {
namespace {

// cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize):
// the opt-in per kernel.
constexpr size_t kDefaultDynamicShared = 48 << 10, kMaxDynamicShared = 227 << 10;
std::mutex g_func_mu;
std::map<const void*, size_t> g_max_dynamic_shared;

}  // namespace

bool launch_begins(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream, size_t dynamic_shared_bytes,
                   const void* func) {
  if (cudaError_t e = broken()) {
    fail(e);
    return false;
  }
  if (!stream_on_current_device(stream)) {
    fail(cudaErrorInvalidResourceHandle);
    std::fprintf(stderr,
                 "dgemma CUDA emulator: kernel %s launched into a stream that is not of the current device %d\n",
                 kernel, t_device);
    return false;
  }
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  const bool ok = grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 &&
                  grid.z <= 65535 && threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 &&
                  block.z <= 64;
  if (dynamic_shared_bytes > kDefaultDynamicShared) {
    size_t allowed = kDefaultDynamicShared;
    {
      std::lock_guard lock(g_func_mu);
      auto it = g_max_dynamic_shared.find(func);
      if (func && it != g_max_dynamic_shared.end()) allowed = it->second;
    }
    if (dynamic_shared_bytes > allowed) {
      fail(cudaErrorInvalidValue);
      std::fprintf(stderr,
                   "dgemma CUDA emulator: kernel %s: %zu bytes of dynamic shared memory, over the %zu it may take "
                   "(cudaFuncSetAttribute with cudaFuncAttributeMaxDynamicSharedMemorySize raises it to %zu)\n",
                   kernel, dynamic_shared_bytes, allowed, kMaxDynamicShared);
      return false;
    }
  }
  if (!ok) {
    fail(cudaErrorInvalidConfiguration);
    std::fprintf(stderr,
                 "dgemma CUDA emulator: kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)\n",
                 kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return false;
  }
  return true;
}

void launch_ends(const char* kernel, const std::string& fault) {
  (void)kernel;  // named in `fault`
  if (!fault.empty()) break_context(cudaErrorLaunchFailure, fault);
}

}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func) return emu::fail(cudaErrorInvalidDeviceFunction);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return emu::fail(cudaErrorInvalidValue);  // not emulated
  if (value < 0 || size_t(value) > emu::kMaxDynamicShared) return emu::fail(cudaErrorInvalidValue);
  std::lock_guard lock(emu::g_func_mu);
  emu::g_max_dynamic_shared[func] = std::max(size_t(value), emu::kDefaultDynamicShared);
  return cudaSuccess;
}
