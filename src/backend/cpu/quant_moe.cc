// Routed experts over quantized expert weights (docs/model.md §1.5; contract of
// moe_experts in ops/op.h). Tokens are grouped by expert and each expert runs
// two GEMMs on its rows of the fused weights: gate_up rows [e·2I, e·2I + 2I)
// and down rows [e·H, e·H + H). For ModelOpt checkpoints those rows are the
// per-expert tensors of the file (docs/formats.md §3.2), read in place, so nothing
// is split or copied (docs/model.md §6.3 pitfall 13). Experts run in ascending order, so
// each token sums its expert outputs in ascending expert order, like the
// reference. With int8-dot all experts' tiles are scheduled together
// (int8_dot_grouped_gemm). A second output gets each slot's fp32 activation
// row (ops/op.h), copied before the down GEMM quantizes it.
#include <algorithm>
#include <vector>

#include "core/scratch.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/int8_dot.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu {

void quant_moe_experts(const OpCall& c, ThreadPool& pool, const CpuLevelKernels& level, QuantDot dot,
                       GeluGluRow gelu_glu) {
  if (!gelu_glu)
    gelu_glu = [](const float* g, const float* u, float* o, int64_t n) {
      for (int64_t i = 0; i < n; ++i) o[i] = reference::gelu_tanh(g[i]) * u[i];
    };
  const Tensor &x = *c.in[0], &idx = *c.in[1], &wts = *c.in[2];
  const WeightRef &gu = *c.w[0], &down = *c.w[1];
  Tensor& out = *c.out[0];
  float* acts = c.out.size() > 1 ? c.out[1]->f.data() : nullptr;
  const int64_t M = x.dim(0), H = x.dim(1), K = idx.dim(1), E = gu.shape[0], I = gu.shape[1] / 2;

  // (token, weight) pairs per expert, tokens ascending; row_of[m·K + k] is
  // the pair's row in that order.
  std::vector<int64_t> count(size_t(E), 0), start(size_t(E) + 1, 0);
  for (int32_t e : idx.i) ++count[size_t(e)];
  for (int64_t e = 0; e < E; ++e) start[size_t(e) + 1] = start[size_t(e)] + count[size_t(e)];
  // slot_of is row_of's inverse (only for the second output).
  std::vector<int64_t> fill(start.begin(), start.end() - 1), row_of(size_t(M * K)), slot_of;
  std::vector<int32_t> token(size_t(M * K));
  std::vector<float> weight(size_t(M * K));
  if (acts) slot_of.resize(size_t(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const size_t e = size_t(idx.i[size_t(m * K + k)]);
      row_of[size_t(m * K + k)] = fill[e];
      if (acts) slot_of[size_t(fill[e])] = m * K + k;
      token[size_t(fill[e])] = int32_t(m);
      weight[size_t(fill[e]++)] = wts.f[size_t(m * K + k)];
    }

  std::fill(out.f.begin(), out.f.begin() + out.numel(),
            0.0f);  // not past numel: the checker pads outputs with canaries
  if (dot == QuantDot::kInt8 && gu.quant && down.quant && int8_dot_supported(*gu.quant) &&
      int8_dot_supported(*down.quant)) {
    // All experts at once: the rows of every expert's tokens, grouped by
    // expert, quantized once per projection; each expert's tiles scheduled
    // together with the others'. Per expert bit-identical to the loop below.
    const int64_t rows = start[size_t(E)];
    // Reused per thread across calls (uninitialized: every element is written
    // before it is read); a step's 30 layers otherwise page in and zero ~60 MB
    // each.
    thread_local Scratch<float> xg_s, gg_s, ag_s, yg_s;
    float* xg = xg_s.get(size_t(rows * H));
    float* gg = gg_s.get(size_t(rows * 2 * I));
    float* ag = ag_s.get(size_t(rows * I));
    float* yg = yg_s.get(size_t(rows * H));
    pool.parallel_for(rows, 64, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) std::copy_n(x.f.data() + token[size_t(r)] * H, H, xg + r * H);
    });
    std::vector<Int8Group> gu_groups, dn_groups;
    for (int64_t e = 0; e < E; ++e) {
      if (count[size_t(e)] == 0) continue;
      gu_groups.push_back({e * 2 * I, start[size_t(e)], start[size_t(e) + 1]});
      dn_groups.push_back({e * H, start[size_t(e)], start[size_t(e) + 1]});
    }
    int8_dot_grouped_gemm(*level.int8_dot, gu, gu_groups, 2 * I, xg, rows, gg, 2 * I, pool);
    pool.parallel_for(rows, 16, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) gelu_glu(gg + t * 2 * I, gg + t * 2 * I + I, ag + t * I, I);
    });
    if (acts)
      pool.parallel_for(M * K, 16, [&](int64_t b, int64_t e) {
        for (int64_t s = b; s < e; ++s) std::copy_n(ag + row_of[size_t(s)] * I, I, acts + s * I);
      });
    int8_dot_grouped_gemm(*level.int8_dot, down, dn_groups, H, ag, rows, yg, H, pool);
    // Each token sums its rows in ascending row order, i.e. experts
    // ascending, as the loop below; tokens in parallel.
    pool.parallel_for(M, 8, [&](int64_t b, int64_t e) {
      std::vector<int64_t> rows_m(static_cast<size_t>(K));
      for (int64_t m = b; m < e; ++m) {
        std::copy_n(row_of.begin() + m * K, K, rows_m.begin());
        std::sort(rows_m.begin(), rows_m.end());
        float* o = out.f.data() + m * H;
        for (int64_t r : rows_m) {
          const float wk = weight[size_t(r)];
          const float* yt = yg + r * H;
          for (int64_t h = 0; h < H; ++h) o[h] += wk * yt[h];
        }
      }
    });
    return;
  }
  std::vector<float> xe, g, act, y;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = count[size_t(e)], s0 = start[size_t(e)];
    if (n == 0) continue;
    xe.resize(size_t(n * H));
    for (int64_t t = 0; t < n; ++t) std::copy_n(x.f.data() + token[size_t(s0 + t)] * H, H, xe.data() + t * H);
    g.resize(size_t(n * 2 * I));
    quant_gemm(gu, e * 2 * I, 2 * I, xe.data(), n, g.data(), 2 * I, pool, level, dot);
    act.resize(size_t(n * I));
    for (int64_t t = 0; t < n; ++t) gelu_glu(g.data() + t * 2 * I, g.data() + t * 2 * I + I, act.data() + t * I, I);
    if (acts)
      for (int64_t t = 0; t < n; ++t) std::copy_n(act.data() + t * I, I, acts + slot_of[size_t(s0 + t)] * I);
    y.resize(size_t(n * H));
    quant_gemm(down, e * H, H, act.data(), n, y.data(), H, pool, level, dot);
    for (int64_t t = 0; t < n; ++t) {
      float* o = out.f.data() + token[size_t(s0 + t)] * H;
      const float wk = weight[size_t(s0 + t)];
      const float* yt = y.data() + t * H;
      for (int64_t h = 0; h < H; ++h) o[h] += wk * yt[h];
    }
  }
}

}  // namespace dgemma::cpu
