#pragma once
// The device side of the emulated CUDA device: what cuda_kernels.cu needs
// from nvcc (thread indices, __shared__, __syncthreads, warp shuffles, bit
// casts, the launch syntax), provided to the host C++ compiler, so that the
// very same kernel source is compiled and run on the CPU by
// kernels_on_host.cc. Included before any CUDA header there.
//
// Semantics (grid_runner.h): blocks run one at a time, the threads of a block
// as fibers that meet at barriers; __shared__ variables are per-OS-thread
// statics, which is per-block storage because one OS thread runs one block
// at a time. This is a test device: it checks what kernels compute and that
// they synchronize correctly, not how fast or with which memory ordering a
// GPU runs them.
#include <math.h>  // expf, fmaxf, INFINITY...: nvcc provides them implicitly

#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

// Before cuda_runtime.h: host_defines.h keeps an existing __shared__.
#define __shared__ static thread_local

#include <cuda_runtime.h>

#include "backend/cuda/emulation/grid_runner.h"
#include "backend/cuda/emulation/launch_status.h"

#define threadIdx (::dgemma::cuda_emu::current_context()->thread_idx)
#define blockIdx (::dgemma::cuda_emu::current_context()->block_idx)
#define blockDim (::dgemma::cuda_emu::current_context()->block_dim)
#define gridDim (::dgemma::cuda_emu::current_context()->grid_dim)

inline void __syncthreads() { ::dgemma::cuda_emu::sync_block(); }

template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  const auto* c = ::dgemma::cuda_emu::current_context();
  const unsigned lane =
      (c->thread_idx.x + c->block_dim.x * (c->thread_idx.y + c->block_dim.y * c->thread_idx.z)) % 32u;
  // Within segments of `width` lanes, as on the GPU.
  const unsigned seg = lane & ~unsigned(width - 1);
  const unsigned src = seg | ((lane ^ unsigned(lane_mask)) & unsigned(width - 1));
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = ::dgemma::cuda_emu::warp_exchange(mask, bits, src);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }
inline int __float_as_int(float v) { return std::bit_cast<int>(v); }
inline double __longlong_as_double(long long v) { return std::bit_cast<double>(v); }

namespace dgemma::cuda_emu {

// `kernel<<<grid, block, 0, stream>>>(args...)` on the host: the arguments
// are copied (by value, as a launch does) and every thread of the grid runs
// the kernel with them. A bad configuration or a fault in the kernel is
// recorded as the runtime's error state (launch_status.h).
template <class Kernel>
class HostLaunch {
 public:
  HostLaunch(const char* name, dim3 grid, dim3 block, cudaStream_t stream, Kernel* kernel)
      : name_(name), grid_(grid), block_(block), stream_(stream), kernel_(kernel) {}
  template <class... Args>
  void operator()(Args... args) const {
    if (!launch_begins(name_, grid_, block_, stream_)) return;
    const std::function<void()> body = [&] { kernel_(args...); };
    launch_ends(name_, run_grid(name_, grid_, block_, body));
  }

 private:
  const char* name_;
  dim3 grid_, block_;
  cudaStream_t stream_;
  Kernel* kernel_;
};

}  // namespace dgemma::cuda_emu

#define DGEMMA_LAUNCH(kernel, grid, block, stream) \
  ::dgemma::cuda_emu::HostLaunch(#kernel, dim3(grid), dim3(block), (stream), &(kernel))
