#pragma once
// Private to the model layer: how the passes of DiffusionGemma (diffusion_gemma.cc,
// decode_sample.cc, decode_batch.cc) issue their op calls.
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "model/workspace.h"
#include "ops/backend.h"

namespace dgemma {

// Runs one op with one output, written into the workspace slot of its site,
// and returns that slot (valid until the site runs again: next layer).
struct OpSite {
  Executor& ex;
  int layer;
  Pass pass;
  int step;
  Workspace& ws;

  Tensor& run(OpKind kind, std::string_view site, std::vector<const Tensor*> in, std::vector<const WeightRef*> w,
              OpAttrs attrs = {}) {
    Tensor& out = ws.slot(site);
    run_into(kind, site, std::move(in), std::move(w), {&out}, attrs);
    return out;
  }
  // The same with the outputs given (an op with more than one).
  void run_into(OpKind kind, std::string_view site, std::vector<const Tensor*> in, std::vector<const WeightRef*> w,
                std::vector<Tensor*> out, OpAttrs attrs = {}) {
    OpCall c;
    c.kind = kind;
    c.site = site;
    c.layer = layer;
    c.pass = pass;
    c.step = step;
    c.in = std::move(in);
    c.w = std::move(w);
    c.out = std::move(out);
    c.attrs = attrs;
    ex.run(c);
  }
  Tensor& norm(std::string_view site, const Tensor& x, const WeightRef* w, float eps) {
    OpAttrs a;
    a.eps = eps;
    if (w) return run(OpKind::kRmsNorm, site, {&x}, {w}, a);
    return run(OpKind::kRmsNorm, site, {&x}, {}, a);
  }
  Tensor& linear(std::string_view site, const Tensor& x, const WeightRef& w) {
    return run(OpKind::kLinear, site, {&x}, {&w});
  }
  Tensor& add(std::string_view site, const Tensor& a, const Tensor& b) { return run(OpKind::kAdd, site, {&a, &b}, {}); }
};

// Positions start .. start + n - 1 as an I32 tensor.
inline Tensor positions_tensor(int64_t start, int64_t n) {
  Tensor p = Tensor::i32({n});
  for (int64_t k = 0; k < n; ++k) p.i[size_t(k)] = int32_t(start + k);
  return p;
}

}  // namespace dgemma
