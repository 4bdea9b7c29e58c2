// Flash-style attention (docs/model.md §1.3, §2.1-§2.4; the CPU's tile kernel in
// backend/cpu/ops-inl.h is the same algorithm): one pass over the keys in tiles,
// an online softmax per query row (running maximum, rescaled partial sums),
// so that the scores never leave the chip and the keys and values are read
// where they lie: the KV cache's rows and the new rows are two segments
// (ops/op.h attention_keys), nothing is gathered first.
//
// Work split: block (x, y) takes kFlashRows rows t of KV head y, row t being
// query m = t / G of query head y·G + t % G (G = Hq / Hk), so the query heads
// of a group share every key tile they load. Each warp owns kRowsPerWarp
// rows. Per tile of BK keys:
//  1. the block loads the keys' K rows into shared memory (row stride odd,
//     so that lanes reading one column of different keys hit distinct banks);
//  2. each lane computes the scores of its (row, key) pairs, a key per lane,
//     the full dot product over d (no shuffle per key); the tile's row maxima
//     come from a shuffle reduction over the lanes of a row, and each lane
//     keeps its share of the row's sum of e^(s - max), rescaled as the
//     maximum grows;
//  3. the block loads the V rows into the same buffer, and each lane updates
//     its output columns j = lane + 32·u for every row of its warp:
//     o = o·e^(old max - new max) + Σ_keys p·v.
// The output is o / Σp; a row without a visible key is zeros (never NaN), as
// in the reference. Scores are fp32 dot products in d order; the sums run in
// tile order, so results differ from the CPU's by rounding only.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_math.cuh"

namespace dgemma::cuda {
namespace {

constexpr int kRowsPerWarp = 4;
constexpr int kFlashRows = kRowsPerWarp * int(kWarps);  // query rows per block

// DPL: head-dim values per lane (d ≤ 32·DPL). Keys per tile: 32, or 16 for
// head dims over 256, so that a tile (BK × (32·DPL + 1) floats) stays within
// 33 KB of shared memory.
template <int DPL>
struct FlashTile {
  static constexpr int keys = DPL > 8 ? 16 : 32;
  static constexpr int ld = 32 * DPL + 1;
  static constexpr int pairs = kRowsPerWarp * keys / 32;  // (row, key) scores per lane
};

// a[i] for a runtime i, without indexing the array (which would move it from
// registers to local memory).
template <class T, int N>
__device__ __forceinline__ T pick(const T (&a)[N], int i) {
  T v = a[0];
  for (int k = 1; k < N; ++k)
    if (i == k) v = a[k];
  return v;
}

template <int DPL>
__global__ void flash_attention_kernel(FlashArgs a) {
  using Tile = FlashTile<DPL>;
  constexpr int BK = Tile::keys, LD = Tile::ld, R = kRowsPerWarp, P = Tile::pairs;
  __shared__ float tile[BK * LD];  // K rows, then V rows, of the tile's keys
  __shared__ int32_t tile_pos[BK];
  __shared__ int32_t tile_block[BK];  // the keys' blocks (block masks; else -1)
  __shared__ float probs[kWarps][R][BK];
  __shared__ float row_scale[kWarps][R];

  const int64_t d = a.d, G = a.Hq / a.Hk, kh = blockIdx.y, rows = a.M * G;
  const int64_t S = a.keys[0].rows + a.keys[1].rows;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t0 = int64_t(blockIdx.x) * kFlashRows + int64_t(warp) * R;

  // The warp's rows: query row pointers and positions (dead rows past the
  // end compute on row 0 and are never written).
  const float* qrow[R];
  int32_t qp[R], qb[R];
  bool live[R];
  DGEMMA_UNROLL for (int r = 0; r < R; ++r) {
    const int64_t t = t0 + r;
    live[r] = t < rows;
    const int64_t m = live[r] ? t / G : 0, h = kh * G + (live[r] ? t % G : 0);
    qrow[r] = a.q + (m * a.Hq + h) * d;
    qp[r] = a.qpos[m];
    qb[r] = a.blocks ? a.blocks[m] : -1;
  }
  // This lane's score pairs: key c, rows pr[i] (the lanes of a row are one
  // segment of BK lanes, so shuffles of width BK reduce over them).
  const int c = int(lane) % BK;
  int pr[P];
  DGEMMA_UNROLL for (int i = 0; i < P; ++i) pr[i] = int(lane) / BK + i * (32 / BK);
  float row_max[P], part_sum[P];
  DGEMMA_UNROLL for (int i = 0; i < P; ++i) {
    row_max[i] = -INFINITY;
    part_sum[i] = 0.0f;
  }
  float o[R][DPL];
  DGEMMA_UNROLL for (int r = 0; r < R; ++r) { DGEMMA_UNROLL for (int u = 0; u < DPL; ++u) o[r][u] = 0.0f; }

  for (int64_t s0 = 0; s0 < S; s0 += BK) {
    const int64_t n = S - s0 < BK ? S - s0 : BK;
    for (int64_t e = threadIdx.x; e < n * d; e += blockDim.x) {
      const int64_t kc = e / d, j = e % d;
      const float v = key_row(a, false, s0 + kc, kh)[j];
      tile[kc * LD + j] = a.round_bf16 ? round_bf16(v) : v;
    }
    if (threadIdx.x < n) {
      const int64_t s = s0 + threadIdx.x;
      tile_pos[threadIdx.x] = s < a.keys[0].rows ? a.keys[0].pos[s] : a.keys[1].pos[s - a.keys[0].rows];
      tile_block[threadIdx.x] = key_block(a.blocks, a.keys[0].rows, s);
    }
    __syncthreads();
    DGEMMA_UNROLL for (int i = 0; i < P; ++i) {
      const int r = pr[i];
      float s = -INFINITY;
      if (pick(live, r) && c < n &&
          visible(a.mask, a.window, a.first_canvas_pos, pick(qp, r), tile_pos[c], pick(qb, r), tile_block[c])) {
        const float *kr = tile + c * LD, *qr = pick(qrow, r);
        float acc = 0.0f;
        if (a.round_bf16)
          for (int64_t j = 0; j < d; ++j) acc += round_bf16(qr[j]) * kr[j];
        else
          for (int64_t j = 0; j < d; ++j) acc += qr[j] * kr[j];
        s = acc;
      }
      float tile_max = s;
      for (int off = BK / 2; off > 0; off >>= 1)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off, BK));
      const float new_max = fmaxf(row_max[i], tile_max);
      const float rescale = online_rescale(row_max[i], new_max);
      const float p = online_prob(s, new_max);
      row_max[i] = new_max;
      part_sum[i] = part_sum[i] * rescale + p;
      probs[warp][r][c] = p;
      if (c == 0) row_scale[warp][r] = rescale;
    }
    __syncthreads();  // every warp is done with the K rows; probs are written
    for (int64_t e = threadIdx.x; e < n * d; e += blockDim.x) {
      const int64_t kc = e / d, j = e % d;
      const float v = key_row(a, true, s0 + kc, kh)[j];
      tile[kc * LD + j] = a.round_bf16 ? round_bf16(v) : v;
    }
    __syncthreads();
    DGEMMA_UNROLL for (int r = 0; r < R; ++r) {
      const float rescale = row_scale[warp][r];
      DGEMMA_UNROLL for (int u = 0; u < DPL; ++u) {
        const int64_t j = lane + 32 * u;
        if (j < d) {  // (not a break: o stays in registers only if every index is a constant)
          float acc = o[r][u] * rescale;
          // A zero probability adds nothing, not even the NaN of 0·inf (the
          // reference skips such keys).
          for (int64_t kc = 0; kc < n; ++kc) {
            const float p = probs[warp][r][kc];
            if (p != 0.0f) acc += (a.round_bf16 ? round_bf16(p) : p) * tile[kc * LD + j];
          }
          o[r][u] = acc;
        }
      }
    }
    __syncthreads();  // the next tile overwrites tile, probs and row_scale
  }

