// The bf16 tensor-core path of the CUDA backend (CudaBackendOptions::bf16_dot,
// `--precision bf16-dot`; docs/cuda.md §3.3): the same rounding points as the
// CPU's dot mode (bench/README.md "Modes of the CPU backend": GEMM
// activations rounded to bf16 once per product, bf16 weights as stored, fp32
// accumulation), so that both backends compute the same products up to the
// order of the fp32 sums. The dense products run in cuBLAS (bf16 inputs,
// CUBLAS_COMPUTE_32F); this file holds the conversions and the grouped expert
// product, which cuBLAS cannot run without the per-expert row counts on the
// host. FP8 weights take the same kernel, their codes widened to bf16 in the
// tile (exact) and their scales applied to each output (a scale per channel)
// or to each block's partial sums (a scale per block of 32k columns).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_math.cuh"

namespace dgemma::cuda {
namespace {

namespace wmma = nvcuda::wmma;

__global__ void to_bf16_kernel(const float* x, int64_t n, uint16_t* out) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x)
    out[t] = bf16_bits(x[t]);
}

__global__ void gather_rows_bf16_kernel(const float* x, const int32_t* rows, int64_t H, uint16_t* out) {
  const int64_t t = blockIdx.x;
  const float* src = x + int64_t(rows[t]) * H;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) out[t * H + h] = bf16_bits(src[h]);
}

__global__ void glu_split_bf16_kernel(const float* g, int64_t n, int64_t I, uint16_t* act) {
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < n * I; q += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = q / I, i = q % I;
    act[q] = bf16_bits(gelu_tanh(g[t * 2 * I + i]) * g[t * 2 * I + I + i]);
  }
}

// soft_probs_kernel (cuda_kernels.cu) with round_bf16, writing bf16: the max
// and the sum are the same strided loops and reductions, and each probability
// is recomputed from the logits with the same expressions, so the bits equal
// the fp32 kernel's (which keeps its intermediates in the output row).
__global__ void soft_probs_bf16_kernel(const float* logits, int64_t V, uint16_t* probs) {
  const float* z = logits + int64_t(blockIdx.x) * V;
  uint16_t* p = probs + int64_t(blockIdx.x) * V;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, round_bf16(z[v]));
  mx = block_max(mx);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) sum += expf(round_bf16(z[v]) - mx);
  sum = block_sum(sum);
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) p[v] = bf16_bits(expf(round_bf16(z[v]) - mx) / sum);
}

// Grouped expert product on the tensor cores. Block tile: kRows rows of one
// expert × kCols output features, k in steps of kDepth; 4 warps, warp w owns
// output columns 16w .. 16w + 15 of the tile for all kRows rows (kRows / 16
// accumulators). The operands are staged in shared memory as bf16 (rows of
// kDepth + 8 halves: wmma needs a leading dimension that is a multiple of 8,
// and the pad spreads the rows over the banks); the W tile is read as the
// column-major k×n operand. Loads are 16 bytes (8 values) when K allows, and
// the next k step's operands are fetched into registers while the tensor
// cores work on the current one. Rows past the expert's end and k past K are
// zeros; blocks past an expert's rows exit at once (grid (N / kCols,
// max_rows / kRows, E): the host does not know the counts).
constexpr int kRows = 32, kCols = 64, kDepth = 32, kPad = 8, kGemmThreads = 128;
constexpr int kLd = kDepth + kPad;
constexpr int kChunksA = kRows * kDepth / 8 / kGemmThreads;  // 16-byte chunks per thread
constexpr int kChunksW = kCols * kDepth / 8 / kGemmThreads;
static_assert(kChunksA >= 1 && kChunksW >= 1, "tile too small for the block");

struct Chunk {
  uint4 v;
};

// 8 bf16 values (low halves of h), in order, as one chunk.
__device__ __forceinline__ Chunk pack_chunk(const uint32_t (&h)[8]) {
  Chunk c;
  c.v.x = h[0] | h[1] << 16;
  c.v.y = h[2] | h[3] << 16;
  c.v.z = h[4] | h[5] << 16;
  c.v.w = h[6] | h[7] << 16;
  return c;
}

