#pragma once
// Device helpers shared by the CUDA backend's kernel files (cuda_kernels.cu,
// tc_gemm_kernels.cu): weight loads with the CPU's dequantization
// formulas, bf16 rounding, gelu, warp and block reductions, and launch
// planning. Each kernel file includes it once; everything here is internal
// to that file (an anonymous namespace).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/ggml_blocks.cuh"

// `kernel<<<grid, block, 0, stream>>>`; the host emulation of the device
// (cuda_emulator/device_builtins.h, DGEMMA_CUDA=EMULATE) defines its own.
#ifndef DGEMMA_LAUNCH
#define DGEMMA_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif
// The same with dynamic shared memory, which the kernel takes with
// DGEMMA_DYNAMIC_SHARED(T, name) (T* name: the block's buffer). Over 48 KiB
// the kernel must first be allowed it with cudaFuncSetAttribute(kernel,
// cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) (the emulated device
// checks it).
#ifndef DGEMMA_LAUNCH_SMEM
#define DGEMMA_LAUNCH_SMEM(kernel, grid, block, dynamic_shared_bytes, stream) \
  kernel<<<(grid), (block), (dynamic_shared_bytes), (stream)>>>
#define DGEMMA_DYNAMIC_SHARED(T, name)                                     \
  extern __shared__ __align__(256) unsigned char dgemma_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(dgemma_dynamic_shared_)
#endif

// Full unrolling of a loop with a constant trip count, so that the arrays it
// indexes stay in registers (nvcc only; the emulation's compiler needs none).
#if defined(__CUDACC__) && !defined(DGEMMA_UNROLL)
#define DGEMMA_UNROLL _Pragma("unroll")
#elif !defined(DGEMMA_UNROLL)
#define DGEMMA_UNROLL
#endif

namespace dgemma::cuda {
namespace {

constexpr unsigned kWarps = kBlock / 32;
// Grid-stride kernels never need more blocks than this to fill a GPU.
constexpr int64_t kMaxStrideBlocks = int64_t(1) << 20;

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fc00000); }

__device__ __forceinline__ float load_plain(const void* p, WType t, int64_t i) {
  switch (t) {
    case WType::kF32: return static_cast<const float*>(p)[i];
    case WType::kBF16: return __uint_as_float(uint32_t(static_cast<const uint16_t*>(p)[i]) << 16);
    case WType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case WType::kQuant: break;
  }
  return nan_f32();
}

