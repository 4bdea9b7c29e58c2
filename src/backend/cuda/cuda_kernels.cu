// Kernels of the CUDA backend: the device counterpart of the scalar reference
// in ops/cpu (read those first; comments here only explain what differs).
// Compiled with --fmad=false (CMakeLists.txt) so that a*b + c rounds twice as
// it does in the reference (which is built without FP contraction), and with
// IEEE division and square root (nvcc's defaults). Remaining differences to the
// reference: reductions are tree-shaped (warp shuffles) instead of the
// reference's 4-accumulator or sequential sums, and expf/tanhf/cosf/sinf may
// differ from glibc by an ulp or two.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_math.cuh"

namespace dgemma::cuda {
namespace {

// ---- kernels ---------------------------------------------------------------

__global__ void embedding_kernel(const int32_t* ids, const void* table, WType wt, WType rt, int64_t V, int64_t H,
                                 float scale, float* out) {
  const int64_t m = blockIdx.x;
  const int32_t id = ids[m];
  const bool ok = id >= 0 && id < V;
  float* o = out + m * H;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
    o[h] = ok ? round_to(load_w(table, wt, int64_t(id) * H + h), rt) * scale : nan_f32();
}

// One block per row; each thread revisits only its own elements between the
// passes, so the reductions are the only synchronization needed.
__global__ void soft_probs_kernel(const float* logits, int64_t V, bool rb, float* probs) {
  const float* z = logits + int64_t(blockIdx.x) * V;
  float* p = probs + int64_t(blockIdx.x) * V;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float t = rb ? round_bf16(z[v]) : z[v];
    p[v] = t;
    mx = fmaxf(mx, t);
  }
  mx = block_max(mx);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float e = expf(p[v] - mx);
    p[v] = e;
    sum += e;
  }
  sum = block_sum(sum);
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float q = p[v] / sum;
    p[v] = rb ? round_bf16(q) : q;
  }
}

__global__ void widen_kernel(const void* src, WType wt, WType rt, int64_t offset, int64_t n, float* dst) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x)
    dst[t] = round_to(load_w(src, wt, offset + t), rt);
}

__global__ void rms_norm_kernel(const float* x, int64_t D, const void* w, WType wt, float eps, float* out) {
  const float* xr = x + int64_t(blockIdx.x) * D;
  float* o = out + int64_t(blockIdx.x) * D;
  float ss = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) ss += xr[d] * xr[d];
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss / float(D) + eps);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) o[d] = w ? xr[d] * inv * load_w(w, wt, d) : xr[d] * inv;
}

// Each head's channels in `parts` runs of `width` (1, width d; or 2 of d / 2
// for 2-D positions, run p rotating with pos[m·parts + p]), each run a
// split-half RoPE: pair (i, i + width/2) for i < pairs, the rest copied.
__global__ void rope_kernel(const float* x, const int32_t* pos, const float* inv_freq, int64_t heads, int64_t d,
                            int pairs, int parts, float* out) {
  const int64_t m = blockIdx.x, width = d / parts, half = width / 2;
  for (int64_t t = threadIdx.x; t < heads * d; t += blockDim.x) {
    const int64_t c = t % d, part = c / width < parts ? c / width : parts - 1, j = c - part * width;
    const float p = float(pos[m * parts + part]);
    const float* xi = x + m * heads * d + (t - j);  // this run of this head's row
    float* o = out + m * heads * d + (t - j);
    if (j < pairs) {
      const float ang = p * inv_freq[j];
      const float cs = cosf(ang), sn = sinf(ang);
      const float a = xi[j], b = xi[j + half];
      o[j] = a * cs - b * sn;
    } else if (j >= half && j - half < pairs && j < 2 * half) {
      const int64_t i = j - half;
      const float ang = p * inv_freq[i];
      const float cs = cosf(ang), sn = sinf(ang);
      const float a = xi[i], b = xi[j];
      o[j] = b * cs + a * sn;
    } else {
      o[j] = xi[j];
    }
  }
}

