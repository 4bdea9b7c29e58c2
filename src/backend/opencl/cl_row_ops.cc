// The row-local ops on the device (docs/opencl.md §3): embedding, rms_norm,
// rope, the elementwise ops and concat_rows, computing like the CPU's scalar
// reference (src/backend/cpu/cpu_elementwise.cc; quantized tables:
// src/backend/cpu/quant_embedding.cc).
#include <cmath>
#include <cstdio>
#include <vector>

#include "backend/opencl/cl_weight_launch.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

void run_embedding(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& ids = *c.in[0];
  const WeightRef& table = *c.w[0];
  const int64_t M = ids.numel(), V = table.shape[0], H = table.shape[1];
  const int n = as_int(M * H, "element count", op);
  if (n == 0) return;
  // Ids the host holds are checked as the reference checks them; ids left on
  // the device by an earlier op give NaN rows where out of range.
  if (!ids.host_stale)
    for (int32_t id : ids.i)
      if (id < 0 || id >= V)
        throw Error("embedding: token id " + std::to_string(id) + " is out of range [0, " + std::to_string(V) + ")");
  const cl_mem in = op.input(0), out = op.output(0);
  const int h = int(H), v = as_int(V, "vocabulary", op);
  const float s = c.attrs.scale;
  if (table.quant) {  // decoded per element, rounded to bf16 in a bf16 run (src/backend/cpu/quant_embedding.cc)
    const int to_bf16 = c.attrs.round_to_bf16 ? 1 : 0;
    launch_with_weight(op, "embedding", 0, {size_t(n)}, {kGroup}, std::tuple(in), std::tuple(out, h, v, to_bf16, s, n));
    return;
  }
  launch_with_weight(op, "embedding", 0, {size_t(n)}, {kGroup}, std::tuple(in), std::tuple(out, h, v, s, n));
}

void run_rms_norm(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& x = *c.in[0];
  const int64_t R = x.rows();
  const int D = as_int(x.dim(-1), "row length", op);
  if (R == 0 || D == 0) return;
  const cl_mem in = op.input(0), out = op.output(0);
  const bool has_w = !c.w.empty();
  const cl_mem w = has_w ? op.weight(0) : in;  // unread without a weight
  const int flag = has_w ? 1 : 0;
  const float eps = c.attrs.eps;
  const size_t group = size_t(op.runtime().norm_group());
  op.launch(typed("rms_norm", has_w ? c.w[0]->dtype : DType::kF32), {size_t(R) * group}, {group}, in, w, flag, out, D,
            eps);
}

// 2-D positions (pos [M, 2], the vision tower's, docs/model.md §7.3): each
// half of a head is a split-half RoPE of width d / 2 with its own position.
void run_rope(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& x = *c.in[0];
  const int64_t M = x.dim(0), heads = x.dim(1), d = x.dim(2);
  if (x.numel() == 0) return;
  const cl_mem in = op.input(0), out = op.output(0);
  const int pairs = c.attrs.rope_pairs;
  const int parts = c.in[1]->shape.size() == 2 ? 2 : 1;
  const int64_t width = d / parts;  // the rotated width
  if (pairs == 0 || width < 2) {    // no rotation: a copy
    op.copy(in, 0, out, 0, size_t(x.numel()) * 4);
    return;
  }
  // The frequencies as the reference computes them (fp32 pow on the host),
  // once per (pairs, width, theta).
  auto inv_freq = [&] {
    std::vector<float> f(static_cast<size_t>(pairs));
    for (int i = 0; i < pairs; ++i)
      f[size_t(i)] = 1.0f / std::pow(float(c.attrs.rope_theta), float(2 * i) / float(width));
    return f;
  };
  char key[96];
  std::snprintf(key, sizeof key, "rope %d %lld %.17g", pairs, static_cast<long long>(width), c.attrs.rope_theta);
  const cl_mem pos = op.input(1), f = op.runtime().constant(key, inv_freq, "rope frequencies of " + op.where());
  const int n = as_int(M * heads * parts * (width / 2), "pair count", op);
  const int h = int(heads), dd = int(d);
  op.launch("rope", {size_t(n)}, {kGroup}, in, pos, f, out, h, dd, pairs, parts, n);
}

void run_elementwise(ClOp& op, const char* kernel) {
  const OpCall& c = op.call();
  const int n = as_int(c.in[0]->numel(), "element count", op);
  if (n == 0) return;
  const cl_mem a = op.input(0), out = op.output(0);
  switch (c.kind) {
    case OpKind::kGeluGlu:
    case OpKind::kAdd: {
      const cl_mem b = op.input(1);
      op.launch(kernel, {size_t(n)}, {kGroup}, a, b, out, n);
      return;
    }
    case OpKind::kScale: {
      const float s = c.w[0]->at(0);
      op.launch(kernel, {size_t(n)}, {kGroup}, a, s, out, n);
      return;
    }
    default: {
      const float cap = c.attrs.cap;
      op.launch(kernel, {size_t(n)}, {kGroup}, a, cap, out, n);
      return;
    }
  }
}

void run_concat_rows(ClOp& op) {
  const std::vector<ConcatRowsPart> parts = concat_rows_parts(op.call());
  if (op.call().out[0]->numel() == 0) return;
  const cl_mem out = op.output(0);
  size_t dst = 0;
  for (const ConcatRowsPart& p : parts) {  // parts with elements only
    op.copy(op.input(p.input), size_t(p.from) * 4, out, dst, size_t(p.count) * 4);
    dst += size_t(p.count) * 4;
  }
}

}  // namespace dgemma::opencl
