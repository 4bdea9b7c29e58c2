#pragma once
// Launching a kernel written once for plain and quantized weights
// (kernels_common.cl W_PLAIN / W_QUANT, docs/opencl.md §3): the variant for
// the op's weight k and its arguments in the kernel's order, the weight's
// (one buffer, or the decoders' QPARAMS) between the others.
#include <string>
#include <tuple>
#include <vector>

#include "backend/opencl/cl_ops.h"

namespace dgemma::opencl {

// The kernel of a weight-reading op for a quantized weight: base + "_q_" + its
// scheme ("linear_q_nf4"; kernels_quant.cl).
inline std::string quant_kernel(const std::string& base, const ClQuantWeight& q) { return base + "_q_" + q.scheme; }

// Launches base's variant for weight k of the op (typed(base, dtype) or
// quant_kernel(base, …)) with the arguments `before`, the weight's, then
// `after`, over `global` work-items in groups of `local` (ClOp::launch).
template <typename... Before, typename... After>
void launch_with_weight(ClOp& op, const std::string& base, size_t k, std::vector<size_t> global,
                        std::vector<size_t> local, const std::tuple<Before...>& before,
                        const std::tuple<After...>& after) {
  const WeightRef& w = *op.call().w[k];
  if (w.quant) {
    const ClQuantWeight& q = op.quant_weight(k);
    std::apply(
        [&](const auto&... b) {
          std::apply(
              [&](const auto&... a) {
                op.launch(quant_kernel(base, q), std::move(global), std::move(local), b..., q.codes, q.scales, q.extra,
                          q.table, q.cols, q.block, q.p0, q.p1, q.f0, a...);
              },
              after);
        },
        before);
    return;
  }
  const cl_mem buffer = op.weight(k);
  std::apply(
      [&](const auto&... b) {
        std::apply(
            [&](const auto&... a) {
              op.launch(typed(base, w.dtype), std::move(global), std::move(local), b..., buffer, a...);
            },
            after);
      },
      before);
}

}  // namespace dgemma::opencl
