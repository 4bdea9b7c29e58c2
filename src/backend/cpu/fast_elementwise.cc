// Vectorized row-wise ops (rms_norm, gelu_glu, softcap) over the pool.
#include <algorithm>
#include <vector>

#include "backend/cpu/fast_ops.h"

namespace dgemma::cpu::fast {

void rms_norm(const OpCall& c, CpuContext& ctx) {
  const Tensor& x = *c.in[0];
  Tensor& out = *c.out[0];
  const int64_t D = x.dim(-1), R = x.rows();
  const WeightRef* w = c.w.empty() ? nullptr : c.w[0];
  std::vector<float> wf;
  if (w) {
    wf.resize(size_t(D));
    w->row_f32(0, D, wf.data());
  }
  const IsaKernels& isa = *ctx.level->dense;
  const float eps = c.attrs.eps;
  ctx.pool->parallel_for(R, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, D)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      isa.rms_norm_row(x.f.data() + r * D, w ? wf.data() : nullptr, out.f.data() + r * D, D, eps);
  });
}

void gelu_glu(const OpCall& c, CpuContext& ctx) {
  const Tensor &g = *c.in[0], &u = *c.in[1];
  Tensor& out = *c.out[0];
  const IsaKernels& isa = *ctx.level->dense;
  ctx.pool->parallel_for(g.numel(), 16384, [&](int64_t b, int64_t e) {
    isa.gelu_glu(g.f.data() + b, u.f.data() + b, out.f.data() + b, e - b);
  });
}

// The final soft-cap runs over all M·V logits (67 M values per canvas step).
void softcap(const OpCall& c, CpuContext& ctx) {
  const Tensor& x = *c.in[0];
  Tensor& out = *c.out[0];
  const IsaKernels& isa = *ctx.level->dense;
  const float cap = c.attrs.cap;
  ctx.pool->parallel_for(x.numel(), 65536,
                         [&](int64_t b, int64_t e) { isa.softcap(x.f.data() + b, out.f.data() + b, e - b, cap); });
}

}  // namespace dgemma::cpu::fast