// 8 consecutive bf16 values of row `row` (< rows) from column k0, zeros past
// the row's end (or for rows >= rows); 16-byte loads when `vec`.
__device__ __forceinline__ Chunk load_chunk(const uint16_t* base, int64_t row, int64_t rows, int64_t K, int64_t k0,
                                            bool vec) {
  Chunk c;
  c.v = make_uint4(0u, 0u, 0u, 0u);
  if (row >= rows || k0 >= K) return c;
  const uint16_t* p = base + row * K + k0;
  if (vec && k0 + 8 <= K) {
    c.v = *reinterpret_cast<const uint4*>(p);
    return c;
  }
  uint32_t h[8];
  for (int i = 0; i < 8; ++i) h[i] = k0 + i < K ? p[i] : 0u;
  return pack_chunk(h);
}

// An E4M3FN byte as bf16 bits: every E4M3 number is a bf16 number (3
// mantissa bits, exponents 2^-9 .. 2^8), so this is exact; NaN stays NaN.
__device__ __forceinline__ uint32_t e4m3_bf16_bits(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 8, e = (b >> 3) & 0xFu, m = b & 7u;
  if (e == 0xFu && m == 7u) return sign | 0x7FC0u;
  if (e == 0u) return sign | (__float_as_uint(float(m) * 0.001953125f) >> 16);  // m · 2^-9, subnormal
  return sign | (e + 120u) << 7 | m << 4;                                       // bias 7 -> 127
}

// 8 consecutive FP8 codes of row `row` from column k0 as bf16, zeros past
// the row's end (or for rows >= rows); 8-byte loads when `vec`.
__device__ __forceinline__ Chunk load_chunk_fp8(const uint8_t* base, int64_t row, int64_t rows, int64_t K, int64_t k0,
                                                bool vec) {
  uint32_t h[8] = {};  // code 0 is +0, also bf16 0
  if (row < rows && k0 < K) {
    const uint8_t* p = base + row * K + k0;
    if (vec && k0 + 8 <= K) {
      const uint2 v = *reinterpret_cast<const uint2*>(p);
      for (int i = 0; i < 4; ++i) {
        h[i] = v.x >> (8 * i) & 0xFFu;
        h[4 + i] = v.y >> (8 * i) & 0xFFu;
      }
    } else {
      for (int i = 0; i < 8; ++i) h[i] = k0 + i < K ? p[i] : 0u;
    }
  }
  for (uint32_t& v : h) v = e4m3_bf16_bits(v);
  return pack_chunk(h);
}

__device__ __forceinline__ void store_chunk(uint16_t* dst, const Chunk& c) { *reinterpret_cast<uint4*>(dst) = c.v; }

