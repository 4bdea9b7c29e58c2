#pragma once
// The ops on the device (docs/opencl.md §3), one function per op kind, each
// launching a prepared call's kernels, and what they share. Shapes were
// checked by prepare_op (ops/op.h); the kernels compute like the CPU's scalar
// reference (src/backend/cpu/).
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/opencl/cl_op.h"

namespace dgemma::opencl {

// The kernel of a weight-reading op for the weight's stored dtype: base + "_f32",
// "_bf16", "_f16" or "_f8e4m3".
std::string typed(const std::string& base, DType dt);
// Element counts and sizes passed to kernels as `int`, with room for the
// work-items that round a launch up to whole work-groups; throws naming `what`
// and the op when `v` does not fit.
int as_int(int64_t v, const char* what, const ClOp& op);

inline constexpr size_t kGroup = 256;  // work-items per group of the one-dimensional kernels

// cl_row_ops.cc
void run_embedding(ClOp& op);
void run_rms_norm(ClOp& op);
void run_rope(ClOp& op);
void run_elementwise(ClOp& op, const char* kernel);  // gelu_glu, add, scale, softcap
void run_concat_rows(ClOp& op);
// cl_linear_op.cc
void run_linear(ClOp& op);
// cl_moe_op.cc
void run_moe_experts(ClOp& op);
// cl_sample_op.cc (needs fp64 on the device)
void run_sample(ClOp& op);
// cl_attention_op.cc
void run_attention(ClOp& op);
// cl_soft_embedding_op.cc
void run_soft_embedding(ClOp& op);
// cl_router_op.cc
void run_router_topk(ClOp& op);
// cl_vision_ops.cc
void run_affine(ClOp& op);
void run_pool_cells(ClOp& op);
void run_scatter_rows(ClOp& op);

}  // namespace dgemma::opencl
