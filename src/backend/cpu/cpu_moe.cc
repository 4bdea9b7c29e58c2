// Router and routed experts (docs/model.md §1.5).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu::reference {

// r = RMSNorm_noscale(x) ⊙ scale · H^-1/2; p = softmax(r·projᵀ); top-k by p
// (descending, lower index first on ties, like torch.topk); renormalize the k
// probabilities; multiply by per_expert_scale[idx].
void router_topk(const OpCall& c, ThreadPool& pool) {
  const Tensor& x = *c.in[0];
  const WeightRef &scale = *c.w[0], &proj = *c.w[1], &pes = *c.w[2];
  Tensor &idx = *c.out[0], &wts = *c.out[1];
  const int64_t M = x.dim(0), H = x.dim(1), E = proj.shape[0];
  const int K = c.attrs.top_k;
  std::vector<float> sc(static_cast<size_t>(H)), pe(static_cast<size_t>(E));
  scale.row_f32(0, H, sc.data());
  pes.row_f32(0, E, pe.data());
  const float root = float(1.0 / std::sqrt(double(H)));
  pool.parallel_for(M, 4, [&](int64_t b, int64_t e) {
    std::vector<float> r(static_cast<size_t>(H)), row(static_cast<size_t>(H)), p(static_cast<size_t>(E));
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t m = b; m < e; ++m) {
      const float* xr = x.f.data() + m * H;
      const float inv = 1.0f / std::sqrt(dot_f32(xr, xr, H) / float(H) + c.attrs.eps);
      for (int64_t h = 0; h < H; ++h) r[size_t(h)] = xr[h] * inv * sc[size_t(h)] * root;
      float mx = -INFINITY;
      for (int64_t ex = 0; ex < E; ++ex) {
        proj.row_f32(ex, H, row.data());
        p[size_t(ex)] = dot_f32(r.data(), row.data(), H);
        mx = std::max(mx, p[size_t(ex)]);
      }
      float sum = 0;
      for (int64_t ex = 0; ex < E; ++ex) sum += (p[size_t(ex)] = std::exp(p[size_t(ex)] - mx));
      for (int64_t ex = 0; ex < E; ++ex) p[size_t(ex)] /= sum;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t bb) {
        return p[size_t(a)] > p[size_t(bb)] || (p[size_t(a)] == p[size_t(bb)] && a < bb);
      });
      float top = 0;
      for (int k = 0; k < K; ++k) top += p[size_t(order[size_t(k)])];
      for (int k = 0; k < K; ++k) {
        const int32_t ex = order[size_t(k)];
        idx.i[size_t(m * K + k)] = ex;
        wts.f[size_t(m * K + k)] = p[size_t(ex)] / top * pe[size_t(ex)];
      }
    }
  });
}

// out[m] = Σ_k weight[m,k] · down_e(gelu_tanh(gate_e·x) ⊙ up_e·x), e = idx[m,k];
// gate rows 0..I-1 and up rows I..2I-1 of gate_up[e]. Contributions are summed
// in ascending expert order, as the reference's per-expert loop does. With a
// second output, act[m, k, :] is the gated activation of slot k (ops/op.h).
void moe_experts(const OpCall& c, ThreadPool& pool) {
  if (c.w[0]->quant || c.w[1]->quant) return quant_moe_experts(c, pool, cpu_level_kernels(CpuIsa::kScalar));
  const Tensor &x = *c.in[0], &idx = *c.in[1], &wts = *c.in[2];
  const WeightRef &gu = *c.w[0], &down = *c.w[1];
  Tensor& out = *c.out[0];
  float* acts = c.out.size() > 1 ? c.out[1]->f.data() : nullptr;
  const int64_t M = x.dim(0), H = x.dim(1), K = idx.dim(1), I = gu.shape[1] / 2;
  pool.parallel_for(M, 1, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(std::max(H, I))), act(static_cast<size_t>(I)), y(static_cast<size_t>(H));
    std::vector<int64_t> order(static_cast<size_t>(K));
    for (int64_t m = b; m < e; ++m) {
      const float* xr = x.f.data() + m * H;
      float* o = out.f.data() + m * H;
      std::fill(o, o + H, 0.0f);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t bb) { return idx.i[size_t(m * K + a)] < idx.i[size_t(m * K + bb)]; });
      for (int64_t k : order) {
        const int64_t ex = idx.i[size_t(m * K + k)];
        const float wk = wts.f[size_t(m * K + k)];
        for (int64_t i = 0; i < I; ++i) {
          gu.row_f32(ex * 2 * I + i, H, row.data());
          const float g = dot_f32(xr, row.data(), H);
          gu.row_f32(ex * 2 * I + I + i, H, row.data());
          const float u = dot_f32(xr, row.data(), H);
          act[size_t(i)] = gelu_tanh(g) * u;
        }
        if (acts) std::copy(act.begin(), act.end(), acts + (m * K + k) * I);
        for (int64_t h = 0; h < H; ++h) {
          down.row_f32(ex * H + h, I, row.data());
          y[size_t(h)] = dot_f32(act.data(), row.data(), I);
        }
        for (int64_t h = 0; h < H; ++h) o[h] += wk * y[size_t(h)];
      }
    }
  });
}

}  // namespace dgemma::cpu::reference
