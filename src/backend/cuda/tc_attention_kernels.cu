// Flash-style attention on the bf16 tensor cores, the dot mode's attention
// (CudaBackendOptions::bf16_dot; head dims that are multiples of 8, up to
// 512). The algorithm of flash_attention_kernels.cu with the CPU dot mode's
// rounding points (backend/cpu/ops-inl.h attention_tile_impl, AttnArgs::round_bf16):
// Q, K and V rounded to bf16, scores and their sums in fp32, the
// probabilities P of each key tile rounded to bf16 for P·V while the row sums
// add the unrounded ones.
//
// A head dim that is not a multiple of 16 (the vision tower's 72) runs as the
// next multiple, dp: the tiles hold zeros in the columns [d, dp) of Q, K and
// V, which add exact zeros to every score and fill output columns that are
// never written, so the result is the unpadded attention's.
//
// Work split: block (x, y) takes kTcRows = 16 rows t of KV head y (row t:
// query m = t / G of query head y·G + t % G, as the fp32 kernel), one wmma
// row tile; per tile of kTcKeys = 32 keys, in dynamic shared memory:
//  1. the block loads the keys' K rows (rounded to bf16);
//  2. warp w multiplies Q by the K rows of key half w % 2 over the 16-column
//     chunks c ≡ w / 2 (mod 2) of the head dim: two partial score tiles;
//  3. eight threads per row add the partials, mask, and run the online
//     softmax (running maximum, rescale factor, row sum), writing P in bf16;
//  4. the block loads the V rows into K's place and rescales the output rows
//     (fp32, in shared memory) by their factor;
//  5. warp w adds P·V into the output column tiles w, w + 4, ... (the tile's
//     accumulators loaded from and stored back to shared memory).
// A tile whose V holds a non-finite value takes P·V on the CUDA cores
// instead, skipping zero probabilities (0·inf is NaN on the tensor cores; the
// reference adds nothing for a masked key). The output is O / Σp; a row
// without a visible key is zeros.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_math.cuh"

namespace dgemma::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTcRows = 16, kTcKeys = 32, kTcThreads = 128;
constexpr int kThreadsPerRow = kTcThreads / kTcRows;  // softmax: 8 threads share a row
constexpr int kKeysPerThread = kTcKeys / kThreadsPerRow;
constexpr int kLdS = kTcKeys + 4, kLdP = kTcKeys + 8;

// The dynamic shared memory of head dim d, in 256-byte aligned sections.
struct TcLayout {
  int64_t dp;       // d padded to a multiple of 16 (the wmma tiles' width)
  int64_t ld, ldo;  // bf16 row stride of Q and K/V; fp32 row stride of O
  int64_t q, kv, o, s, p, state, bytes;
  explicit __host__ __device__ TcLayout(int64_t d) {
    auto align = [](int64_t b) { return (b + 255) / 256 * 256; };
    dp = (d + 15) / 16 * 16;
    ld = dp + 8;
    ldo = dp + 4;
    q = 0;
    kv = q + align(kTcRows * ld * 2);
    o = kv + align(kTcKeys * ld * 2);
    s = o + align(kTcRows * ldo * 4);
    p = s + align(2 * kTcRows * kLdS * 4);
    state = p + align(kTcRows * kLdP * 2);
    bytes = state + align((3 * kTcRows + 2 * kTcKeys + 1) * 4);
  }
};

__device__ __forceinline__ __nv_bfloat16 to_bf16(float f) { return __ushort_as_bfloat16(bf16_bits(f)); }

// Rows [0, n) of the tile from K (values false) or V, rounded to bf16; rows
// past n, and the padding columns [d, dp), are zeros. Returns (block-wide,
// after a barrier) whether a loaded value is not finite.
__device__ bool load_keys(const FlashArgs& a, bool values, int64_t s0, int64_t n, int64_t kh, __nv_bfloat16* kv,
                          int64_t ld, int64_t dp, int* flag) {
  const int64_t d = a.d;
  if (threadIdx.x == 0) *flag = 0;
  __syncthreads();
  bool special = false;
  for (int64_t e = threadIdx.x; e < kTcKeys * dp; e += kTcThreads) {
    const int64_t kc = e / dp, j = e % dp;
    const float v = kc < n && j < d ? key_row(a, values, s0 + kc, kh)[j] : 0.0f;
    special = special || !isfinite(v);
    kv[kc * ld + j] = to_bf16(v);
  }
  if (special) *flag = 1;  // any thread: the same value
  __syncthreads();
  return *flag != 0;
}