// The slice holding logical row r (binary search; slices cover every row).
__device__ inline const QSlice& slice_for(const QView& q, int64_t r) {
  int lo = 0, hi = q.nslices - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (q.slices[mid].row_begin <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return q.slices[lo];
}

// Element i of the logical matrix, as quantize/quantized_weight.cc
// dequantize_reference() computes it (same operations in the same order).
__device__ inline float load_quant(const QView& q, int64_t i) {
  const int64_t row = i / q.cols, c = i % q.cols;
  switch (q.scheme) {
    case QScheme::kNF4: {  // blocks over the flattened tensor; element 2k in the high nibble
      const QSlice& s = q.slices[0];
      const uint8_t byte = s.codes[i / 2];
      const int nib = (i % 2 == 0) ? byte >> 4 : byte & 0xF;
      const int64_t b = i / q.block;
      const float absmax = q.double_quant
                               ? q.nested_map[s.scales[b]] * q.nested_scales[b / q.nested_block] + q.nested_offset
                               : reinterpret_cast<const float*>(s.scales)[b];
      return q.code_map[nib] * absmax;
    }
    case QScheme::kNVFP4: {  // E2M1 · e4m3(block scale) · global; column 2k in the low nibble
      const QSlice& s = slice_for(q, row);
      const int64_t lr = row - s.row_begin;
      const uint8_t byte = s.codes[lr * (q.cols / 2) + c / 2];
      const int nib = (c % 2 == 0) ? byte & 0xF : byte >> 4;
      const float scale = q.e4m3[s.scales[lr * (q.cols / q.block) + c / q.block]];
      return (q.code_map[nib] * scale) * s.global_scale;
    }
    case QScheme::kAffine: {  // fma(scale, q, bias), one rounding
      const QSlice& s = slice_for(q, row);
      const int64_t lr = row - s.row_begin, g = lr * (q.cols / q.block) + c / q.block;
      int v;
      if (q.bits == 4) {
        const uint8_t byte = s.codes[lr * (q.cols / 2) + c / 2];
        v = (c % 2 == 0) ? byte & 0xF : byte >> 4;
      } else {
        v = s.codes[lr * q.cols + c];
      }
      return fmaf(load_plain(s.scales, q.scale_type, g), float(v), load_plain(s.biases, q.scale_type, g));
    }
    case QScheme::kInt8: {
      const QSlice& s = slice_for(q, row);
      const int64_t lr = row - s.row_begin;
      const int v = int(int8_t(s.codes[lr * q.cols + c]));
      return reinterpret_cast<const float*>(s.scales)[lr * (q.cols / q.block) + c / q.block] * float(v);
    }
    case QScheme::kFP8: {  // scale · e4m3(code)
      const QSlice& s = slice_for(q, row);
      const int64_t lr = row - s.row_begin;
      return reinterpret_cast<const float*>(s.scales)[lr * (q.cols / q.block) + c / q.block] *
             q.e4m3[s.codes[lr * q.cols + c]];
    }
    case QScheme::kGgml: return load_ggml(q, slice_for(q, row), row, c);  // docs/formats.md §5.2
  }
  return nan_f32();
}

__device__ __forceinline__ float load_w(const void* p, WType t, int64_t i) {
  return t == WType::kQuant ? load_quant(*static_cast<const QView*>(p), i) : load_plain(p, t, i);
}

// dgemma::f32_to_bf16 (core/dtype.h) on the device: round to nearest even,
// NaN kept quiet. The bf16 pattern, and the fp32 value it stands for.
__device__ __forceinline__ uint16_t bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
__device__ __forceinline__ float round_bf16(float f) { return __uint_as_float(uint32_t(bf16_bits(f)) << 16); }

// A weight value rounded to a table's logical dtype (embeddings of quantized
// tables, quantize/quantized_weight.h round_to_dtype).
__device__ __forceinline__ float round_to(float f, WType t) {
  switch (t) {
    case WType::kBF16: return round_bf16(f);
    case WType::kF16: return __half2float(__float2half_rn(f));
    default: return f;
  }
}

// Whether query position qpos sees key position kpos (ops/op.h AttentionMask;
// docs/model.md §7.7 for the block masks). qblock and kblock: the image
// blocks of the query and the key (-1: none, and always -1 without a block
// mask).
__device__ __forceinline__ bool visible(int mask, int64_t window, int64_t first_canvas_pos, int32_t qpos, int32_t kpos,
                                        int32_t qblock = -1, int32_t kblock = -1) {
  const bool same_block = qblock >= 0 && qblock == kblock;
  switch (mask) {
    case kMaskNone: return true;
    case kMaskCausalWindow: return kpos <= qpos && (window == 0 || int64_t(qpos) - kpos < window);
    case kMaskCommittedWindow: return kpos >= first_canvas_pos || int64_t(kpos) > int64_t(qpos) - window;
    case kMaskCausalWindowBlocks: return same_block || (kpos <= qpos && (window == 0 || int64_t(qpos) - kpos < window));
    case kMaskJaxBlocks: {
      const int64_t gap = int64_t(qpos) - int64_t(kpos);
      return (kpos <= qpos || same_block) && (gap < 0 ? -gap : gap) < window;
    }
  }
  return false;
}

// The block of attention key s (ops/op.h attention_blocks): a new row's
// entry of `blocks`; the cache's keys (s < cached), or any key without a
// blocks input, -1.
__device__ __forceinline__ int32_t key_block(const int32_t* blocks, int64_t cached, int64_t s) {
  return blocks && s >= cached ? blocks[s - cached] : -1;
}

// Attention key s of the two segments (cache rows, then new rows; ops/op.h
// attention_keys): its K (or V) row for KV head kh (constant indices only: an
// indexed kernel parameter would be copied to local memory).
__device__ __forceinline__ const float* key_row(const FlashArgs& a, bool values, int64_t s, int64_t kh) {
  const bool cached = s < a.keys[0].rows;
  const float* base = values ? (cached ? a.keys[0].v : a.keys[1].v) : (cached ? a.keys[0].k : a.keys[1].k);
  return base + ((cached ? s : s - a.keys[0].rows) * a.Hk + kh) * a.d;
}

// The online softmax of both attention kernels: the factor that rescales a
// row's sums when its running maximum grows from old_max to new_max (1 while
// no key is visible yet), and a key's unnormalized probability (0 for a
// masked key, whose score is -inf).
__device__ __forceinline__ float online_rescale(float old_max, float new_max) {
  return new_max == -INFINITY ? 1.0f : expf(old_max - new_max);
}
__device__ __forceinline__ float online_prob(float score, float max) {
  return score == -INFINITY ? 0.0f : expf(score - max);
}

// gelu_pytorch_tanh, same expression as cpu::gelu_tanh.
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions; every thread of the block must call them (no early
// return before). Each warp reduces its lanes, then warp 0 the warps'
// results (Op: warp reduction and identity). The trailing barrier lets the
// next call reuse the buffers.
struct SumOp {
  __device__ static float warp(float v) { return warp_sum(v); }
  __device__ static float identity() { return 0.0f; }
};
struct MaxOp {
  __device__ static float warp(float v) { return warp_max(v); }
  __device__ static float identity() { return -INFINITY; }
};

template <class Op>
__device__ inline float block_reduce(float v) {
  __shared__ float part[kWarps];
  __shared__ float total;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = Op::warp(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < kWarps ? part[lane] : Op::identity();
    t = Op::warp(t);
    if (lane == 0) total = t;
  }
  __syncthreads();
  const float r = total;
  __syncthreads();
  return r;
}

__device__ inline float block_sum(float v) { return block_reduce<SumOp>(v); }
__device__ inline float block_max(float v) { return block_reduce<MaxOp>(v); }

// ---- launch planning -------------------------------------------------------

// Fills the launch shape; false (nothing to launch) for an empty grid. Grids
// beyond the hardware limits are reported by leaving launched false with a
// non-empty grid, which the host turns into an error.
inline bool plan(LaunchShape& s, int64_t gx, int64_t gy = 1) {
  s.block = kBlock;
  s.grid[0] = unsigned(gx < 0 ? 0 : gx > 0xffffffffll ? 0xffffffffu : gx);
  s.grid[1] = unsigned(gy < 0 ? 0 : gy > 0xffffffffll ? 0xffffffffu : gy);
  s.grid[2] = 1;
  s.launched = gx >= 1 && gy >= 1 && gx <= 0x7fffffffll && gy <= 65535;
  return s.launched;
}

// A grouped product's grid: x over output tiles, y over row tiles of the
// largest group, z one per group (expert); `threads` per block.
inline bool plan_grouped(LaunchShape& s, int64_t gx, int64_t gy, int64_t groups, int threads) {
  if (!plan(s, gx, gy)) return false;
  s.block = unsigned(threads);
  s.grid[2] = unsigned(groups < 0 ? 0 : groups > 65535 ? 65535 : groups);
  s.launched = groups >= 1 && groups <= 65535;
  return s.launched;
}

inline int64_t stride_blocks(int64_t n) {
  const int64_t b = (n + kBlock - 1) / kBlock;
  return b < kMaxStrideBlocks ? b : kMaxStrideBlocks;
}

inline int64_t warp_tiles(int64_t n) { return (n + kWarps - 1) / kWarps; }

}  // namespace
}  // namespace dgemma::cuda
