// The OpenCL backend's kernels (docs/opencl.md §3): OpenCL C 1.2 without
// extensions. The host defines, when it builds the program:
//   TILE      edge of the square work-group of the matrix product (16, or less
//             where the device's work-groups are smaller)
//   NORM_WG   work-items of rms_norm's work-group (a power of two)
// Every kernel computes like the CPU's scalar reference (docs/model.md §1.2-§1.5):
// fp32 arithmetic in the same order of operations, no contraction into fused
// multiply-adds (the reference does not contract either).
#pragma OPENCL FP_CONTRACT OFF

// Weights in their stored dtype: f32, bf16 (the high half of an f32) and f16
// (vload_half, core OpenCL C: no cl_khr_fp16 needed to read it).
#define WTYPE_f32 float
#define WTYPE_bf16 ushort
#define WTYPE_f16 half
#define WLOAD_f32(p, i) ((p)[i])
#define WLOAD_bf16(p, i) as_float(((uint)(p)[i]) << 16)
#define WLOAD_f16(p, i) vload_half((i), (p))

// embedding: out[m, h] = table[ids[m], h] * scale, one work-item per element.
// An id out of [0, V) gives NaN (the host checks ids it holds before the launch).
#define EMBEDDING(T)                                                                                             \
  __kernel void embedding_##T(__global const int* ids, __global const WTYPE_##T* table, __global float* out,    \
                              int H, int V, float scale, int n) {                                              \
    const int g = get_global_id(0);                                                                            \
    if (g >= n) return;                                                                                        \
    const int m = g / H, h = g - m * H;                                                                        \
    const int id = ids[m];                                                                                     \
    out[g] = (id < 0 || id >= V) ? NAN : WLOAD_##T(table, (size_t)id * (size_t)H + (size_t)h) * scale;          \
  }
EMBEDDING(f32)
EMBEDDING(bf16)
EMBEDDING(f16)

// rms_norm (docs/model.md §1.2): x · (mean(x²) + eps)^(-1/2) · w, one work-group
// per row; the sum of squares is reduced in local memory.
#define RMS_NORM(T)                                                                                              \
  __kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void rms_norm_##T(                             \
      __global const float* x, __global const WTYPE_##T* w, int has_w, __global float* out, int D, float eps) {  \
    __local float part[NORM_WG];                                                                               \
    const int l = get_local_id(0);                                                                             \
    const size_t r = get_group_id(0);                                                                          \
    __global const float* xr = x + r * (size_t)D;                                                              \
    __global float* o = out + r * (size_t)D;                                                                   \
    float s = 0.0f;                                                                                            \
    for (int d = l; d < D; d += NORM_WG) s += xr[d] * xr[d];                                                   \
    part[l] = s;                                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                              \
    for (int k = NORM_WG / 2; k > 0; k >>= 1) {                                                                \
      if (l < k) part[l] += part[l + k];                                                                       \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
    }                                                                                                          \
    const float inv = 1.0f / sqrt(part[0] / (float)D + eps);                                                   \
    for (int d = l; d < D; d += NORM_WG) o[d] = has_w ? xr[d] * inv * WLOAD_##T(w, d) : xr[d] * inv;           \
  }
RMS_NORM(f32)
RMS_NORM(bf16)
RMS_NORM(f16)

// linear: out[M, N] = x[M, K] · W[N, K]ᵀ, a tiled product through local memory.
// A TILE×TILE work-group computes a TILE×TILE block of out, one element per
// work-item; for each slab of TILE columns of K it stages the slab of x's rows
// and of W's rows (converted to fp32) in local memory, both read along K so
// that neighbouring work-items read neighbouring addresses. fp32 accumulation.
// The padding column keeps the column-wise reads of ws off one memory bank.
#define LINEAR(T)                                                                                                \
  __kernel __attribute__((reqd_work_group_size(TILE, TILE, 1))) void linear_##T(                               \
      __global const float* x, __global const WTYPE_##T* w, __global float* out, int M, int N, int K) {         \
    __local float xs[TILE][TILE + 1];                                                                          \
    __local float ws[TILE][TILE + 1];                                                                          \
    const int tx = get_local_id(0), ty = get_local_id(1);                                                      \
    const int n0 = get_group_id(0) * TILE, m0 = get_group_id(1) * TILE;                                        \
    const int m = m0 + ty, n = n0 + tx, wn = n0 + ty;                                                          \
    float acc = 0.0f;                                                                                          \
    for (int k0 = 0; k0 < K; k0 += TILE) {                                                                     \
      const int k = k0 + tx;                                                                                   \
      xs[ty][tx] = (m < M && k < K) ? x[(size_t)m * (size_t)K + (size_t)k] : 0.0f;                             \
      ws[ty][tx] = (wn < N && k < K) ? WLOAD_##T(w, (size_t)wn * (size_t)K + (size_t)k) : 0.0f;                \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
      for (int j = 0; j < TILE; ++j) acc += xs[ty][j] * ws[tx][j];                                             \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
    }                                                                                                          \
    if (m < M && n < N) out[(size_t)m * (size_t)N + (size_t)n] = acc;                                          \
  }
LINEAR(f32)
LINEAR(bf16)
LINEAR(f16)

// rope (docs/model.md §1.4): split-half pairs (i, i + d/2) of each head rotated
// by pos·inv_freq[i] for i < pairs, copied beyond; one work-item per pair.
// inv_freq comes from the host, computed as the reference computes it.
__kernel void rope(__global const float* x, __global const int* pos, __global const float* inv_freq,
                   __global float* out, int heads, int d, int pairs, int n) {
  const int g = get_global_id(0);
  if (g >= n) return;
  const int half_d = d / 2;
  const int i = g % half_d, row = g / half_d, m = row / heads;
  __global const float* xi = x + (size_t)row * (size_t)d;
  __global float* o = out + (size_t)row * (size_t)d;
  const float a = xi[i], b = xi[i + half_d];
  if (i < pairs) {
    const float ang = (float)pos[m] * inv_freq[i];
    const float cs = cos(ang), sn = sin(ang);
    o[i] = a * cs - b * sn;
    o[i + half_d] = b * cs + a * sn;
  } else {
    o[i] = a;
    o[i + half_d] = b;
  }
  if (i == 0 && (d & 1)) o[d - 1] = xi[d - 1];  // an odd head dim's last element has no pair
}

// gelu_pytorch_tanh (docs/model.md §1.5), as the reference writes it.
float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + tanh(k * (x + 0.044715f * x * x * x)));
}

__kernel void gelu_glu(__global const float* gate, __global const float* up, __global float* out, int n) {
  const int g = get_global_id(0);
  if (g < n) out[g] = gelu_tanh(gate[g]) * up[g];
}

__kernel void add(__global const float* a, __global const float* b, __global float* out, int n) {
  const int g = get_global_id(0);
  if (g < n) out[g] = a[g] + b[g];
}

__kernel void scale(__global const float* x, float s, __global float* out, int n) {
  const int g = get_global_id(0);
  if (g < n) out[g] = x[g] * s;
}

__kernel void softcap(__global const float* x, float cap, __global float* out, int n) {
  const int g = get_global_id(0);
  if (g < n) out[g] = cap * tanh(x[g] / cap);
}