// The vision ops (ops/op.h affine, pool_cells, scatter_rows).
__global__ void affine_kernel(const float* x, int64_t n, int64_t H, const void* shift, WType st, const void* scale,
                              WType sct, float* out) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = t % H;
    const float centred = x[t] - load_w(shift, st, h);
    out[t] = centred * load_w(scale, sct, h);
  }
}

// Block (c, column tile): each thread one column h, the rows of cell c added
// in row order (the cell ids are read by every thread of the block alike).
__global__ void pool_cells_kernel(const float* x, const int32_t* cells, int64_t N, int64_t H, float scale, float* out) {
  const int64_t c = blockIdx.x, h = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (h >= H) return;
  float acc = 0.0f;
  for (int64_t n = 0; n < N; ++n)
    if (cells[n] == c) {
      const float v = x[n * H + h] * scale;
      acc += v;
    }
  out[c * H + h] = acc;
}

// One block per source row i.
__global__ void scatter_rows_kernel(const float* src, const int32_t* rows, int64_t T, int64_t H, float* out) {
  const int64_t i = blockIdx.x, r = rows[i];
  if (r < 0 || r >= T) return;  // checked on the host where it holds the rows
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) out[r * H + h] = src[i * H + h];
}

// One block per (head, query row) of scores [Hq, rows, S], which the first
// product (cuBLAS) filled with q·k: masked keys get -inf, then the softmax in
// place, p = e · (1 / sum) as the reference computes it. A row without a
// visible key becomes zeros (a zero output), never NaN.
__global__ void attention_softmax_kernel(float* scores, const int32_t* qpos, const int32_t* kpos, int64_t m0,
                                         int64_t rows, int64_t S, int mask, int64_t window, int64_t first_canvas_pos,
                                         const int32_t* blocks, int64_t cached) {
  const int64_t r = blockIdx.x % rows;
  float* sc = scores + int64_t(blockIdx.x) * S;
  const int32_t qp = qpos[m0 + r], qb = blocks ? blocks[m0 + r] : -1;
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
    const bool seen = visible(mask, window, first_canvas_pos, qp, kpos[s], qb, key_block(blocks, cached, s));
    const float v = seen ? sc[s] : -INFINITY;
    sc[s] = v;
    mx = fmaxf(mx, v);
  }
  mx = block_max(mx);
  if (mx == -INFINITY) {  // uniform across the block
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) sc[s] = 0.0f;
    return;
  }
  float sum = 0.0f;
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
    const float e = expf(sc[s] - mx);
    sc[s] = e;
    sum += e;
  }
  sum = block_sum(sum);
  const float inv = 1.0f / sum;
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) sc[s] = sc[s] * inv;
}

__global__ void router_inv_rms_kernel(const float* x, int64_t H, float eps, float* inv_rms) {
  const float* xr = x + int64_t(blockIdx.x) * H;
  float ss = 0.0f;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) ss += xr[h] * xr[h];
  ss = block_sum(ss);
  if (threadIdx.x == 0) inv_rms[blockIdx.x] = 1.0f / sqrtf(ss / float(H) + eps);
}

// grid (M, ceil(E / warps)); one warp per expert.
__global__ void router_logits_kernel(const float* x, const float* inv_rms, const void* scale, WType scale_t,
                                     const void* proj, WType proj_t, int64_t H, int64_t E, float root, float* logits) {
  const int64_t m = blockIdx.x, e = int64_t(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const unsigned lane = threadIdx.x & 31;
  if (e >= E) return;  // whole warps only; no block barrier in this kernel
  const float* xr = x + m * H;
  const float inv = inv_rms[m];
  float acc = 0.0f;
  for (int64_t h = lane; h < H; h += 32) {
    const float r = xr[h] * inv * load_w(scale, scale_t, h) * root;  // reference order
    acc += r * load_w(proj, proj_t, e * H + h);
  }
  acc = warp_sum(acc);
  if (lane == 0) logits[m * E + e] = acc;
}

// One thread per row: E is small (128 in the released model), so the
// reference's sequential softmax and a selection top-k are simplest.
__global__ void router_select_kernel(float* logits, const void* pes, WType pes_t, int64_t M, int64_t E, int K,
                                     int32_t* idx, float* weights) {
  const int64_t m = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (m >= M) return;
  float* p = logits + m * E;
  float mx = -INFINITY;
  for (int64_t e = 0; e < E; ++e) mx = fmaxf(mx, p[e]);
  float sum = 0.0f;
  for (int64_t e = 0; e < E; ++e) sum += (p[e] = expf(p[e] - mx));
  for (int64_t e = 0; e < E; ++e) p[e] /= sum;
  // k-th pick = the best element strictly after the previous pick in the
  // order (p descending, index ascending): torch.topk's order, no flags needed.
  int32_t* ix = idx + m * K;
  float* w = weights + m * K;
  int64_t prev = -1;
  float prev_p = 0.0f, top = 0.0f;
  for (int k = 0; k < K; ++k) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      const float pe = p[e];
      if (prev >= 0 && !(pe < prev_p || (pe == prev_p && e > prev))) continue;
      if (best < 0 || pe > p[best]) best = e;
    }
    ix[k] = int32_t(best);
    if (best >= 0) {
      prev = best;
      prev_p = p[best];
      top += p[best];
    }
  }
  for (int k = 0; k < K; ++k) {
    const int32_t e = ix[k];
    w[k] = e >= 0 ? p[e] / top * load_w(pes, pes_t, e) : nan_f32();
  }
}

