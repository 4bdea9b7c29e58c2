// soft_embedding on the device (docs/opencl.md §3), computing like the CPU's
// scalar reference (src/backend/cpu/cpu_elementwise.cc soft_embedding):
// the probabilities of each row into a scratch buffer, then their product
// with the table. Plain F32, BF16 and F16 tables, and quantized ones decoded
// in the kernel (src/backend/cpu/quant_embedding.cc multiplies with their
// dense copy).
#include "backend/opencl/cl_weight_launch.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

void run_soft_embedding(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& logits = *c.in[0];
  const WeightRef& table = *c.w[0];
  const int M = as_int(logits.dim(0), "rows", op), V = as_int(table.shape[0], "vocabulary", op);
  const int H = as_int(table.shape[1], "hidden size", op);
  as_int(int64_t(M) * V, "logit count", op);
  as_int(int64_t(M) * H, "output element count", op);
  as_int(int64_t(V) * H, "table element count", op);
  if (M == 0 || H == 0) return;  // an empty output
  const cl_mem out = op.output(0);
  if (V == 0) {  // softmax over nothing: the reference's sums stay 0
    op.zero_output(0);
    return;
  }
  const cl_mem in = op.input(0);
  const cl_mem probs = op.scratch(size_t(M) * size_t(V) * 4, "soft_embedding probabilities");
  const int to_bf16 = c.attrs.round_to_bf16 ? 1 : 0;
  const size_t group = size_t(op.runtime().norm_group()), tile = size_t(op.runtime().tile());
  op.launch("soft_embedding_probs", {size_t(M) * group}, {group}, in, probs, V, to_bf16);
  const float scale = c.attrs.scale;
  // A plain or quantized table (cl_weight_launch.h); a quantized one's values
  // are rounded to bf16 in a bf16 run, as the CPU's dense copy of it is.
  launch_with_weight(op, "soft_embedding_out", 0, {size_t(H), size_t(M)}, {tile, tile}, std::tuple(probs),
                     std::tuple(out, M, V, H, scale, to_bf16));
}

}  // namespace dgemma::opencl
