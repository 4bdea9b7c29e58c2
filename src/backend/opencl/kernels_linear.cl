// The matrix product of the OpenCL backend (docs/opencl.md §3).

// linear: out[M, N] = x[M, K] · W[N, K]ᵀ, a tiled product through local memory.
// A TILE×TILE work-group computes a TILE×TILE block of out, one element per
// work-item; for each slab of TILE columns of K it stages the slab of x's rows
// and of W's rows (converted to fp32; a quantized W decoded element by
// element, kernels_quant.cl) in local memory, both read along K so that
// neighbouring work-items read neighbouring addresses. fp32 accumulation.
// The padding column keeps the column-wise reads of ws off one memory bank.
// NAME: the kernel's suffix; T, WP, WAT: the weight (kernels_common.cl).
#define LINEAR_KERNEL(NAME, T, WP, WAT)                                                                          \
  __kernel __attribute__((reqd_work_group_size(TILE, TILE, 1))) void linear_##NAME(                            \
      __global const float* x, WP(T), __global float* out, int M, int N, int K) {                              \
    __local float xs[TILE][TILE + 1];                                                                          \
    __local float ws[TILE][TILE + 1];                                                                          \
    const int tx = get_local_id(0), ty = get_local_id(1);                                                      \
    const int n0 = get_group_id(0) * TILE, m0 = get_group_id(1) * TILE;                                        \
    const int m = m0 + ty, n = n0 + tx, wn = n0 + ty;                                                          \
    float acc = 0.0f;                                                                                          \
    for (int k0 = 0; k0 < K; k0 += TILE) {                                                                     \
      const int k = k0 + tx;                                                                                   \
      xs[ty][tx] = (m < M && k < K) ? x[(size_t)m * (size_t)K + (size_t)k] : 0.0f;                             \
      ws[ty][tx] = (wn < N && k < K) ? WAT(T, wn, k, K) : 0.0f;                                                \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
      for (int j = 0; j < TILE; ++j) acc += xs[ty][j] * ws[tx][j];                                             \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
    }                                                                                                          \
    if (m < M && n < N) out[(size_t)m * (size_t)N + (size_t)n] = acc;                                          \
  }
#define LINEAR(T) LINEAR_KERNEL(T, T, W_PLAIN, W_PLAIN_AT)
#define LINEAR_Q(S) LINEAR_KERNEL(q_##S, S, W_QUANT, W_QUANT_AT)
LINEAR(f32)
LINEAR(bf16)
LINEAR(f16)
LINEAR(f8e4m3)
LINEAR_Q(nf4)
LINEAR_Q(nvfp4)
LINEAR_Q(affine)
LINEAR_Q(int8)
LINEAR_Q(fp8)
