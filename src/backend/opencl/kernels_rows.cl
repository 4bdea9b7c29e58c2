// Row-local kernels of the OpenCL backend (docs/opencl.md §3): embedding,
// rms_norm, rope and the elementwise ops.

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
EMBEDDING(f8e4m3)

// embedding from a quantized table (QPARAMS, kernels_quant.cl): each element
// decoded as the CPU's dequantization gives it, rounded to bf16 in a bf16 run
// (to_bf16; quantize/quantized_weight.h), then scaled.
#define EMBEDDING_Q(S)                                                                                           \
  __kernel void embedding_q_##S(__global const int* ids, QPARAMS, __global float* out, int H, int V,            \
                                int to_bf16, float scale, int n) {                                             \
    const int g = get_global_id(0);                                                                            \
    if (g >= n) return;                                                                                        \
    const int m = g / H, h = g - m * H;                                                                        \
    const int id = ids[m];                                                                                     \
    if (id < 0 || id >= V) {                                                                                   \
      out[g] = NAN;                                                                                            \
      return;                                                                                                  \
    }                                                                                                          \
    const float v = QLOAD(S, id, h);                                                                           \
    out[g] = (to_bf16 ? round_to_bf16(v) : v) * scale;                                                         \
  }
EMBEDDING_Q(nf4)
EMBEDDING_Q(nvfp4)
EMBEDDING_Q(affine)
EMBEDDING_Q(int8)
EMBEDDING_Q(fp8)

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
    const float inv = 1.0f / sqrt(group_sum(part, s) / (float)D + eps);                                        \
    for (int d = l; d < D; d += NORM_WG) o[d] = has_w ? xr[d] * inv * WLOAD_##T(w, d) : xr[d] * inv;           \
  }
RMS_NORM(f32)
RMS_NORM(bf16)
RMS_NORM(f16)

// rope (docs/model.md §1.4): split-half pairs (i, i + d/2) of each head rotated
// by pos·inv_freq[i] for i < pairs, copied beyond; one work-item per pair.
// inv_freq comes from the host, computed as the reference computes it. With
// parts = 2 (2-D positions pos[m, 2], docs/model.md §7.3) each head is two
// runs of width d / 2, run p a split-half RoPE by pos[m, p].
__kernel void rope(__global const float* x, __global const int* pos, __global const float* inv_freq,
                   __global float* out, int heads, int d, int pairs, int parts, int n) {
  const int g = get_global_id(0);
  if (g >= n) return;
  const int width = d / parts, half_w = width / 2;
  const int i = g % half_w, run = g / half_w, part = run % parts, row = run / parts, m = row / heads;
  __global const float* xi = x + (size_t)row * (size_t)d + (size_t)(part * width);
  __global float* o = out + (size_t)row * (size_t)d + (size_t)(part * width);
  const float a = xi[i], b = xi[i + half_w];
  if (i < pairs) {
    const float ang = (float)pos[m * parts + part] * inv_freq[i];
    const float cs = cos(ang), sn = sin(ang);
    o[i] = a * cs - b * sn;
    o[i + half_w] = b * cs + a * sn;
  } else {
    o[i] = a;
    o[i + half_w] = b;
  }
  if (i == 0 && (width & 1)) o[width - 1] = xi[width - 1];  // an odd width's last element has no pair
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
