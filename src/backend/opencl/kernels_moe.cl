// The routed experts of the OpenCL backend (docs/opencl.md §3, docs/model.md §1.5).
// The routing stays on the device: moe_route groups the n = M·k (token, slot)
// pairs by expert, the two grouped products run every expert's rows in one
// launch each, and moe_combine adds each token's expert outputs back into its
// row in the reference's order (src/backend/cpu/cpu_moe.cc).

float gelu_tanh(float x);  // kernels_rows.cl

// moe_route: one work-group. Counting pass (each work-item counts the slots of
// its experts), exclusive prefix sums by work-item 0 (starts[E+1]: the rows of
// expert e are starts[e] .. starts[e+1]-1 in expert order; tile_first[E+1]: the
// first row tile of each expert, tiles of TILE rows never shared by two
// experts), then each expert's slots in slot order: rows[j] = the slot of row
// j, row_of[s] = the row of slot s, or -1 for a slot whose index is outside
// [0, E) (no row: its token's output becomes NaN, see moe_combine).
__kernel void moe_route(__global const int* idx, int n, int E, __global int* starts, __global int* tile_first,
                        __global int* rows, __global int* row_of) {
  const int t = get_local_id(0), nt = get_local_size(0);
  for (int s = t; s < n; s += nt) row_of[s] = -1;
  for (int e = t; e < E; e += nt) {
    int c = 0;
    for (int s = 0; s < n; ++s) c += idx[s] == e ? 1 : 0;
    starts[e + 1] = c;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (t == 0) {
    starts[0] = 0;
    tile_first[0] = 0;
    for (int e = 0; e < E; ++e) {
      const int c = starts[e + 1];
      starts[e + 1] = starts[e] + c;
      tile_first[e + 1] = tile_first[e] + (c + TILE - 1) / TILE;
    }
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int e = t; e < E; e += nt) {
    int at = starts[e];
    for (int s = 0; s < n; ++s)
      if (idx[s] == e) {
        rows[at] = s;
        row_of[s] = at;
        ++at;
      }
  }
}

// The expert of row tile g (tile_first[e] <= g < tile_first[e+1]); -1 past
// the last tile (the launch covers the most tiles any routing can need).
int moe_tile_expert(__global const int* tile_first, int E, int g) {
  if (g >= tile_first[E]) return -1;
  int lo = 0, hi = E - 1;  // the last e with tile_first[e] <= g
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_first[mid] <= g)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The grouped products accumulate each dot product as the reference's dot_f32
// does (src/backend/cpu/cpu_elementwise.cc): four partial sums over the
// indices k ≡ 0, 1, 2, 3 (mod 4) below K4 = K rounded down to a multiple of
// 4, the rest added to the first in order, then (s0 + s1) + (s2 + s3). A slab
// starts at a multiple of TILE (a multiple of 4: the host refuses other
// tiles), so k0 + j ≡ j (mod 4). Padding terms are 0·0 = +0, which leaves a
// partial sum unchanged (a sum started at +0 is never -0).
#define DOT4_SLAB(S, A, B, k0, K4)                          \
  for (int j = 0; j < TILE; j += 4) {                       \
    if ((k0) + j < (K4)) {                                  \
      S##0 += (A)[j] * (B)[j];                              \
      S##1 += (A)[j + 1] * (B)[j + 1];                      \
      S##2 += (A)[j + 2] * (B)[j + 2];                      \
      S##3 += (A)[j + 3] * (B)[j + 3];                      \
    } else {                                                \
      S##0 += (A)[j] * (B)[j];                              \
      S##0 += (A)[j + 1] * (B)[j + 1];                      \
      S##0 += (A)[j + 2] * (B)[j + 2];                      \
      S##0 += (A)[j + 3] * (B)[j + 3];                      \
    }                                                       \
  }

// moe_gate_up and moe_down are written once for plain and quantized weights
// (NAME: the kernel's suffix; T, WP, WAT: the weight, kernels_common.cl); a
// quantized expert weight is decoded element by element into the tiles
// (kernels_quant.cl), the fused [E, rows, cols] weight read as a matrix of
// E·rows rows.
// moe_gate_up: act[j, i] = gelu_tanh(gate_e · x_t) · (up_e · x_t) for the row
// j of expert e (token t = rows[j] / k), gate = rows i and up = rows I + i of
// gate_up[e]. A TILE×TILE work-group computes TILE rows × TILE columns i of one
// expert (grid: columns × row tiles); the tiles of x's rows and of both weight
// blocks go through local memory along H, as in linear.
#define MOE_GATE_UP_KERNEL(NAME, T, WP, WAT)                                                                  \
  __kernel __attribute__((reqd_work_group_size(TILE, TILE, 1))) void moe_gate_up_##NAME(                      \
      __global const float* x, __global const int* rows, int k, __global const int* starts,                   \
      __global const int* tile_first, int E, WP(T), __global float* act, int H, int I) {                      \
    __local float xs[TILE][TILE + 1];                                                                         \
    __local float gs[TILE][TILE + 1];                                                                         \
    __local float us[TILE][TILE + 1];                                                                         \
    const int g = get_group_id(1), e = moe_tile_expert(tile_first, E, g);                                     \
    if (e < 0) return; /* the whole work-group, before any barrier */                                         \
    const int tx = get_local_id(0), ty = get_local_id(1);                                                     \
    const int end = starts[e + 1], row = starts[e] + (g - tile_first[e]) * TILE + ty;                         \
    const int i0 = get_group_id(0) * TILE, wi = i0 + ty;                                                      \
    const size_t token = row < end ? (size_t)(rows[row] / k) : 0;                                             \
    const size_t gate_row = (size_t)e * 2 * (size_t)I + (size_t)wi, up_row = gate_row + (size_t)I;            \
    const int K4 = H & ~3;                                                                                    \
    float g0 = 0.0f, g1 = 0.0f, g2 = 0.0f, g3 = 0.0f, u0 = 0.0f, u1 = 0.0f, u2 = 0.0f, u3 = 0.0f;             \
    for (int k0 = 0; k0 < H; k0 += TILE) {                                                                    \
      const int kk = k0 + tx;                                                                                 \
      xs[ty][tx] = (row < end && kk < H) ? x[token * (size_t)H + (size_t)kk] : 0.0f;                          \
      gs[ty][tx] = (wi < I && kk < H) ? WAT(T, gate_row, kk, H) : 0.0f;                                       \
      us[ty][tx] = (wi < I && kk < H) ? WAT(T, up_row, kk, H) : 0.0f;                                         \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                           \
      DOT4_SLAB(g, xs[ty], gs[tx], k0, K4)                                                                    \
      DOT4_SLAB(u, xs[ty], us[tx], k0, K4)                                                                    \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                           \
    }                                                                                                         \
    const int i = i0 + tx;                                                                                    \
    if (row < end && i < I) act[(size_t)row * (size_t)I + (size_t)i] = gelu_tanh((g0 + g1) + (g2 + g3)) *     \
                                                                       ((u0 + u1) + (u2 + u3));               \
  }