// The weight operand: bf16 values (kBf16Weights), or FP8 E4M3 codes with an
// fp32 scale per output row (scale_block = K) or per row and block of
// scale_block columns (kFp8BlockScales), widened to bf16 in the tile. A scale
// per row multiplies each output in the epilogue: y = scale_n · Σ a·e4m3.
// With block scales, at the end of each block the tile's partial sums go
// through shared memory and each thread adds the outputs it owns, scaled, in
// registers: y = Σ_b scale_{n,b} · Σ_{k in b} a·e4m3 (a variant of its own:
// those registers would cost the other ones occupancy). Without `starts`, one
// group of max_rows rows (a linear).
enum : int { kBf16Weights, kFp8RowScales, kFp8BlockScales };
template <int kWeights>
__global__ void grouped_gemm_tc_kernel(const uint16_t* a, int64_t K, const int32_t* starts, int64_t max_rows,
                                       const void* w, const float* w_scales, int64_t scale_block, int64_t N, float* y) {
  constexpr bool kFp8 = kWeights != kBf16Weights, kBlockScales = kWeights == kFp8BlockScales;
  const int64_t e = blockIdx.z;
  const int64_t first = (starts ? int64_t(starts[e]) : 0) + int64_t(blockIdx.y) * kRows;
  const int64_t end = starts ? int64_t(starts[e + 1]) : max_rows;
  if (first >= end) return;  // the whole block: before any barrier
  const int64_t n0 = int64_t(blockIdx.x) * kCols;
  const int64_t rows = end - first, cols = N - n0 < kCols ? N - n0 : kCols;
  const uint16_t* a_tile = a + first * K;
  const uint16_t* w_tile = static_cast<const uint16_t*>(w) + (e * N + n0) * K;
  const uint8_t* w8_tile = static_cast<const uint8_t*>(w) + (e * N + n0) * K;
  // 16-byte loads (8-byte for FP8 codes) need every row start aligned: K a
  // multiple of 8 (cudaMalloc'd bases are 256-byte aligned).
  const bool vec = K % 8 == 0;

  alignas(32) __shared__ uint16_t as[kRows * kLd];
  alignas(32) __shared__ uint16_t ws[kCols * kLd];
  alignas(32) __shared__ float cs[kRows * (kCols + 4)];
  const int tid = int(threadIdx.x), warp = tid / 32;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kRows / 16];
  for (int i = 0; i < kRows / 16; ++i) wmma::fill_fragment(acc[i], 0.0f);
  // Block scales: the scaled sums of the outputs this thread owns, rows
  // tid / kCols + j · kRowStep of column tid % kCols (one scale per block).
  constexpr int kRowStep = kGemmThreads / kCols, kOwned = kRows / kRowStep;
  static_assert(kGemmThreads % kCols == 0 && kRows % kRowStep == 0, "outputs split evenly over the threads");
  const int own_c = tid % kCols, own_r = tid / kCols;
  float owned[kOwned] = {};  // K = 0: zeros
  const float* own_scales = w_scales + (e * N + n0 + own_c) * (kBlockScales ? K / scale_block : 1);
  auto store_acc = [&] {
    for (int i = 0; i < kRows / 16; ++i)
      wmma::store_matrix_sync(cs + i * 16 * (kCols + 4) + warp * 16, acc[i], kCols + 4, wmma::mem_row_major);
  };

  Chunk ra[kChunksA], rw[kChunksW];
  auto fetch = [&](int64_t k0) {
    for (int c = 0; c < kChunksA; ++c) {
      const int q = tid + c * kGemmThreads, r = q / (kDepth / 8), kc = (q % (kDepth / 8)) * 8;
      ra[c] = load_chunk(a_tile, r, rows, K, k0 + kc, vec);
    }
    for (int c = 0; c < kChunksW; ++c) {
      const int q = tid + c * kGemmThreads, r = q / (kDepth / 8), kc = (q % (kDepth / 8)) * 8;
      rw[c] = kFp8 ? load_chunk_fp8(w8_tile, r, cols, K, k0 + kc, vec) : load_chunk(w_tile, r, cols, K, k0 + kc, vec);
    }
  };
  fetch(0);
  for (int64_t k0 = 0; k0 < K; k0 += kDepth) {
    for (int c = 0; c < kChunksA; ++c) {
      const int q = tid + c * kGemmThreads;
      store_chunk(as + (q / (kDepth / 8)) * kLd + (q % (kDepth / 8)) * 8, ra[c]);
    }
    for (int c = 0; c < kChunksW; ++c) {
      const int q = tid + c * kGemmThreads;
      store_chunk(ws + (q / (kDepth / 8)) * kLd + (q % (kDepth / 8)) * 8, rw[c]);
    }
    __syncthreads();
    if (k0 + kDepth < K) fetch(k0 + kDepth);  // in flight during the products below
    for (int kk = 0; kk < kDepth; kk += 16) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bf;
      wmma::load_matrix_sync(bf, reinterpret_cast<const __nv_bfloat16*>(ws + warp * 16 * kLd + kk), kLd);
      for (int i = 0; i < kRows / 16; ++i) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af;
        wmma::load_matrix_sync(af, reinterpret_cast<const __nv_bfloat16*>(as + i * 16 * kLd + kk), kLd);
        wmma::mma_sync(acc[i], af, bf, acc[i]);
      }
    }
    __syncthreads();
    if (kBlockScales && (k0 + kDepth) % scale_block == 0) {  // a scale block ends
      const int64_t b = k0 / scale_block;
      store_acc();
      __syncthreads();
      const float scale = own_c < cols ? own_scales[b] : 0.0f;
      DGEMMA_UNROLL
      for (int j = 0; j < kOwned; ++j) {
        const float p = cs[(own_r + j * kRowStep) * (kCols + 4) + own_c] * scale;
        owned[j] = b == 0 ? p : owned[j] + p;
      }
      for (int i = 0; i < kRows / 16; ++i) wmma::fill_fragment(acc[i], 0.0f);
      __syncthreads();  // cs is read before the next block's store
    }
  }
  if (kBlockScales) {
    DGEMMA_UNROLL
    for (int j = 0; j < kOwned; ++j) {
      const int r = own_r + j * kRowStep;
      if (r < rows && own_c < cols) y[(first + r) * N + n0 + own_c] = owned[j];
    }
    return;
  }
  store_acc();
  __syncthreads();
  for (int q = tid; q < kRows * kCols; q += kGemmThreads) {
    const int r = q / kCols, c = q % kCols;
    if (r < rows && c < cols) {
      const float v = cs[r * (kCols + 4) + c];
      y[(first + r) * N + n0 + c] = kFp8 ? v * w_scales[e * N + n0 + c] : v;
    }
  }
}

}  // namespace