// Routed experts, grouped by expert on the device: moe_route orders the
// (token, k) pairs by expert, gather_rows stacks the routed rows, two grouped
// products (grouped_gemm here, or the tensor-core one of
// tc_gemm_kernels.cu) run every expert in one launch each with the gated
// activation in between, and moe_combine sums each token's expert outputs in
// ascending expert order.

// The routing permutation, on the device (docs/cuda.md §3.2). One block:
// counts per expert, their exclusive prefix sum, and for each expert its
// (token, k) pairs in token order (tokens[], weights[] in expert order), as
// the CPU groups them. status[0..E) = counts, status[E] = 0 when every index
// is valid, 1 with status[E+1] = the entry of an index outside [0, E), 2 with
// status[E+1], status[E+2] = the two entries of a token that names one expert
// twice; status[E+3] = the index. Invalid entries are left out, so nothing is
// written out of bounds.
__global__ void moe_route_kernel(const int32_t* idx, const float* w, int64_t M, int K, int64_t E, int32_t* status,
                                 int32_t* starts, int32_t* tokens, float* weights, int32_t* row_of, int32_t* sticky,
                                 int32_t site) {
  const int64_t n = M * K;
  // Each thread checks its own entries and keeps the first bad one; thread 0
  // takes the smallest (the entry a sequential scan would stop at).
  __shared__ int64_t first_bad[kBlock];
  int64_t bad = n;
  for (int64_t t = threadIdx.x; t < n; t += blockDim.x) {
    row_of[t] = -1;
    bool ok = idx[t] >= 0 && idx[t] < E;
    for (int64_t b = t + 1; ok && b < (t / K + 1) * K; ++b) ok = idx[b] != idx[t];
    if (!ok && t < bad) bad = t;
  }
  first_bad[threadIdx.x] = bad;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned q = 1; q < blockDim.x; ++q) bad = first_bad[q] < bad ? first_bad[q] : bad;
    status[E] = 0;
    status[E + 1] = status[E + 2] = status[E + 3] = -1;
    if (bad < n) {
      const int64_t t = bad;
      status[E + 1] = int32_t(t);
      status[E + 3] = idx[t];
      if (idx[t] < 0 || idx[t] >= E) {
        status[E] = 1;
      } else {
        status[E] = 2;
        for (int64_t b = t + 1; b < (t / K + 1) * K; ++b)
          if (idx[b] == idx[t]) {
            status[E + 2] = int32_t(b);
            break;
          }
      }
    }
  }
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t c = 0;
    for (int64_t t = 0; t < n; ++t) c += idx[t] == e ? 1 : 0;
    status[e] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    starts[0] = 0;
    for (int64_t e = 0; e < E; ++e) starts[e + 1] = starts[e] + status[e];
    // The first invalid routing since the host last looked, for a backend
    // that does not wait for this op (CudaArena::sticky).
    if (sticky && status[E] != 0 && sticky[0] == 0) {
      for (int q = 0; q < 4; ++q) sticky[q] = status[E + q];
      sticky[4] = site;
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t at = starts[e];
    for (int64_t t = 0; t < n; ++t)
      if (idx[t] == e) {
        tokens[at] = int32_t(t / K);
        row_of[t] = at;
        weights[at++] = w[t];
      }
  }
}