__global__ void tc_attention_kernel(FlashArgs a) {
  DGEMMA_DYNAMIC_SHARED(unsigned char, smem);
  const int64_t d = a.d, G = a.Hq / a.Hk, kh = blockIdx.y, rows = a.M * G;
  const int64_t S = a.keys[0].rows + a.keys[1].rows, t0 = int64_t(blockIdx.x) * kTcRows;
  const TcLayout L(d);
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem + L.q);
  auto* kv = reinterpret_cast<__nv_bfloat16*>(smem + L.kv);
  auto* os = reinterpret_cast<float*>(smem + L.o);
  auto* ss = reinterpret_cast<float*>(smem + L.s);
  auto* ps = reinterpret_cast<__nv_bfloat16*>(smem + L.p);
  auto* row_max = reinterpret_cast<float*>(smem + L.state);
  float* row_sum = row_max + kTcRows;
  float* row_scale = row_sum + kTcRows;
  auto* key_pos = reinterpret_cast<int32_t*>(row_scale + kTcRows);
  int32_t* key_blk = key_pos + kTcKeys;  // the keys' blocks (block masks; else -1)
  int* flag = key_blk + kTcKeys;
  const int64_t dp = L.dp;
  const int tid = int(threadIdx.x), warp = tid / 32;

  // The block's query rows (dead rows past the end are zeros, never written).
  for (int64_t e = tid; e < kTcRows * dp; e += kTcThreads) {
    const int64_t r = e / dp, j = e % dp, t = t0 + r;
    float v = 0.0f;
    if (t < rows && j < d) v = a.q[((t / G) * a.Hq + kh * G + t % G) * d + j];
    qs[r * L.ld + j] = to_bf16(v);
  }
  for (int64_t e = tid; e < kTcRows * L.ldo; e += kTcThreads) os[e] = 0.0f;
  if (tid < kTcRows) {
    row_max[tid] = -INFINITY;
    row_sum[tid] = 0.0f;
  }
  // This thread's softmax row and its query position.
  const int my_row = tid / kThreadsPerRow, my_sub = tid % kThreadsPerRow;
  const int64_t my_t = t0 + my_row;
  const bool my_live = my_t < rows;
  const int32_t my_qpos = my_live ? a.qpos[my_t / G] : 0;
  const int32_t my_block = my_live && a.blocks ? a.blocks[my_t / G] : -1;

  for (int64_t s0 = 0; s0 < S; s0 += kTcKeys) {
    const int64_t n = S - s0 < kTcKeys ? S - s0 : kTcKeys;
    if (tid < n) {
      const int64_t s = s0 + tid;
      key_pos[tid] = s < a.keys[0].rows ? a.keys[0].pos[s] : a.keys[1].pos[s - a.keys[0].rows];
      key_blk[tid] = key_block(a.blocks, a.keys[0].rows, s);
    }
    load_keys(a, false, s0, n, kh, kv, L.ld, dp, flag);  // (its barrier also publishes key_pos, qs, os)

    // 2. Partial scores: key half w % 2, head-dim chunks c ≡ w / 2 (mod 2).
    {
      const int half = warp % 2, part = warp / 2;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int64_t c = part * 16; c < dp; c += 32) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> kf;
        wmma::load_matrix_sync(qf, qs + c, unsigned(L.ld));
        wmma::load_matrix_sync(kf, kv + half * 16 * L.ld + c, unsigned(L.ld));
        wmma::mma_sync(acc, qf, kf, acc);
      }
      wmma::store_matrix_sync(ss + part * kTcRows * kLdS + half * 16, acc, kLdS, wmma::mem_row_major);
    }
    __syncthreads();

    // 3. Online softmax, kThreadsPerRow threads per row (one shuffle segment).
    {
      float s[kKeysPerThread];
      float tile_max = -INFINITY;
      DGEMMA_UNROLL for (int i = 0; i < kKeysPerThread; ++i) {
        const int c = my_sub + i * kThreadsPerRow;
        s[i] = -INFINITY;
        if (my_live && c < n &&
            visible(a.mask, a.window, a.first_canvas_pos, my_qpos, key_pos[c], my_block, key_blk[c]))
          s[i] = ss[my_row * kLdS + c] + ss[kTcRows * kLdS + my_row * kLdS + c];
        tile_max = fmaxf(tile_max, s[i]);
      }
      for (int off = kThreadsPerRow / 2; off > 0; off >>= 1)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off, kThreadsPerRow));
      const float old_max = row_max[my_row], new_max = fmaxf(old_max, tile_max);
      const float rescale = online_rescale(old_max, new_max);
      float sum = 0.0f;
      DGEMMA_UNROLL for (int i = 0; i < kKeysPerThread; ++i) {
        const float p = online_prob(s[i], new_max);
        sum += p;
        ps[my_row * kLdP + my_sub + i * kThreadsPerRow] = to_bf16(p);
      }
      for (int off = kThreadsPerRow / 2; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off, kThreadsPerRow);
      __syncthreads();  // every thread of the row read row_max
      if (my_sub == 0) {
        row_max[my_row] = new_max;
        row_sum[my_row] = row_sum[my_row] * rescale + sum;
        row_scale[my_row] = rescale;
      }
    }

    // 4. V in K's place; the output rows rescaled.
    const bool special = load_keys(a, true, s0, n, kh, kv, L.ld, dp, flag);
    for (int64_t e = tid; e < kTcRows * d; e += kTcThreads) {
      const int64_t r = e / d, j = e % d;
      os[r * L.ldo + j] *= row_scale[r];
    }
    __syncthreads();

    // 5. O += P·V.
    if (!special) {
      for (int64_t ct = warp; ct < dp / 16; ct += kTcThreads / 32) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, os + ct * 16, unsigned(L.ldo), wmma::mem_row_major);
        for (int kk = 0; kk < kTcKeys; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> pf;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> vf;
          wmma::load_matrix_sync(pf, ps + kk, unsigned(kLdP));
          wmma::load_matrix_sync(vf, kv + kk * L.ld + ct * 16, unsigned(L.ld));
          wmma::mma_sync(acc, pf, vf, acc);
        }
        wmma::store_matrix_sync(os + ct * 16, acc, unsigned(L.ldo), wmma::mem_row_major);
      }
    } else {
      for (int64_t e = tid; e < kTcRows * d; e += kTcThreads) {
        const int64_t r = e / d, j = e % d;
        float acc = os[r * L.ldo + j];
        for (int64_t kc = 0; kc < n; ++kc) {
          const float p = __bfloat162float(ps[r * kLdP + kc]);
          if (p != 0.0f) acc += p * __bfloat162float(kv[kc * L.ld + j]);
        }
        os[r * L.ldo + j] = acc;
      }
    }
    __syncthreads();  // the next tile overwrites kv, ss, ps and the row state
  }

  for (int64_t e = tid; e < kTcRows * d; e += kTcThreads) {
    const int64_t r = e / d, j = e % d, t = t0 + r;
    if (t >= rows) continue;
    const float sum = row_sum[r];
    // No visible key: zeros (a NaN sum stays NaN).
    a.out[((t / G) * a.Hq + kh * G + t % G) * d + j] = sum == 0.0f ? 0.0f : os[r * L.ldo + j] / sum;
  }
}

}  // namespace

bool tc_attention_supported(int64_t d) { return d > 0 && d % 8 == 0 && d <= kFlashMaxHeadDim; }

LaunchShape launch_tc_attention(cudaStream_t stream, const FlashArgs& a) {
  LaunchShape s;
  if (!tc_attention_supported(a.d)) return s;
  const int64_t rows = a.M * (a.Hq / a.Hk);
  const TcLayout layout(a.d);
  if (!plan(s, (rows + kTcRows - 1) / kTcRows, a.Hk)) return s;
  s.block = kTcThreads;
  // Over 48 KiB of dynamic shared memory needs the kernel's opt-in (not
  // stream work: allowed while a graph captures); at most 90 KB (d = 512).
  // A refusal stays the last error and fails the launch, which the caller
  // checks.
  cudaFuncSetAttribute(reinterpret_cast<const void*>(&tc_attention_kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                       int(layout.bytes));
  DGEMMA_LAUNCH_SMEM(tc_attention_kernel, dim3(s.grid[0], s.grid[1]), kTcThreads, size_t(layout.bytes), stream)(a);
  return s;
}

}  // namespace dgemma::cuda
