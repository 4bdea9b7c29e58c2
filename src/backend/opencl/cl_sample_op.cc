// The sample op on the device (docs/opencl.md §3; ops/op.h kSample): the
// per-row pass of a denoising step with the CPU's results (ops/row_sampling.h
// process_row). The kernel cannot throw: a row it cannot sample comes back
// marked in the argmax output (bad_row_mark), and the caller turns the mark
// into the CPU's error (throw_marked_row).
#include "backend/opencl/cl_ops.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

void run_sample(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor &logits = *c.in[0], &uniforms = *c.in[1];
  const int M = as_int(logits.dim(0), "rows", op), V = as_int(logits.dim(1), "vocabulary", op);
  as_int(int64_t(M) * V, "logit count", op);
  if (M == 0) return;
  if (!op.runtime().info().fp64)
    throw Error("opencl backend: sample needs fp64 (cl_khr_fp64), which " + op.runtime().info().name +
                " does not offer, in " + op.where());
  const cl_mem x = op.input(0);
  const int draw = uniforms.dim(0) > 0 ? 1 : 0;
  const cl_mem u = draw ? op.input(1) : x;  // unread without a draw
  const cl_mem p = op.scratch(size_t(M) * size_t(V) * 4, "sampling weights");
  const size_t chunks = (size_t(V) + kGroup - 1) / kGroup;  // kernels_sample.cl SAMPLE_WG = kGroup
  const cl_mem cdf_at = op.scratch(size_t(M) * chunks * 8, "running sums at the chunk starts");
  const float T = c.attrs.temperature;
  op.launch("sample_row", {size_t(M) * kGroup}, {kGroup}, x, V, T, u, draw, op.output(0), p, cdf_at, op.output(1),
            op.output(2), op.output(3));
}

}  // namespace dgemma::opencl