  // The row sums: each row's BK lanes hold its shares.
  DGEMMA_UNROLL for (int i = 0; i < P; ++i) {
    float sum = part_sum[i];
    for (int off = BK / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off, BK);
    if (c == 0) row_scale[warp][pr[i]] = sum;
  }
  __syncthreads();
  DGEMMA_UNROLL for (int r = 0; r < R; ++r) {
    if (!live[r]) continue;
    const int64_t t = t0 + r, m = t / G, h = kh * G + t % G;
    const float sum = row_scale[warp][r];
    float* out = a.out + (m * a.Hq + h) * d;
    DGEMMA_UNROLL for (int u = 0; u < DPL; ++u) {
      const int64_t j = lane + 32 * u;
      if (j < d) out[j] = sum == 0.0f ? 0.0f : o[r][u] / sum;  // no visible key: zeros (NaN sums stay NaN)
    }
  }
}

template <int DPL>
LaunchShape launch_flash(cudaStream_t stream, const FlashArgs& a) {
  LaunchShape s;
  const int64_t rows = a.M * (a.Hq / a.Hk);
  if (plan(s, (rows + kFlashRows - 1) / kFlashRows, a.Hk))
    DGEMMA_LAUNCH(flash_attention_kernel<DPL>, dim3(s.grid[0], s.grid[1]), kBlock, stream)(a);
  return s;
}

}  // namespace

LaunchShape launch_flash_attention(cudaStream_t stream, const FlashArgs& a) {
  if (a.d <= 32) return launch_flash<1>(stream, a);
  if (a.d <= 64) return launch_flash<2>(stream, a);
  if (a.d <= 128) return launch_flash<4>(stream, a);
  if (a.d <= 256) return launch_flash<8>(stream, a);
  if (a.d <= kFlashMaxHeadDim) return launch_flash<16>(stream, a);
  return LaunchShape{};
}

}  // namespace dgemma::cuda