// Grouped expert product, all experts in one launch (docs/cuda.md §3.2):
// y[j, n] = sum_k a[j, k] · W[e, n, k] for the rows j = starts[e] ..
// starts[e+1] of expert e (rows in expert order, moe_route_kernel). Grid
// (N/16, rows/16, E) with 16x16 tiles staged in shared memory; tiles past an
// expert's rows exit at once (the host does not know the counts). Each output
// is one fp32 chain over k in order, like the CPU reference.
constexpr int kTile = 16;
__global__ void grouped_gemm_kernel(const float* a, int64_t K, const int32_t* starts, const void* w, WType wt,
                                    int64_t N, float* y) {
  const int64_t e = blockIdx.z;
  const int64_t first = int64_t(starts[e]) + int64_t(blockIdx.y) * kTile, end = starts[e + 1];
  if (first >= end) return;  // the whole block: before any barrier
  const int tx = int(threadIdx.x % kTile), ty = int(threadIdx.x / kTile);
  const int64_t row = first + ty, n0 = int64_t(blockIdx.x) * kTile;
  __shared__ float as[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    as[ty][tx] = row < end && k0 + tx < K ? a[row * K + k0 + tx] : 0.0f;
    ws[ty][tx] = n0 + ty < N && k0 + tx < K ? load_w(w, wt, (e * N + n0 + ty) * K + k0 + tx) : 0.0f;
    __syncthreads();
    const int64_t kn = K - k0 < kTile ? K - k0 : kTile;
    for (int64_t kk = 0; kk < kn; ++kk) acc += as[ty][kk] * ws[tx][kk];
    __syncthreads();
  }
  if (row < end && n0 + tx < N) y[row * N + n0 + tx] = acc;
}

// out[m, :] = sum of w · y[row, :] over token m's experts in ascending expert
// order, from zero: the reference's order (and the per-expert scatter-add's).
// Entries the routing left out (row_of -1) and repeated experts are skipped.
__global__ void moe_combine_kernel(const float* y, const int32_t* idx, const float* w, const int32_t* row_of, int K,
                                   int64_t H, float* out) {
  const int64_t m = blockIdx.x;
  const int32_t* ix = idx + m * K;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.0f;
    int32_t last = -1;
    for (int r = 0; r < K; ++r) {
      int best = -1;
      for (int q = 0; q < K; ++q)
        if (ix[q] > last && (best < 0 || ix[q] < ix[best])) best = q;
      if (best < 0) break;
      last = ix[best];
      const int32_t j = row_of[m * K + best];
      if (j >= 0) acc += w[m * K + best] * y[int64_t(j) * H + h];
    }
    out[m * H + h] = acc;
  }
}

// out[t, :] = x[rows[t], :]; one block per t.
__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t H, float* out) {
  const int64_t t = blockIdx.x;
  const float* src = x + int64_t(rows[t]) * H;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) out[t * H + h] = src[h];
}

// out[s, :] = act[row_of[s], :]: the routed rows back in slot order (the
// second output of moe_experts); NaN for a slot the routing left out
// (row_of -1: an invalid index, reported by moe_route). One block per s.
__global__ void gather_slots_kernel(const float* act, const int32_t* row_of, int64_t I, float* out) {
  const int64_t s = blockIdx.x;
  const int32_t r = row_of[s];
  for (int64_t i = threadIdx.x; i < I; i += blockDim.x) out[s * I + i] = r >= 0 ? act[int64_t(r) * I + i] : nan_f32();
}

// act[t, i] = gelu_tanh(g[t, i]) · g[t, I + i] for the [n, 2I] gate/up rows.
__global__ void glu_split_kernel(const float* g, int64_t n, int64_t I, float* act) {
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < n * I; q += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = q / I, i = q % I;
    act[q] = gelu_tanh(g[t * 2 * I + i]) * g[t * 2 * I + I + i];
  }
}

