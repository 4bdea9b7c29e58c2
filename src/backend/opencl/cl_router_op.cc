// router_topk on the device (docs/opencl.md §3), computing like the CPU's
// scalar reference (src/backend/cpu/cpu_moe.cc router_topk): both outputs,
// the experts' indices and their weights, stay on the device.
#include <cmath>

#include "backend/opencl/cl_ops.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

namespace {

int dtype_code(const WeightRef& w) {  // kernels_router.cl router_weight
  switch (w.dtype) {
    case DType::kF32: return 0;
    case DType::kBF16: return 1;
    case DType::kF16: return 2;
    default:
      throw Error("opencl backend: internal: router weight '" + w.name + "' is " + std::string(dtype_name(w.dtype)));
  }
}

}  // namespace

void run_router_topk(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& x = *c.in[0];
  const WeightRef &scale = *c.w[0], &proj = *c.w[1], &pes = *c.w[2];
  const int M = as_int(x.dim(0), "rows", op), H = as_int(x.dim(1), "hidden size", op);
  const int E = as_int(proj.shape[0], "expert count", op), K = c.attrs.top_k;
  as_int(int64_t(M) * H, "input element count", op);
  as_int(int64_t(E) * H, "projection element count", op);
  as_int(int64_t(M) * E, "probability count", op);
  as_int(int64_t(M) * K, "output element count", op);
  if (M == 0) return;  // empty outputs
  // The reference's H^-1/2, rounded from double on the host as it rounds it.
  const float root = float(1.0 / std::sqrt(double(H)));
  const cl_mem r = op.scratch(size_t(M) * size_t(H > 0 ? H : 1) * 4, "router_topk normed rows");
  // With H = 0, x and the weights of H elements are never read: r stands in.
  const cl_mem in = H > 0 ? op.input(0) : r, ws = H > 0 ? op.weight(0) : r, wp = H > 0 ? op.weight(1) : r;
  const cl_mem we = op.weight(2);
  const cl_mem p = op.scratch(size_t(M) * size_t(E) * 4, "router_topk probabilities");
  const cl_mem idx = op.output(0), wts = op.output(1);
  const int sdt = dtype_code(scale), pdt = dtype_code(proj), edt = dtype_code(pes);
  const float eps = c.attrs.eps;
  const size_t group = size_t(op.runtime().norm_group());
  op.launch("router_topk", {size_t(M) * group}, {group}, in, ws, sdt, wp, pdt, we, edt, r, p, idx, wts, H, E, K, eps,
            root);
}

}  // namespace dgemma::opencl
