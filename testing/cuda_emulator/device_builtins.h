#pragma once
// The device side of the emulated CUDA device: what cuda_kernels.cu needs
// from nvcc (thread indices, __shared__, __syncthreads, warp shuffles, bit
// casts, the launch syntax), provided to the host C++ compiler, so that the
// very same kernel source is compiled and run on the CPU by
// kernels_on_host.cc. Included before any CUDA header there.
//
// Also the warp matrix operations of <mma.h> (nvcuda::wmma, below).
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

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "cuda_emulator/grid_runner.h"
#include "cuda_emulator/launch_status.h"

#define threadIdx (::dgemma::cuda_emu::current_context()->thread_idx)
#define blockIdx (::dgemma::cuda_emu::current_context()->block_idx)
#define blockDim (::dgemma::cuda_emu::current_context()->block_dim)
#define gridDim (::dgemma::cuda_emu::current_context()->grid_dim)

inline void __syncthreads() { ::dgemma::cuda_emu::sync_block(); }

// Dynamic shared memory (device_math.cuh DGEMMA_DYNAMIC_SHARED): the
// launch's per-block buffer (grid_runner.h dynamic_shared).
#define DGEMMA_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::dgemma::cuda_emu::dynamic_shared())

// Atomics. The threads of a block run one at a time (switching only at
// barriers and shuffles) and blocks one after the other, so a plain
// read-modify-write is atomic here; each returns the old value, as on a GPU.
template <class T>
inline T emu_atomic(T* p, T v, T (*op)(T, T)) {
  const T old = *p;
  *p = op(old, v);
  return old;
}
inline int atomicAdd(int* p, int v) {
  return emu_atomic<int>(p, v, [](int a, int b) { return int(unsigned(a) + unsigned(b)); });
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return emu_atomic<unsigned>(p, v, [](unsigned a, unsigned b) { return a + b; });
}
inline float atomicAdd(float* p, float v) {
  return emu_atomic<float>(p, v, [](float a, float b) { return a + b; });
}
inline int atomicMax(int* p, int v) {
  return emu_atomic<int>(p, v, [](int a, int b) { return a > b ? a : b; });
}
inline int atomicMin(int* p, int v) {
  return emu_atomic<int>(p, v, [](int a, int b) { return a < b ? a : b; });
}
inline int atomicExch(int* p, int v) {
  return emu_atomic<int>(p, v, [](int, int b) { return b; });
}
inline int atomicCAS(int* p, int compare, int v) {
  const int old = *p;
  if (old == compare) *p = v;
  return old;
}

template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  const auto* c = ::dgemma::cuda_emu::current_context();
  const unsigned lane = (c->thread_idx.x + c->block_dim.x * (c->thread_idx.y + c->block_dim.y * c->thread_idx.z)) % 32u;
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

// Warp matrix operations (nvcuda::wmma, <mma.h>) for the tensor-core
// kernels. On a GPU a fragment is spread over the 32 lanes in an unspecified
// layout, so kernels may only fill, load, multiply and store fragments (never
// index them), which is what this emulation supports: every lane holds the
// whole tile and performs the whole operation, from memory to memory, so the
// lanes of a warp agree without exchanging anything. mma_sync sums the
// products of each output in k order in fp32 (the products of bf16 or half
// values are exact in fp32); a tensor core's order and internal rounding
// differ, which the tests' tolerances cover. Integer fragments (signed or
// unsigned bytes, int accumulators) sum exactly, as the hardware does. The
// shapes and alignments the hardware requires are checked (a fault, as a
// misaligned access would be).
namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
template <class Use, int M, int N, int K>
struct tile_shape {
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
};
inline float to_float(float v) { return v; }
inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float to_float(__half v) { return __half2float(v); }
inline void check_pointer(const void* p, unsigned ldm, size_t elem, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    ::dgemma::cuda_emu::thread_fault(std::string(what) + ": pointer not 256-bit aligned");
  if ((ldm * elem) % 16 != 0)
    ::dgemma::cuda_emu::thread_fault(std::string(what) + ": leading dimension not a multiple of 16 bytes");
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulated device has the 16x16x16 shape only");
  static constexpr int rows = detail::tile_shape<Use, M, N, K>::rows, cols = detail::tile_shape<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols;
  T x[num_elements];  // row major, the whole tile in every lane
};