// The launch wrappers below are laid out by hand: clang-format 14 cannot lay
// out DGEMMA_LAUNCH(kernel, grid, block, stream)(args) (device_math.cuh).
// clang-format off
LaunchShape launch_to_bf16(cudaStream_t stream, const float* x, int64_t n, uint16_t* out) {
  LaunchShape s;
  if (plan(s, stride_blocks(n))) DGEMMA_LAUNCH(to_bf16_kernel, s.grid[0], kBlock, stream)(x, n, out);
  return s;
}

LaunchShape launch_gather_rows_bf16(cudaStream_t stream, const float* x, const int32_t* rows, int64_t n, int64_t H,
                                    uint16_t* out) {
  LaunchShape s;
  if (H > 0 && plan(s, n)) DGEMMA_LAUNCH(gather_rows_bf16_kernel, s.grid[0], kBlock, stream)(x, rows, H, out);
  return s;
}

LaunchShape launch_glu_split_bf16(cudaStream_t stream, const float* g, int64_t n, int64_t I, uint16_t* act) {
  LaunchShape s;
  if (plan(s, stride_blocks(n * I))) DGEMMA_LAUNCH(glu_split_bf16_kernel, s.grid[0], kBlock, stream)(g, n, I, act);
  return s;
}

LaunchShape launch_soft_probs_bf16(cudaStream_t stream, const float* logits, int64_t rows, int64_t V,
                                   uint16_t* probs) {
  LaunchShape s;
  if (plan(s, rows)) DGEMMA_LAUNCH(soft_probs_bf16_kernel, s.grid[0], kBlock, stream)(logits, V, probs);
  return s;
}

LaunchShape launch_grouped_gemm_bf16(cudaStream_t stream, const uint16_t* a, int64_t K, const int32_t* starts,
                                     int64_t E, int64_t max_rows, const uint16_t* w, int64_t N, float* y) {
  LaunchShape s;
  const int64_t gx = (N + kCols - 1) / kCols, gy = (max_rows + kRows - 1) / kRows;
  if (plan_grouped(s, gx, gy, E, kGemmThreads))
    DGEMMA_LAUNCH(grouped_gemm_tc_kernel<kBf16Weights>, dim3(unsigned(gx), unsigned(gy), unsigned(E)), kGemmThreads, stream)(
        a, K, starts, max_rows, w, nullptr, K, N, y);
  return s;
}

LaunchShape launch_grouped_gemm_fp8(cudaStream_t stream, const uint16_t* a, int64_t K, const int32_t* starts,
                                    int64_t E, int64_t max_rows, const uint8_t* codes, const float* scales,
                                    int64_t scale_block, int64_t N, float* y) {
  LaunchShape s;
  const int64_t gx = (N + kCols - 1) / kCols, gy = (max_rows + kRows - 1) / kRows;
  if (!plan_grouped(s, gx, gy, E, kGemmThreads)) return s;
  const dim3 grid{unsigned(gx), unsigned(gy), unsigned(E)};
  if (scale_block == K)
    DGEMMA_LAUNCH(grouped_gemm_tc_kernel<kFp8RowScales>, grid, kGemmThreads, stream)(a, K, starts, max_rows, codes,
                                                                                     scales, K, N, y);
  else
    DGEMMA_LAUNCH(grouped_gemm_tc_kernel<kFp8BlockScales>, grid, kGemmThreads, stream)(a, K, starts, max_rows, codes,
                                                                                       scales, scale_block, N, y);
  return s;
}

// clang-format on

}  // namespace dgemma::cuda
