// The integer path of the CUDA backend (CudaBackendOptions::int8_dot,
// `--precision int8-dot`; docs/cuda.md §3.5): GEMMs over quantized weights on
// int8 activation blocks, the CPU's int8-dot (backend/cpu/int8_dot.h) on the
// integer tensor cores. The weights stay packed in device memory and are
// decoded tile by tile into the small integers of their format (NF4's 15-bit
// levels, NVFP4's 2·E2M1, MLX codes, int8 as is; the values come from the
// CPU's int8_weight_values through the QView). Per (row, weight row, scale
// sub-block) the integer sum is exact, and the fp32 epilogue is the CPU's
// fma chain in ascending block order, so the outputs are bit-identical to
// the CPU's int8-dot at every level.
//
// The tensor cores multiply signed bytes. Values that do not fit one are
// offset into it and the offset folded back through the activation block
// sums Σq (exact integers):
//   MLX 8-bit  V ∈ [0, 255]:        V = (V - 128) + 128,
//              Σ q·V = Σ q·(V - 128) + 128·Σq;
//   NF4        V ∈ [-32767, 32767]: V = 256·hi + (lo + 128), hi = V >> 8 and
//              lo = (V & 255) - 128 both signed bytes,
//              Σ q·V = 256·Σ q·hi + Σ q·lo + 128·Σq (two products).
// No intermediate leaves int32: |Σ q·V| ≤ 32·127·32767 < 2^31.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_math.cuh"

namespace dgemma::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kI8Block = 32;          // activation columns per scale (kI8Block)
constexpr float kTinyBlock = 1e-30f;  // cpu int8_dot_kernels.cc: quantized to zero below it

