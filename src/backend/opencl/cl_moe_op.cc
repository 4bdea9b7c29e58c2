// The routed experts on the device (docs/opencl.md §3), computing like the
// CPU's scalar reference (src/backend/cpu/cpu_moe.cc; quantized experts:
// src/backend/cpu/quant_moe.cc). The routing (indices
// and weights) is used where it lies, usually on the device where the router
// left it: it is grouped by expert there (moe_route), so the host never reads
// it and never waits.
#include <algorithm>

#include "backend/opencl/cl_weight_launch.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

void run_moe_experts(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor &x = *c.in[0], &idx = *c.in[1];
  const WeightRef& gu = *c.w[0];
  const int M = as_int(x.dim(0), "rows", op), H = as_int(x.dim(1), "hidden size", op);
  const int k = as_int(idx.dim(1), "experts per token", op), E = as_int(gu.shape[0], "experts", op);
  const int I = as_int(gu.shape[1] / 2, "expert width", op);
  const int n = as_int(int64_t(M) * k, "routed rows", op);
  as_int(int64_t(n) * H, "routed outputs", op);
  as_int(int64_t(n) * I, "routed activations", op);
  const bool acts = c.out.size() > 1;
  if (n == 0 || H == 0) {  // no expert (empty sums), or rows of nothing: gelu(0) · 0 = 0 activations
    op.zero_output(0);
    if (acts) op.zero_output(1);
    return;
  }
  const int tile = op.runtime().tile();
  if (tile % 4 != 0)
    throw Error("opencl backend: the device's work-groups are too small for moe_experts (tile " + std::to_string(tile) +
                ", needs a multiple of 4) in " + op.where());

  // The grouping: counts, offsets and each expert's rows (kernels_moe.cl moe_route).
  const cl_mem d_idx = op.input(1), d_wts = op.input(2), d_x = op.input(0);
  const cl_mem starts = op.scratch(size_t(E + 1) * 4, "expert offsets");
  const cl_mem tile_first = op.scratch(size_t(E + 1) * 4, "expert row tiles");
  const cl_mem rows = op.scratch(size_t(n) * 4, "slots by expert");
  const cl_mem row_of = op.scratch(size_t(n) * 4, "row of each slot");
  op.launch("moe_route", {kGroup}, {kGroup}, d_idx, n, E, starts, tile_first, rows, row_of);

  // Row tiles: at most n / TILE whole ones plus one partial tile per expert
  // that has rows; tiles past the routing's last exit at once.
  const size_t t = size_t(tile);
  const size_t row_tiles = (size_t(n) + t - 1) / t + size_t(std::min(E, n));
  const cl_mem act = op.scratch(size_t(n) * size_t(std::max(I, 1)) * 4, "expert activations");
  const cl_mem y = op.scratch(size_t(n) * size_t(H) * 4, "expert outputs");
  // Plain or quantized expert weights (cl_weight_launch.h).
  if (I > 0)
    launch_with_weight(op, "moe_gate_up", 0, {(size_t(I) + t - 1) / t * t, row_tiles * t}, {t, t},
                       std::tuple(d_x, rows, k, starts, tile_first, E), std::tuple(act, H, I));
  launch_with_weight(op, "moe_down", 1, {(size_t(H) + t - 1) / t * t, row_tiles * t}, {t, t},
                     std::tuple(act, starts, tile_first, E), std::tuple(y, H, I));
  const int elements = as_int(int64_t(M) * H, "output elements", op);
  op.launch("moe_combine", {size_t(elements)}, {kGroup}, y, d_idx, d_wts, row_of, k, H, op.output(0), elements);
  if (acts && I > 0) {
    const int slots = n * I;
    op.launch("moe_slot_acts", {size_t(slots)}, {kGroup}, act, row_of, I, op.output(1), slots);
  }
}

}  // namespace dgemma::opencl
