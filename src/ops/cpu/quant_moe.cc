// Routed experts over quantized expert weights (spec §1.5; contract of
// moe_experts in ops/op.h). Tokens are grouped by expert and each expert runs
// two GEMMs on its rows of the fused weights: gate_up rows [e·2I, e·2I + 2I)
// and down rows [e·H, e·H + H). For ModelOpt checkpoints those rows are the
// per-expert tensors of the file (formats.md §3.2), read in place, so nothing
// is split or copied (spec §6.3 pitfall 13). Experts run in ascending order, so
// each token sums its expert outputs in ascending expert order, like the
// reference. With int8-dot all experts' tiles are scheduled together
// (int8_dot_grouped_gemm).
#include <vector>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/int8_dot.h"
#include "ops/cpu/quant_kernels.h"

namespace dgemma::cpu {

void quant_moe_experts(const OpCall& c, ThreadPool& pool, QuantDot dot) {
  const Tensor &x = *c.in[0], &idx = *c.in[1], &wts = *c.in[2];
  const WeightRef &gu = *c.w[0], &down = *c.w[1];
  Tensor& out = *c.out[0];
  const int64_t M = x.dim(0), H = x.dim(1), K = idx.dim(1), E = gu.shape[0], I = gu.shape[1] / 2;

  // (token, weight) pairs per expert, tokens ascending.
  std::vector<int64_t> count(size_t(E), 0), start(size_t(E) + 1, 0);
  for (int32_t e : idx.i) ++count[size_t(e)];
  for (int64_t e = 0; e < E; ++e) start[size_t(e) + 1] = start[size_t(e)] + count[size_t(e)];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  std::vector<int32_t> token(size_t(M * K));
  std::vector<float> weight(size_t(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const size_t e = size_t(idx.i[size_t(m * K + k)]);
      token[size_t(fill[e])] = int32_t(m);
      weight[size_t(fill[e]++)] = wts.f[size_t(m * K + k)];
    }

  std::fill(out.f.begin(), out.f.begin() + out.numel(), 0.0f);  // not past numel: the checker pads outputs with canaries
  if (dot == QuantDot::kInt8 && gu.quant && down.quant && int8_dot_supported(*gu.quant) &&
      int8_dot_supported(*down.quant)) {
    // All experts at once: the rows of every expert's tokens, grouped by
    // expert, quantized once per projection; each expert's tiles scheduled
    // together with the others'. Per expert bit-identical to the loop below.
    const int64_t rows = start[size_t(E)];
    std::vector<float> xg(size_t(rows * H)), gg(size_t(rows * 2 * I)), ag(size_t(rows * I)), yg(size_t(rows * H));
    for (int64_t r = 0; r < rows; ++r) std::copy_n(x.f.data() + token[size_t(r)] * H, H, xg.data() + r * H);
    std::vector<Int8Group> gu_groups, dn_groups;
    for (int64_t e = 0; e < E; ++e) {
      if (count[size_t(e)] == 0) continue;
      gu_groups.push_back({e * 2 * I, start[size_t(e)], start[size_t(e) + 1]});
      dn_groups.push_back({e * H, start[size_t(e)], start[size_t(e) + 1]});
    }
    int8_dot_grouped_gemm(gu, gu_groups, 2 * I, xg.data(), rows, gg.data(), 2 * I, pool);
    pool.parallel_for(rows, 16, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t)
        for (int64_t i = 0; i < I; ++i)
          ag[size_t(t * I + i)] = reference::gelu_tanh(gg[size_t(t * 2 * I + i)]) * gg[size_t(t * 2 * I + I + i)];
    });
    int8_dot_grouped_gemm(down, dn_groups, H, ag.data(), rows, yg.data(), H, pool);
    for (int64_t r = 0; r < rows; ++r) {  // experts ascending, as below
      float* o = out.f.data() + token[size_t(r)] * H;
      const float wk = weight[size_t(r)];
      const float* yt = yg.data() + r * H;
      for (int64_t h = 0; h < H; ++h) o[h] += wk * yt[h];
    }
    return;
  }
  std::vector<float> xe, g, act, y;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = count[size_t(e)], s0 = start[size_t(e)];
    if (n == 0) continue;
    xe.resize(size_t(n * H));
    for (int64_t t = 0; t < n; ++t) std::copy_n(x.f.data() + token[size_t(s0 + t)] * H, H, xe.data() + t * H);
    g.resize(size_t(n * 2 * I));
    quant_gemm(gu, e * 2 * I, 2 * I, xe.data(), n, g.data(), 2 * I, pool, dot);
    act.resize(size_t(n * I));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < I; ++i)
        act[size_t(t * I + i)] = reference::gelu_tanh(g[size_t(t * 2 * I + i)]) * g[size_t(t * 2 * I + I + i)];
    y.resize(size_t(n * H));
    quant_gemm(down, e * H, H, act.data(), n, y.data(), H, pool, dot);
    for (int64_t t = 0; t < n; ++t) {
      float* o = out.f.data() + token[size_t(s0 + t)] * H;
      const float wk = weight[size_t(s0 + t)];
      const float* yt = y.data() + t * H;
      for (int64_t h = 0; h < H; ++h) o[h] += wk * yt[h];
    }
  }
}

}  // namespace dgemma::cpu
