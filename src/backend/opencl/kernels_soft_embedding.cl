// soft_embedding of the OpenCL backend (docs/opencl.md §3): the expected
// embedding under softmax(logits) (docs/model.md §2.3, §3.3), out[M, H] =
// softmax(logits)[M, V] · table[V, H] · scale.

// The probabilities of one row per work-group of NORM_WG work-items, into
// probs[M, V]: in a bf16 run (to_bf16) the logits are rounded to bf16 first
// and the probabilities again; the maximum and Σexp are tree reductions of
// the work-items' strided shares (each work-item reads back only the
// elements it wrote).
__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void soft_embedding_probs(
    __global const float* logits, __global float* probs, int V, int to_bf16) {
  __local float red[NORM_WG];
  const int l = get_local_id(0);
  const size_t m = get_group_id(0);
  __global const float* z = logits + m * (size_t)V;
  __global float* p = probs + m * (size_t)V;
  float mx = -INFINITY;
  for (int v = l; v < V; v += NORM_WG) {
    const float x = to_bf16 ? round_to_bf16(z[v]) : z[v];
    p[v] = x;
    mx = mx < x ? x : mx;
  }
  mx = group_max(red, mx);
  float sum = 0.0f;
  for (int v = l; v < V; v += NORM_WG) {
    const float e = exp(p[v] - mx);
    p[v] = e;
    sum += e;
  }
  sum = group_sum(red, sum);
  for (int v = l; v < V; v += NORM_WG) {
    const float x = p[v] / sum;
    p[v] = to_bf16 ? round_to_bf16(x) : x;
  }
}

// out[M, H] = probs[M, V] · table[V, H] · scale, tiled like linear: a
// TILE×TILE work-group computes a TILE×TILE block of out (rows m, columns h);
// for each slab of TILE vocabulary entries it stages the probabilities of its
// rows and the table's rows (converted to fp32, read along H) in local
// memory. Each element sums over v in vocabulary order, skipping zero
// probabilities, as the reference does, and is scaled at the end. Written
// once for plain and quantized tables (NAME: the kernel's suffix; T, WP, WAT:
// the table, kernels_common.cl; TV: the value used for an element read).
#define SOFT_EMBEDDING_OUT_KERNEL(NAME, T, WP, WAT, TV)                                                         \
  __kernel __attribute__((reqd_work_group_size(TILE, TILE, 1))) void soft_embedding_out_##NAME(                 \
      __global const float* probs, WP(T), __global float* out, int M, int V, int H, float scale, int to_bf16) { \
    __local float ps[TILE][TILE + 1];                                                                           \
    __local float ts[TILE][TILE + 1];                                                                           \
    const int tx = get_local_id(0), ty = get_local_id(1);                                                       \
    const int h0 = get_group_id(0) * TILE, m0 = get_group_id(1) * TILE;                                         \
    const int m = m0 + ty, h = h0 + tx;                                                                         \
    float acc = 0.0f;                                                                                           \
    for (int v0 = 0; v0 < V; v0 += TILE) {                                                                      \
      const int pv = v0 + tx, tv = v0 + ty;                                                                     \
      ps[ty][tx] = (m < M && pv < V) ? probs[(size_t)m * (size_t)V + (size_t)pv] : 0.0f;                        \
      ts[ty][tx] = (tv < V && h < H) ? TV(WAT(T, tv, h, H)) : 0.0f;                                             \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                             \
      for (int j = 0; j < TILE; ++j) {                                                                          \
        const float p = ps[ty][j];                                                                              \
        if (p != 0.0f) acc += p * ts[j][tx];                                                                    \
      }                                                                                                         \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                             \
    }                                                                                                           \
    if (m < M && h < H) out[(size_t)m * (size_t)H + (size_t)h] = acc * scale;                                   \
  }
// The table's values: a plain table's as stored; a quantized table's decoded
// and, in a bf16 run, rounded to bf16 (the CPU multiplies with its dense copy
// in that dtype, quantize/quantized_weight.h).
#define SOFT_EMBEDDING_PLAIN_VALUE(v) (v)
#define SOFT_EMBEDDING_QUANT_VALUE(v) (to_bf16 ? round_to_bf16(v) : (v))
#define SOFT_EMBEDDING_OUT(T) SOFT_EMBEDDING_OUT_KERNEL(T, T, W_PLAIN, W_PLAIN_AT, SOFT_EMBEDDING_PLAIN_VALUE)
#define SOFT_EMBEDDING_OUT_Q(S) SOFT_EMBEDDING_OUT_KERNEL(q_##S, S, W_QUANT, W_QUANT_AT, SOFT_EMBEDDING_QUANT_VALUE)
SOFT_EMBEDDING_OUT(f32)
SOFT_EMBEDDING_OUT(bf16)
SOFT_EMBEDDING_OUT(f16)
SOFT_EMBEDDING_OUT_Q(nf4)
SOFT_EMBEDDING_OUT_Q(nvfp4)
SOFT_EMBEDDING_OUT_Q(affine)
SOFT_EMBEDDING_OUT_Q(int8)
SOFT_EMBEDDING_OUT_Q(fp8)