__global__ void gelu_glu_kernel(const float* g, const float* u, int64_t n, float* out) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x)
    out[t] = gelu_tanh(g[t]) * u[t];
}

__global__ void add_kernel(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x)
    out[t] = a[t] + b[t];
}

__global__ void scale_kernel(const float* x, float s, int64_t n, float* out) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x)
    out[t] = x[t] * s;
}

__global__ void softcap_kernel(const float* x, float cap, int64_t n, float* out) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x)
    out[t] = cap * tanhf(x[t] / cap);
}

// The sample op (ops/op.h kSample; ops/row_sampling.h process_row), one block
// per row. Pass 1 (strided) writes z = x / T and finds the first maximum and
// the first NaN / +inf; pass 2 gives each thread a contiguous chunk of the row
// and sums p = expf(z - max) and p·(z - max) in double; thread 0 adds the
// chunk sums in chunk order, so S, the entropy log(S) - Σp·d / S (docs/model.md §3.2)
// and the draw are deterministic (they differ from the CPU's sequential sums
// only by rounding). Pass 3 (draw B) starts each chunk's running sum at the
// sum of the chunks before it; the sample is the first index, in the first
// chunk that has one, where the running sum exceeds u·S (never a zero-weight
// index), else the last positive index (rounding slack), as inverse_cdf.
// z is recomputed from x in passes 2 and 3 (the same division), so no pass
// reads what another thread wrote. Block-level results go through shared
// arrays reduced by thread 0 in thread order: simple and deterministic.
__global__ void sample_kernel(const float* logits, int64_t V, float T, const int32_t* uniforms, float* z_out,
                              int32_t* argmax, float* entropy, int32_t* sample) {
  __shared__ float s_max[kBlock];
  __shared__ int64_t s_idx[kBlock];
  __shared__ int64_t s_aux[kBlock];
  __shared__ double s_sum[kBlock];
  __shared__ double s_sed[kBlock];
  __shared__ float s_row_max;
  __shared__ int s_bad;  // 1: the row is marked (no sums, no draw)
  __shared__ double s_target;
  const int64_t r = blockIdx.x;
  const unsigned t = threadIdx.x, nt = blockDim.x;
  const float* x = logits + r * V;
  float* z = z_out + r * V;

  float mx = -INFINITY;
  int64_t mi = -1, bad = -1;
  for (int64_t v = t; v < V; v += nt) {  // ascending within the thread: its first max and first bad value
    const float zv = x[v] / T;
    z[v] = zv;
    if (zv != zv || zv == INFINITY) {
      if (bad < 0) bad = v;
    } else if (zv > mx) {
      mx = zv;
      mi = v;
    }
  }
  s_max[t] = mx;
  s_idx[t] = mi;
  s_aux[t] = bad;
  __syncthreads();
  if (t == 0) {
    float best = -INFINITY;
    int64_t best_i = -1, first_bad = -1;
    for (unsigned k = 0; k < nt; ++k) {
      if (s_aux[k] >= 0 && (first_bad < 0 || s_aux[k] < first_bad)) first_bad = s_aux[k];
      if (s_idx[k] >= 0 && (s_max[k] > best || (s_max[k] == best && s_idx[k] < best_i))) {
        best = s_max[k];
        best_i = s_idx[k];
      }
    }
    s_row_max = best;
    s_bad = first_bad >= 0 || best_i < 0;
    if (s_bad) {  // ops/row_sampling.h bad_row_mark
      argmax[r] = first_bad >= 0 ? int32_t(-2 - first_bad) : -1;
      entropy[r] = nan_f32();
      sample[r] = -1;
    } else {
      argmax[r] = int32_t(best_i);
    }
  }
  __syncthreads();
  if (s_bad) return;  // uniform across the block
  const float row_max = s_row_max;

  const int64_t chunk = (V + nt - 1) / nt, lo = int64_t(t) * chunk, hi = lo + chunk < V ? lo + chunk : V;
  double sum_e = 0.0, sum_ed = 0.0;
  for (int64_t v = lo; v < hi; ++v) {
    const float d = x[v] / T - row_max;  // <= 0; -inf for masked tokens
    const float e = expf(d);
    if (e > 0.0f) {  // skip 0 * -inf
      sum_e += double(e);
      sum_ed += double(e) * double(d);
    }
  }
  s_sum[t] = sum_e;
  s_sed[t] = sum_ed;
  __syncthreads();
  if (t == 0) {
    double S = 0.0, SED = 0.0;
    for (unsigned k = 0; k < nt; ++k) {
      const double c = s_sum[k];
      s_sum[k] = S;  // exclusive prefix: the running sum where chunk k starts
      S += c;
      SED += s_sed[k];
    }
    entropy[r] = float(log(S) - SED / S);
    if (uniforms == nullptr) {
      sample[r] = -1;
    } else {
      const uint64_t bits = uint64_t(uint32_t(uniforms[2 * r])) | (uint64_t(uint32_t(uniforms[2 * r + 1])) << 32);
      s_target = __longlong_as_double((long long)bits) * S;
    }
  }
  __syncthreads();
  if (uniforms == nullptr) return;  // uniform across the block

  const double target = s_target;
  double cdf = s_sum[t];
  int64_t pick = -1, last = -1;
  for (int64_t v = lo; v < hi; ++v) {
    const float e = expf(x[v] / T - row_max);
    if (e <= 0.0f) continue;
    cdf += double(e);
    last = v;
    if (cdf > target) {
      pick = v;
      break;
    }
  }
  s_idx[t] = pick;
  s_aux[t] = last;
  __syncthreads();
  if (t == 0) {
    int64_t out = -1, last_positive = -1;
    for (unsigned k = 0; k < nt && out < 0; ++k) out = s_idx[k];
    for (unsigned k = 0; k < nt; ++k)
      if (s_aux[k] >= 0) last_positive = s_aux[k];
    sample[r] = int32_t(out >= 0 ? out : last_positive);
  }
}

