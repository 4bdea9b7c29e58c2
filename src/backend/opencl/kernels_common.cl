// What every kernel file of the OpenCL backend shares (docs/opencl.md §3):
// OpenCL C 1.2 without extensions. The build joins the kernels_*.cl files,
// this one first, into one program (CMakeLists.txt DGEMMA_OPENCL_KERNEL_FILES).
// The host defines, when it builds the program:
//   TILE      edge of the square work-group of the matrix product (16, or less
//             where the device's work-groups are smaller)
//   NORM_WG   work-items of the work-group of a per-row reduction (rms_norm,
//             attention, soft_embedding, router_topk; a power of two)
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

// Quantized weights (kernels_quant.cl defines the decoders; declared here so
// that every kernel file can use them). A kernel taking one quantized weight
// lists QPARAMS among its parameters and reads element [r, c] of the weight,
// as fp32, with QLOAD(S, r, c), S one of nf4, nvfp4, affine, int8, fp8.
#define QPARAMS                                                                                                  \
  __global const uchar *q_codes, __global const uchar *q_scales, __global const uchar *q_extra,                 \
      __global const float *q_table, int q_cols, int q_block, int q_p0, int q_p1, float q_f0
#define QLOAD(S, r, c) qload_##S(q_codes, q_scales, q_extra, q_table, q_cols, q_block, q_p0, q_p1, q_f0, (r), (c))
float qload_nf4(QPARAMS, int r, int c);
float qload_nvfp4(QPARAMS, int r, int c);
float qload_affine(QPARAMS, int r, int c);
float qload_int8(QPARAMS, int r, int c);
float qload_fp8(QPARAMS, int r, int c);
float e4m3_to_f32(uchar v);

// Plain FP8 (E4M3FN) weights: one byte per element.
#define WTYPE_f8e4m3 uchar
#define WLOAD_f8e4m3(p, i) e4m3_to_f32((p)[i])

// A kernel written once for plain and quantized weights takes its weight as
// WP(T) and reads element [r, c] (ld: the weight's row length) as
// WAT(T, r, c, ld): (WP, WAT) = (W_PLAIN, W_PLAIN_AT) with T a stored dtype
// (f32, bf16, f16, f8e4m3), or (W_QUANT, W_QUANT_AT) with T a scheme.
#define W_PLAIN(T) __global const WTYPE_##T* w
#define W_PLAIN_AT(T, r, c, ld) WLOAD_##T(w, (size_t)(r) * (size_t)(ld) + (size_t)(c))
#define W_QUANT(S) QPARAMS
#define W_QUANT_AT(S, r, c, ld) QLOAD(S, (int)(r), (int)(c))

// fp32 rounded to the nearest bf16 (ties to even, NaN kept quiet), as
// core/dtype.h round_bf16: the bf16 runs of embedding and soft_embedding.
float round_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return as_float(((u >> 16) | 0x40u) << 16);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return as_float(u & 0xFFFF0000u);
}

// The maximum and the sum over a work-group of NORM_WG work-items of one value
// each, by a tree through `red` (NORM_WG floats of local memory): every
// work-item gets the result. Each ends with a barrier, so `red` can be used
// again at once; every work-item of the group must call them together.
float group_max(__local float* red, float v) {
  const int l = get_local_id(0);
  red[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = NORM_WG / 2; k > 0; k >>= 1) {
    if (l < k) red[l] = red[l] < red[l + k] ? red[l + k] : red[l];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

float group_sum(__local float* red, float v) {
  const int l = get_local_id(0);
  red[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = NORM_WG / 2; k > 0; k >>= 1) {
    if (l < k) red[l] += red[l + k];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