#define MOE_GATE_UP(T) MOE_GATE_UP_KERNEL(T, T, W_PLAIN, W_PLAIN_AT)
#define MOE_GATE_UP_Q(S) MOE_GATE_UP_KERNEL(q_##S, S, W_QUANT, W_QUANT_AT)
MOE_GATE_UP(f32)
MOE_GATE_UP(bf16)
MOE_GATE_UP(f16)
MOE_GATE_UP_Q(nf4)
MOE_GATE_UP_Q(nvfp4)
MOE_GATE_UP_Q(affine)
MOE_GATE_UP_Q(int8)
MOE_GATE_UP_Q(fp8)

// moe_down: y[j, h] = down_e[h] · act[j] for the rows j of expert e, the same
// tiling over I.
#define MOE_DOWN_KERNEL(NAME, T, WP, WAT)                                                                     \
  __kernel __attribute__((reqd_work_group_size(TILE, TILE, 1))) void moe_down_##NAME(                         \
      __global const float* act, __global const int* starts, __global const int* tile_first, int E,           \
      WP(T), __global float* y, int H, int I) {                                                               \
    __local float as[TILE][TILE + 1];                                                                         \
    __local float ws[TILE][TILE + 1];                                                                         \
    const int g = get_group_id(1), e = moe_tile_expert(tile_first, E, g);                                     \
    if (e < 0) return; /* the whole work-group, before any barrier */                                         \
    const int tx = get_local_id(0), ty = get_local_id(1);                                                     \
    const int end = starts[e + 1], row = starts[e] + (g - tile_first[e]) * TILE + ty;                         \
    const int h0 = get_group_id(0) * TILE, wh = h0 + ty;                                                      \
    const size_t w_row = (size_t)e * (size_t)H + (size_t)wh;                                                  \
    const int K4 = I & ~3;                                                                                    \
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;                                                         \
    for (int k0 = 0; k0 < I; k0 += TILE) {                                                                    \
      const int kk = k0 + tx;                                                                                 \
      as[ty][tx] = (row < end && kk < I) ? act[(size_t)row * (size_t)I + (size_t)kk] : 0.0f;                  \
      ws[ty][tx] = (wh < H && kk < I) ? WAT(T, w_row, kk, I) : 0.0f;                                          \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                           \
      DOT4_SLAB(s, as[ty], ws[tx], k0, K4)                                                                    \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                           \
    }                                                                                                         \
    const int h = h0 + tx;                                                                                    \
    if (row < end && h < H) y[(size_t)row * (size_t)H + (size_t)h] = (s0 + s1) + (s2 + s3);                   \
  }
