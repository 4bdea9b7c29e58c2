// The vision tower's ops on the device (docs/opencl.md §3; kernels_vision.cl):
// affine, pool_cells and scatter_rows, computing like the CPU's scalar
// reference. Inputs an earlier op left on the device are read in place and
// the outputs may stay there, as every op's.
#include "backend/opencl/cl_ops.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

namespace {

// The suffix of a weight's dtype in the kernels' names ("f32", "bf16", "f16").
std::string dtype_suffix(DType dt) { return typed("", dt).substr(1); }

}  // namespace

void run_affine(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& x = *c.in[0];
  const int n = as_int(x.numel(), "element count", op);
  if (n == 0) return;
  const cl_mem in = op.input(0), shift = op.weight(0), scale = op.weight(1), out = op.output(0);
  const int H = int(x.dim(1));
  op.launch("affine_" + dtype_suffix(c.w[0]->dtype) + "_" + dtype_suffix(c.w[1]->dtype), {size_t(n)}, {kGroup}, in,
            shift, scale, out, H, n);
}

void run_pool_cells(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& x = *c.in[0];
  const int64_t C = c.attrs.out_rows, H = x.dim(1);
  const int n = as_int(C * H, "output element count", op);
  if (n == 0) return;
  if (x.dim(0) == 0) {  // no rows: every cell an empty sum
    op.zero_output(0);
    return;
  }
  as_int(x.numel(), "element count", op);
  const cl_mem in = op.input(0), cells = op.input(1), out = op.output(0);
  const int N = int(x.dim(0)), h = int(H);
  const float scale = c.attrs.scale;
  op.launch("pool_cells", {size_t(n)}, {kGroup}, in, cells, out, N, h, scale, n);
}

void run_scatter_rows(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor &base = *c.in[0], &src = *c.in[1];
  const int64_t T = base.dim(0), H = base.dim(1);
  const int total = as_int(base.numel(), "element count", op);
  if (total == 0) return;
  const cl_mem out = op.output(0);
  op.copy(op.input(0), 0, out, 0, size_t(total) * 4);
  const int n = as_int(src.numel(), "source element count", op);
  if (n == 0) return;
  const cl_mem s = op.input(1), rows = op.input(2);
  const int t = int(T), h = int(H);
  op.launch("scatter_rows", {size_t(n)}, {kGroup}, s, rows, out, t, h, n);
}

}  // namespace dgemma::opencl