__global__ void write_at_kernel(float* p, int64_t index, float value) { p[index] = value; }

}  // namespace

// The launch wrappers below are laid out by hand: clang-format 14 cannot lay
// out DGEMMA_LAUNCH(kernel, grid, block, stream)(args) (device_math.cuh).
// clang-format off
LaunchShape launch_embedding(cudaStream_t stream, const int32_t* ids, int64_t M, const void* table, WType wt,
                             WType round_to, int64_t V, int64_t H, float scale, float* out) {
  LaunchShape s;
  if (plan(s, M))
    DGEMMA_LAUNCH(embedding_kernel, s.grid[0], kBlock, stream)(ids, table, wt, round_to, V, H, scale, out);
  return s;
}

LaunchShape launch_soft_probs(cudaStream_t stream, const float* logits, int64_t rows, int64_t V, bool round_bf16,
                              float* probs) {
  LaunchShape s;
  if (plan(s, rows)) DGEMMA_LAUNCH(soft_probs_kernel, s.grid[0], kBlock, stream)(logits, V, round_bf16, probs);
  return s;
}

LaunchShape launch_widen(cudaStream_t stream, const void* src, WType wt, WType round_to, int64_t offset, int64_t n,
                         float* dst) {
  LaunchShape s;
  if (plan(s, stride_blocks(n)))
    DGEMMA_LAUNCH(widen_kernel, s.grid[0], kBlock, stream)(src, wt, round_to, offset, n, dst);
  return s;
}

LaunchShape launch_rms_norm(cudaStream_t stream, const float* x, int64_t rows, int64_t D, const void* w, WType wt,
                            float eps, float* out) {
  LaunchShape s;
  if (plan(s, rows)) DGEMMA_LAUNCH(rms_norm_kernel, s.grid[0], kBlock, stream)(x, D, w, wt, eps, out);
  return s;
}

LaunchShape launch_rope(cudaStream_t stream, const float* x, const int32_t* pos, const float* inv_freq, int64_t M,
                        int64_t heads, int64_t d, int pairs, bool two_d, float* out) {
  LaunchShape s;
  const int parts = two_d ? 2 : 1;
  if (plan(s, M))
    DGEMMA_LAUNCH(rope_kernel, s.grid[0], kBlock, stream)(x, pos, inv_freq, heads, d, pairs, parts, out);
  return s;
}

