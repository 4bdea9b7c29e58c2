// The dispatch of the ops on the device (docs/opencl.md §3) and the helpers
// every op's file shares (cl_ops.h).
#include "backend/opencl/cl_ops.h"

#include <climits>

#include "dgemma/error.h"

namespace dgemma::opencl {

std::string typed(const std::string& base, DType dt) {
  switch (dt) {
    case DType::kF32: return base + "_f32";
    case DType::kBF16: return base + "_bf16";
    case DType::kF16: return base + "_f16";
    case DType::kF8_E4M3: return base + "_f8e4m3";
    default:
      throw Error("opencl backend: internal: no " + base + " kernel for " + std::string(dtype_name(dt)) + " weights");
  }
}

int as_int(int64_t v, const char* what, const ClOp& op) {
  if (v < 0 || v > INT_MAX - 4096)
    throw Error("opencl backend: " + std::string(what) + " " + std::to_string(v) +
                " exceeds the kernels' int range in " + op.where());
  return int(v);
}

bool implemented_on_opencl(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbedding:
    case OpKind::kRmsNorm:
    case OpKind::kLinear:
    case OpKind::kRope:
    case OpKind::kGeluGlu:
    case OpKind::kAdd:
    case OpKind::kScale:
    case OpKind::kSoftcap:
    case OpKind::kConcatRows:
    case OpKind::kMoeExperts:
    case OpKind::kSample: return true;
    case OpKind::kAttention:
    case OpKind::kSoftEmbedding:
    case OpKind::kRouterTopk:
    case OpKind::kAffine:
    case OpKind::kPoolCells:
    case OpKind::kScatterRows: return true;
    default: return false;
  }
}

void run_op(ClOp& op) {
  switch (op.call().kind) {
    case OpKind::kEmbedding: return run_embedding(op);
    case OpKind::kRmsNorm: return run_rms_norm(op);
    case OpKind::kLinear: return run_linear(op);
    case OpKind::kRope: return run_rope(op);
    case OpKind::kGeluGlu: return run_elementwise(op, "gelu_glu");
    case OpKind::kAdd: return run_elementwise(op, "add");
    case OpKind::kScale: return run_elementwise(op, "scale");
    case OpKind::kSoftcap: return run_elementwise(op, "softcap");
    case OpKind::kConcatRows: return run_concat_rows(op);
    case OpKind::kMoeExperts: return run_moe_experts(op);
    case OpKind::kSample: return run_sample(op);
    case OpKind::kAttention: return run_attention(op);
    case OpKind::kSoftEmbedding: return run_soft_embedding(op);
    case OpKind::kRouterTopk: return run_router_topk(op);
    case OpKind::kAffine: return run_affine(op);
    case OpKind::kPoolCells: return run_pool_cells(op);
    case OpKind::kScatterRows: return run_scatter_rows(op);
    default:
      throw Error("opencl backend: " + std::string(op_name(op.call().kind)) + " is not yet on OpenCL (" + op.where() +
                  ")");
  }
}

}  // namespace dgemma::opencl