#define MOE_DOWN(T) MOE_DOWN_KERNEL(T, T, W_PLAIN, W_PLAIN_AT)
#define MOE_DOWN_Q(S) MOE_DOWN_KERNEL(q_##S, S, W_QUANT, W_QUANT_AT)
MOE_DOWN(f32)
MOE_DOWN(bf16)
MOE_DOWN(f16)
MOE_DOWN_Q(nf4)
MOE_DOWN_Q(nvfp4)
MOE_DOWN_Q(affine)
MOE_DOWN_Q(int8)
MOE_DOWN_Q(fp8)

// moe_combine: out[m, h] = Σ weight[m, s] · y[row_of[m, s], h] over token m's
// slots in ascending expert order, a repeated expert's slots in slot order
// (the reference's stable order), from 0. A slot without a row (index out of
// range) makes the token's row NaN. One work-item per element.
__kernel void moe_combine(__global const float* y, __global const int* idx, __global const float* wts,
                          __global const int* row_of, int k, int H, __global float* out, int n) {
  const int q = get_global_id(0);
  if (q >= n) return;
  const int m = q / H, h = q % H;
  __global const int* ix = idx + (size_t)m * (size_t)k;
  float o = 0.0f;
  bool bad = false;
  int last_e = 0, last_s = -1;  // the slot taken last: (expert, slot) ascending
  for (int r = 0; r < k; ++r) {
    int best = -1;
    for (int s = 0; s < k; ++s) {
      const bool after = last_s < 0 || ix[s] > last_e || (ix[s] == last_e && s > last_s);
      if (after && (best < 0 || ix[s] < ix[best])) best = s;
    }
    last_e = ix[best];
    last_s = best;
    const int j = row_of[(size_t)m * (size_t)k + (size_t)best];
    if (j < 0)
      bad = true;
    else
      o += wts[(size_t)m * (size_t)k + (size_t)best] * y[(size_t)j * (size_t)H + (size_t)h];
  }
  out[q] = bad ? NAN : o;
}

// moe_slot_acts: acts[s, i] = act[row_of[s], i], the activations back in slot
// order (the op's second output); NaN for a slot without a row.
__kernel void moe_slot_acts(__global const float* act, __global const int* row_of, int I, __global float* acts,
                            int n) {
  const int q = get_global_id(0);
  if (q >= n) return;
  const int s = q / I, i = q % I, j = row_of[s];
  acts[q] = j < 0 ? NAN : act[(size_t)j * (size_t)I + (size_t)i];
}
