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