LaunchShape launch_affine(cudaStream_t stream, const float* x, int64_t M, int64_t H, const void* shift, WType shift_t,
                          const void* scale, WType scale_t, float* out) {
  LaunchShape s;
  if (H > 0 && plan(s, stride_blocks(M * H)))
    DGEMMA_LAUNCH(affine_kernel, s.grid[0], kBlock, stream)(x, M * H, H, shift, shift_t, scale, scale_t, out);
  return s;
}

LaunchShape launch_pool_cells(cudaStream_t stream, const float* x, const int32_t* cells, int64_t N, int64_t H,
                              int64_t C, float scale, float* out) {
  LaunchShape s;
  if (plan(s, C, (H + kBlock - 1) / kBlock))
    DGEMMA_LAUNCH(pool_cells_kernel, dim3(s.grid[0], s.grid[1]), kBlock, stream)(x, cells, N, H, scale, out);
  return s;
}

LaunchShape launch_scatter_rows(cudaStream_t stream, const float* src, const int32_t* rows, int64_t n, int64_t T,
                                int64_t H, float* out) {
  LaunchShape s;
  if (H > 0 && plan(s, n)) DGEMMA_LAUNCH(scatter_rows_kernel, s.grid[0], kBlock, stream)(src, rows, T, H, out);
  return s;
}

LaunchShape launch_attention_softmax(cudaStream_t stream, float* scores, const int32_t* qpos, const int32_t* kpos,
                                     int64_t m0, int64_t rows, int64_t Hq, int64_t S, int mask, int64_t window,
                                     int64_t first_canvas_pos, const int32_t* blocks, int64_t cached) {
  LaunchShape s;
  if (S > 0 && plan(s, rows * Hq))
    DGEMMA_LAUNCH(attention_softmax_kernel, s.grid[0], kBlock, stream)(scores, qpos, kpos, m0, rows, S, mask, window,
                                                                       first_canvas_pos, blocks, cached);
  return s;
}

LaunchShape launch_router_inv_rms(cudaStream_t stream, const float* x, int64_t M, int64_t H, float eps,
                                  float* inv_rms) {
  LaunchShape s;
  if (plan(s, M)) DGEMMA_LAUNCH(router_inv_rms_kernel, s.grid[0], kBlock, stream)(x, H, eps, inv_rms);
  return s;
}

LaunchShape launch_router_logits(cudaStream_t stream, const float* x, const float* inv_rms, const void* scale,
                                 WType scale_t, const void* proj, WType proj_t, int64_t M, int64_t H, int64_t E,
                                 float root, float* logits) {
  LaunchShape s;
  if (plan(s, M, warp_tiles(E)))
    DGEMMA_LAUNCH(router_logits_kernel, dim3(s.grid[0], s.grid[1]), kBlock, stream)(x, inv_rms, scale, scale_t, proj,
                                                                                    proj_t, H, E, root, logits);
  return s;
}

LaunchShape launch_router_select(cudaStream_t stream, float* logits, const void* per_expert_scale, WType pes_t,
                                 int64_t M, int64_t E, int K, int32_t* idx, float* weights) {
  LaunchShape s;
  if (plan(s, (M + kBlock - 1) / kBlock))
    DGEMMA_LAUNCH(router_select_kernel, s.grid[0], kBlock, stream)(logits, per_expert_scale, pes_t, M, E, K, idx,
                                                                   weights);
  return s;
}

LaunchShape launch_moe_route(cudaStream_t stream, const int32_t* idx, const float* w, int64_t M, int K, int64_t E,
                             int32_t* status, int32_t* starts, int32_t* tokens, float* weights, int32_t* row_of,
                             int32_t* sticky, int32_t site) {
  LaunchShape s;
  if (plan(s, 1))
    DGEMMA_LAUNCH(moe_route_kernel, 1, kBlock, stream)(idx, w, M, K, E, status, starts, tokens, weights, row_of,
                                                       sticky, site);
  return s;
}