__device__ __forceinline__ int warp_sum_int(int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per (row, block), lane i holding column i of the block: the
// operations of cpu quantize_rows_portable (q = rint(x · (127 / amax)), d =
// amax / 127, ds = d · Σq), so the same q and scales.
__global__ void i8_quantize_kernel(const float* x, int64_t M, int64_t K, int8_t* q, float* d, float* ds,
                                   int32_t* qsum) {
  const int64_t nb = K / kI8Block, warps_per_block = blockDim.x / 32;
  const int lane = int(threadIdx.x % 32);
  const int64_t step = int64_t(gridDim.x) * warps_per_block;
  // The trip count depends on the warp only: all lanes shuffle together.
  for (int64_t t = int64_t(blockIdx.x) * warps_per_block + threadIdx.x / 32; t < M * nb; t += step) {
    const int64_t m = t / nb, b = t % nb, at = m * K + b * kI8Block + lane;
    const float v = x[at], av = fabsf(v);
    const float amax = warp_max(av);
    const int bad = warp_sum_int(av <= FLT_MAX ? 0 : 1);  // NaN and ±Inf fail the comparison
    if (bad != 0) {
      q[at] = 0;
      if (lane == 0) d[t] = ds[t] = nan_f32(), qsum[t] = 0;
      continue;
    }
    const bool tiny = amax < kTinyBlock;
    const float id = tiny ? 0.0f : 127.0f / amax, dv = tiny ? 0.0f : amax / 127.0f;
    const int qi = int(rintf(v * id));
    q[at] = int8_t(qi);
    const int sum = warp_sum_int(qi);
    if (lane == 0) {
      d[t] = dv;
      ds[t] = dv * float(sum);
      qsum[t] = sum;
    }
  }
}

// How a format's codes become signed bytes (module comment).
enum class I8Kind : int { kNF4, kNVFP4, kAffine4, kAffine8, kInt8, kGgml };

// Block tile: kRows activation rows of one expert × kCols weight rows (output
// features), k in steps of one activation block (32 columns); 4 warps, warp w
// owns weight rows 16w .. 16w + 15 for all kRows rows. Shared operands are
// kept as two 16-column halves ([half][row][16] bytes: every wmma pointer
// 256-bit aligned, ldm 16), the W tile read as the column-major k×n operand.
// The integer sums of a sub-block go through shared memory to the epilogue,
// where thread t owns weight row t % 64 and activation rows t / 64 + 2i
// (16 fp32 accumulators in registers, the CPU's chain per output). The next
// step's codes and activations are fetched into registers while the tensor
// cores work. Blocks past an expert's rows exit at once.
constexpr int kRows = 32, kCols = 64, kThreads = 128, kOwned = kRows * kCols / kThreads;
static_assert(kThreads == 2 * kCols && kThreads == 4 * kRows, "one weight half-row and 8 activation bytes per thread");

// Row r of the logical matrix: where its codes and scales start.
struct RowRef {
  const QSlice* slice = nullptr;
  int64_t local = 0;  // row within the slice
};

__device__ inline RowRef row_ref(const QView& q, int64_t r) {
  RowRef ref;
  ref.slice = &slice_for(q, r);
  ref.local = r - ref.slice->row_begin;
  return ref;
}

// The 16 values of row r (ref) at columns [c0, c0 + 16) as signed bytes: lo
// (the value, or NF4's low plane) and hi (NF4's high plane).
template <I8Kind KIND>
__device__ __forceinline__ void decode16(const QView& q, const int16_t* levels, int64_t r, const RowRef& ref, int64_t K,
                                         int64_t c0, int8_t (&lo)[16], int8_t (&hi)[16]) {
  if constexpr (KIND == I8Kind::kNF4) {  // flattened, element 2k in the high nibble
    const uint8_t* p = q.slices[0].codes + (r * K + c0) / 2;
    for (int i = 0; i < 8; ++i) {
      const uint8_t c = p[i];
      const int v0 = levels[c >> 4], v1 = levels[c & 0xF];
      hi[2 * i] = int8_t(v0 >> 8), lo[2 * i] = int8_t((v0 & 255) - 128);
      hi[2 * i + 1] = int8_t(v1 >> 8), lo[2 * i + 1] = int8_t((v1 & 255) - 128);
    }
  } else if constexpr (KIND == I8Kind::kNVFP4 || KIND == I8Kind::kAffine4) {  // per row, column 2k low
    const uint8_t* p = ref.slice->codes + ref.local * (K / 2) + c0 / 2;
    for (int i = 0; i < 8; ++i) {
      const uint8_t c = p[i];
      lo[2 * i] = int8_t(levels[c & 0xF]);
      lo[2 * i + 1] = int8_t(levels[c >> 4]);
    }
  } else if constexpr (KIND == I8Kind::kGgml) {  // levels read from the block (ggml_blocks.cuh)
    const uint8_t* b = ggml_block_at(q, *ref.slice, r, c0);
    const int e0 = int(c0 % q.block);  // 16 columns never straddle a block (32 or 256)
    for (int i = 0; i < 16; ++i) lo[i] = int8_t(ggml_level(q.ggml_type, b, e0 + i, q.ggml_iq4));
  } else {  // one byte per value
    const uint8_t* p = ref.slice->codes + ref.local * K + c0;
    for (int i = 0; i < 16; ++i) lo[i] = KIND == I8Kind::kAffine8 ? int8_t(int(p[i]) - 128) : int8_t(p[i]);
  }
}

// The scale (and MLX bias) of row r's sub-block at column c: Decoder::scales
// of backend/cpu/int8_dot_gemm.cc, the same fp32 operations.
template <I8Kind KIND>
__device__ __forceinline__ void scales_at(const QView& q, int64_t r, const RowRef& ref, int64_t K, int64_t c, float* ws,
                                          float* wb) {
  if constexpr (KIND == I8Kind::kNF4) {
    const int64_t b = (r * K + c) / q.block;
    const uint8_t* absmax = q.slices[0].scales;
    const float block_scale = q.double_quant
                                  ? q.nested_map[absmax[b]] * q.nested_scales[b / q.nested_block] + q.nested_offset
                                  : reinterpret_cast<const float*>(absmax)[b];
    *ws = block_scale * q.i8_nf4_factor;
  } else if constexpr (KIND == I8Kind::kNVFP4) {
    const QSlice& s = *ref.slice;
    *ws = (q.e4m3[s.scales[ref.local * (K / 16) + c / 16]] * s.global_scale) * 0.5f;
  } else if constexpr (KIND == I8Kind::kGgml) {  // backend/cpu/int8_dot_ggml.cc ggml_scales
    ggml_sub_scale(q.ggml_type, ggml_block_at(q, *ref.slice, r, c), int(c % q.block) / q.ggml_sub, ws, wb);
  } else {
    const QSlice& s = *ref.slice;
    const int64_t g = ref.local * (K / q.block) + c / q.block;
    if constexpr (KIND == I8Kind::kInt8) {
      *ws = reinterpret_cast<const float*>(s.scales)[g];
    } else {
      *ws = load_plain(s.scales, q.scale_type, g);
      *wb = load_plain(s.biases, q.scale_type, g);
    }
  }
}

template <I8Kind KIND>
__global__ void i8_gemm_kernel(const int8_t* aq, const float* ad, const float* ads, const int32_t* aqs, int64_t K,
                               const int32_t* starts, int64_t max_rows, const QView* qv, int64_t N, float* y) {
  constexpr bool kTwoPlanes = KIND == I8Kind::kNF4;
  constexpr bool kOffset = KIND == I8Kind::kNF4 || KIND == I8Kind::kAffine8;  // + 128·Σq
  const QView& q = *qv;
  // MLX biases, and the offsets of the ggml types that have one (every such
  // type scales per 32 columns): one more fma per 32 columns.
  const bool bias =
      KIND == I8Kind::kAffine4 || KIND == I8Kind::kAffine8 || (KIND == I8Kind::kGgml && q.ggml_offset != 0);
  // Columns per weight scale: NVFP4's 16, the ggml type's 16 or 32, else 32.
  const int sub = KIND == I8Kind::kNVFP4 ? 16 : KIND == I8Kind::kGgml ? q.ggml_sub : 32;
  const int64_t e = blockIdx.z;
  const int64_t first = (starts ? int64_t(starts[e]) : 0) + int64_t(blockIdx.y) * kRows;
  const int64_t end = starts ? int64_t(starts[e + 1]) : max_rows;
  if (first >= end) return;  // the whole block: before any barrier
  const int64_t n0 = int64_t(blockIdx.x) * kCols, nb = K / kI8Block;
  const int64_t rows = end - first < kRows ? end - first : kRows, cols = N - n0 < kCols ? N - n0 : kCols;
  const int tid = int(threadIdx.x), warp = tid / 32;

  alignas(32) __shared__ int8_t as[2][kRows][16];
  alignas(32) __shared__ int8_t wlo[2][kCols][16];
  alignas(32) __shared__ int8_t whi[2][kCols][16];
  alignas(32) __shared__ int32_t cs[2][kRows][kCols + 4];
  __shared__ float sd[kRows], sds[kRows];
  __shared__ int32_t sqs[kRows];
  __shared__ int16_t levels[16];
  if (tid < 16) levels[tid] = q.i8_levels[tid];
  __syncthreads();

  // Decode role: half-row (wrow, whalf) of the W tile; epilogue role: weight
  // row ec of the tile.
  const int wrow = tid / 2, whalf = tid % 2, ec = tid % kCols;
  const bool wvalid = wrow < cols, evalid = ec < cols;
  const int64_t wr = e * N + n0 + wrow, er = e * N + n0 + ec;
  const RowRef wref = wvalid && !kTwoPlanes ? row_ref(q, wr) : RowRef{};
  const RowRef eref = evalid && !kTwoPlanes ? row_ref(q, er) : RowRef{};
  // Activation role: 8 bytes of row ar, at column 8·ap of the block.
  const int ar = tid / 4, ap = tid % 4;
  const bool avalid = ar < rows;

  int8_t vlo[16], vhi[16];
  uint2 areg = make_uint2(0u, 0u);
  auto fetch = [&](int64_t k0) {
    if (wvalid) {
      decode16<KIND>(q, levels, wr, wref, K, k0 + 16 * whalf, vlo, vhi);
    } else {
      for (int i = 0; i < 16; ++i) vlo[i] = kTwoPlanes ? int8_t(-128) : int8_t(0), vhi[i] = 0;  // V = 0
    }
    areg = avalid ? *reinterpret_cast<const uint2*>(aq + (first + ar) * K + k0 + 8 * ap) : make_uint2(0u, 0u);
  };

  float acc[kOwned];
  for (int i = 0; i < kOwned; ++i) acc[i] = 0.0f;
  fetch(0);
  for (int64_t k0 = 0; k0 < K; k0 += kI8Block) {
    const int64_t b = k0 / kI8Block;
    *reinterpret_cast<uint2*>(&as[ap / 2][ar][8 * (ap % 2)]) = areg;
    for (int i = 0; i < 16; ++i) {
      wlo[whalf][wrow][i] = vlo[i];
      if (kTwoPlanes) whi[whalf][wrow][i] = vhi[i];
    }
    if (tid < kRows) {
      const bool ok = tid < rows;
      sd[tid] = ok ? ad[(first + tid) * nb + b] : 0.0f;
      sds[tid] = ok ? ads[(first + tid) * nb + b] : 0.0f;
      sqs[tid] = ok ? aqs[(first + tid) * nb + b] : 0;
    }
    __syncthreads();
    if (k0 + kI8Block < K) fetch(k0 + kI8Block);  // in flight during the products below
    for (int s = 0; s < kI8Block / sub; ++s) {
      for (int i = 0; i < kRows / 16; ++i) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, int> clo, chi;
        wmma::fill_fragment(clo, 0);
        if (kTwoPlanes) wmma::fill_fragment(chi, 0);
        for (int h = s * sub / 16; h < (s + 1) * sub / 16; ++h) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> af;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> bf;
          wmma::load_matrix_sync(af, &as[h][i * 16][0], 16);
          wmma::load_matrix_sync(bf, &wlo[h][warp * 16][0], 16);
          wmma::mma_sync(clo, af, bf, clo);
          if (kTwoPlanes) {
            wmma::load_matrix_sync(bf, &whi[h][warp * 16][0], 16);
            wmma::mma_sync(chi, af, bf, chi);
          }
        }
        wmma::store_matrix_sync(&cs[0][i * 16][warp * 16], clo, kCols + 4, wmma::mem_row_major);
        if (kTwoPlanes) wmma::store_matrix_sync(&cs[1][i * 16][warp * 16], chi, kCols + 4, wmma::mem_row_major);
      }
      __syncthreads();
      float ws = 0.0f, wb = 0.0f;
      if (evalid) scales_at<KIND>(q, er, eref, K, k0 + s * sub, &ws, &wb);
      for (int i = 0; i < kOwned; ++i) {
        const int r = tid / kCols + 2 * i;
        int32_t isum = cs[0][r][ec];
        if (kTwoPlanes) isum += cs[1][r][ec] * 256;
        if (kOffset) isum += 128 * sqs[r];
        acc[i] = fmaf(float(isum), ws * sd[r], acc[i]);
        if (bias) acc[i] = fmaf(wb, sds[r], acc[i]);  // every MLX group and ggml offset ends on a block boundary
      }
      __syncthreads();  // cs, and the operands of the next step
    }
  }
  if (evalid)
    for (int i = 0; i < kOwned; ++i) {
      const int r = tid / kCols + 2 * i;
      if (r < rows) y[(first + r) * N + n0 + ec] = acc[i];
    }
}

