// The matrix product on the device (docs/opencl.md §3), computing like the
// CPU's scalar reference (src/backend/cpu/cpu_linear.cc); quantized weights are
// decoded in the kernel as src/backend/cpu/quant_gemm.cc decodes them.
#include "backend/opencl/cl_weight_launch.h"

namespace dgemma::opencl {

void run_linear(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& x = *c.in[0];
  const WeightRef& W = *c.w[0];
  const int M = as_int(x.dim(0), "rows", op), K = as_int(x.dim(1), "columns", op);
  const int N = as_int(W.shape[0], "output columns", op);
  if (M == 0 || N == 0) return;
  const cl_mem out = op.output(0);
  if (K == 0) {  // an empty sum
    op.zero_output(0);
    return;
  }
  const cl_mem in = op.input(0);
  const size_t tile = size_t(op.runtime().tile());
  launch_with_weight(op, "linear", 0, {size_t(N), size_t(M)}, {tile, tile}, std::tuple(in), std::tuple(out, M, N, K));
}

}  // namespace dgemma::opencl