LaunchShape launch_grouped_gemm(cudaStream_t stream, const float* a, int64_t K, const int32_t* starts, int64_t E,
                                int64_t max_rows, const void* w, WType wt, int64_t N, float* y) {
  LaunchShape s;
  const int64_t gx = (N + kTile - 1) / kTile, gy = (max_rows + kTile - 1) / kTile;
  if (plan_grouped(s, gx, gy, E, kTile * kTile))
    DGEMMA_LAUNCH(grouped_gemm_kernel, dim3(unsigned(gx), unsigned(gy), unsigned(E)), kTile * kTile, stream)(
        a, K, starts, w, wt, N, y);
  return s;
}

LaunchShape launch_moe_combine(cudaStream_t stream, const float* y, const int32_t* idx, const float* w,
                               const int32_t* row_of, int64_t M, int K, int64_t H, float* out) {
  LaunchShape s;
  if (H > 0 && plan(s, M)) DGEMMA_LAUNCH(moe_combine_kernel, s.grid[0], kBlock, stream)(y, idx, w, row_of, K, H, out);
  return s;
}

LaunchShape launch_gather_rows(cudaStream_t stream, const float* x, const int32_t* rows, int64_t n, int64_t H,
                               float* out) {
  LaunchShape s;
  if (H > 0 && plan(s, n)) DGEMMA_LAUNCH(gather_rows_kernel, s.grid[0], kBlock, stream)(x, rows, H, out);
  return s;
}

LaunchShape launch_gather_slots(cudaStream_t stream, const float* act, const int32_t* row_of, int64_t n, int64_t I,
                                float* out) {
  LaunchShape s;
  if (I > 0 && plan(s, n)) DGEMMA_LAUNCH(gather_slots_kernel, s.grid[0], kBlock, stream)(act, row_of, I, out);
  return s;
}

LaunchShape launch_glu_split(cudaStream_t stream, const float* g, int64_t n, int64_t I, float* act) {
  LaunchShape s;
  if (plan(s, stride_blocks(n * I))) DGEMMA_LAUNCH(glu_split_kernel, s.grid[0], kBlock, stream)(g, n, I, act);
  return s;
}

LaunchShape launch_gelu_glu(cudaStream_t stream, const float* gate, const float* up, int64_t n, float* out) {
  LaunchShape s;
  if (plan(s, stride_blocks(n))) DGEMMA_LAUNCH(gelu_glu_kernel, s.grid[0], kBlock, stream)(gate, up, n, out);
  return s;
}

LaunchShape launch_add(cudaStream_t stream, const float* a, const float* b, int64_t n, float* out) {
  LaunchShape s;
  if (plan(s, stride_blocks(n))) DGEMMA_LAUNCH(add_kernel, s.grid[0], kBlock, stream)(a, b, n, out);
  return s;
}

LaunchShape launch_scale(cudaStream_t stream, const float* x, float sc, int64_t n, float* out) {
  LaunchShape s;
  if (plan(s, stride_blocks(n))) DGEMMA_LAUNCH(scale_kernel, s.grid[0], kBlock, stream)(x, sc, n, out);
  return s;
}

LaunchShape launch_softcap(cudaStream_t stream, const float* x, float cap, int64_t n, float* out) {
  LaunchShape s;
  if (plan(s, stride_blocks(n))) DGEMMA_LAUNCH(softcap_kernel, s.grid[0], kBlock, stream)(x, cap, n, out);
  return s;
}

LaunchShape launch_sample(cudaStream_t stream, const float* logits, int64_t M, int64_t V, float temperature,
                          const int32_t* uniforms, float* z, int32_t* argmax, float* entropy, int32_t* sample) {
  LaunchShape s;
  if (V > 0 && plan(s, M))
    DGEMMA_LAUNCH(sample_kernel, s.grid[0], kBlock, stream)(logits, V, temperature, uniforms, z, argmax, entropy,
                                                            sample);
  return s;
}

LaunchShape launch_write_at(cudaStream_t stream, float* p, int64_t index, float value) {
  LaunchShape s;
  s.grid[0] = s.grid[1] = s.grid[2] = 1;
  s.block = 1;
  s.launched = true;
  DGEMMA_LAUNCH(write_at_kernel, 1, 1, stream)(p, index, value);
  return s;
}

// clang-format on

}  // namespace dgemma::cuda