template <class Use, int M, int N, int K, class T, class Layout>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const T& v) {
  for (T& e : f.x) e = v;
}

// Matrix operands: the layout is part of the fragment type.
template <class Use, int M, int N, int K, class T, class Layout>
inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm) {
  static_assert(!std::is_same_v<Layout, void>, "an operand fragment needs a layout");
  detail::check_pointer(p, ldm, sizeof(T), "wmma::load_matrix_sync");
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      f.x[r * F::cols + c] = std::is_same_v<Layout, row_major> ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r];
}

// Accumulators: the layout is the call's. Every lane of the warp has loaded
// the tile before any lane goes on (a warp barrier), so that loading a tile,
// adding products and storing it back (a read-modify-write of the tile in
// memory) works as on a GPU, where each lane touches its own elements only;
// without it the whole-tile lanes, run one after the other, would each add
// their products again.
template <int M, int N, int K, class T>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm, layout_t layout) {
  detail::check_pointer(p, ldm, sizeof(T), "wmma::load_matrix_sync");
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      f.x[r * N + c] = layout == mem_row_major ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r];
  ::dgemma::cuda_emu::warp_exchange(0xffffffffu, 0, 0);
}

template <int M, int N, int K, class T>
inline void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  detail::check_pointer(p, ldm, sizeof(T), "wmma::store_matrix_sync");
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      (layout == mem_row_major ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]) = f.x[r * N + c];
}

template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC>
inline void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  TC out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      TC acc = c.x[i * N + j];
      if constexpr (std::is_same_v<TC, int>) {
        // The integer tensor cores: bytes of one signedness, exact int32 sums.
        static_assert(std::is_same_v<TA, TB> && (std::is_same_v<TA, signed char> || std::is_same_v<TA, unsigned char>),
                      "integer wmma takes signed or unsigned bytes, both operands alike");
        for (int k = 0; k < K; ++k) acc += int(a.x[i * K + k]) * int(b.x[k * N + j]);
      } else {
        for (int k = 0; k < K; ++k) acc += detail::to_float(a.x[i * K + k]) * detail::to_float(b.x[k * N + j]);
      }
      out[i * N + j] = acc;
    }
  for (int e = 0; e < M * N; ++e) d.x[e] = out[e];  // d may be c
}

}  // namespace nvcuda::wmma

namespace dgemma::cuda_emu {

// `kernel<<<grid, block, 0, stream>>>(args...)` on the host: the arguments
// are copied (by value, as a launch does) and every thread of the grid runs
// the kernel with them. A bad configuration or a fault in the kernel is
// recorded as the runtime's error state (launch_status.h).
template <class Kernel>
class HostLaunch {
 public:
  HostLaunch(const char* name, dim3 grid, dim3 block, cudaStream_t stream, Kernel* kernel, size_t dynamic_shared = 0)
      : name_(name), grid_(grid), block_(block), stream_(stream), kernel_(kernel), dynamic_shared_(dynamic_shared) {}
  // The configuration is checked at the launch; the grid runs then, or when
  // the host waits for the stream (deferred streams), with copies of the
  // arguments, as a launch takes them.
  template <class... Args>
  void operator()(Args... args) const {
    if (!launch_begins(name_, grid_, block_, stream_, dynamic_shared_, reinterpret_cast<const void*>(kernel_))) return;
    enqueue_work(
        stream_,
        [name = name_, grid = grid_, block = block_, kernel = kernel_, smem = dynamic_shared_, args...] {
          const std::function<void()> body = [&] { kernel(args...); };
          launch_ends(name, run_grid(name, grid, block, body, smem));
        },
        name_);
  }

 private:
  const char* name_;
  dim3 grid_, block_;
  cudaStream_t stream_;
  Kernel* kernel_;
  size_t dynamic_shared_;
};

}  // namespace dgemma::cuda_emu

#define DGEMMA_LAUNCH(kernel, grid, block, stream) \
  ::dgemma::cuda_emu::HostLaunch(#kernel, dim3(grid), dim3(block), (stream), &(kernel))
#define DGEMMA_LAUNCH_SMEM(kernel, grid, block, dynamic_shared_bytes, stream) \
  ::dgemma::cuda_emu::HostLaunch(#kernel, dim3(grid), dim3(block), (stream), &(kernel), (dynamic_shared_bytes))