template <I8Kind KIND>
void launch_gemm(cudaStream_t stream, dim3 grid, const int8_t* q, const float* d, const float* ds, const int32_t* qs,
                 int64_t K, const int32_t* starts, int64_t max_rows, const QView* w, int64_t N, float* y) {
  DGEMMA_LAUNCH(i8_gemm_kernel<KIND>, grid, kThreads, stream)(q, d, ds, qs, K, starts, max_rows, w, N, y);
}

}  // namespace

LaunchShape launch_i8_quantize(cudaStream_t stream, const float* x, int64_t M, int64_t K, int8_t* q, float* d,
                               float* ds, int32_t* qsum) {
  LaunchShape s;
  const int64_t warps = M * (K / kI8Block);
  if (plan(s, std::min<int64_t>((warps + kWarps - 1) / kWarps, kMaxStrideBlocks)))
    DGEMMA_LAUNCH(i8_quantize_kernel, s.grid[0], kBlock, stream)(x, M, K, q, d, ds, qsum);
  return s;
}

LaunchShape launch_i8_grouped_gemm(cudaStream_t stream, const int8_t* q, const float* d, const float* ds,
                                   const int32_t* qsum, int64_t K, const int32_t* starts, int64_t E, int64_t max_rows,
                                   const QView* w, QScheme scheme, int bits, int64_t N, float* y) {
  LaunchShape s;
  const int64_t gx = (N + kCols - 1) / kCols, gy = (max_rows + kRows - 1) / kRows;
  if (!plan_grouped(s, gx, gy, E, kThreads)) return s;
  const dim3 grid{static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(E)};
  switch (scheme) {
    case QScheme::kNF4: launch_gemm<I8Kind::kNF4>(stream, grid, q, d, ds, qsum, K, starts, max_rows, w, N, y); break;
    case QScheme::kNVFP4:
      launch_gemm<I8Kind::kNVFP4>(stream, grid, q, d, ds, qsum, K, starts, max_rows, w, N, y);
      break;
    case QScheme::kAffine:
      if (bits == 8)
        launch_gemm<I8Kind::kAffine8>(stream, grid, q, d, ds, qsum, K, starts, max_rows, w, N, y);
      else
        launch_gemm<I8Kind::kAffine4>(stream, grid, q, d, ds, qsum, K, starts, max_rows, w, N, y);
      break;
    case QScheme::kInt8: launch_gemm<I8Kind::kInt8>(stream, grid, q, d, ds, qsum, K, starts, max_rows, w, N, y); break;
    case QScheme::kGgml: launch_gemm<I8Kind::kGgml>(stream, grid, q, d, ds, qsum, K, starts, max_rows, w, N, y); break;
    case QScheme::kFP8: s.launched = false; break;  // never: the host checks QView::i8_supported first
  }
  return s;
}

}  // namespace dgemma::cuda
