// Routed experts as grouped GEMMs (docs/model.md §1.5). Tokens are grouped by expert
// (M·k rows over E experts: ~16 rows per expert for a 256-token canvas with
// top-8 of 128), then per expert one fused gate/up GEMM (2I outputs: gate rows
// 0..I-1, up rows I..2I-1 of gate_up[e]), gelu_tanh(gate)·up, and the down
// GEMM, all experts' tiles scheduled together over the pool. Each token's
// output is the weighted sum of its experts' rows in ascending expert order,
// as in the reference; within a row only the fp32 summation order of the
// GEMMs differs from it. A second output gets each slot's activation row
// (ops/op.h), copied from the fp32 rows before they are packed for the down GEMM.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu::fast {
namespace {

struct ExpertTask {
  int32_t expert;
  int32_t p0, p1;  // panels
};

// Runs `tasks` over the pool with dynamic scheduling (experts have different
// row counts, so a static split would leave threads idle).
template <class Fn>
void run_dynamic(ThreadPool& pool, int64_t count, const Fn& fn) {
  std::atomic<int64_t> next{0};
  pool.parallel_for(pool.size(), 1, [&](int64_t, int64_t) {
    for (int64_t t = next.fetch_add(1); t < count; t = next.fetch_add(1)) fn(t);
  });
}

// Panels per task: about 8 (a 256-column L2 block) but at least enough tasks
// for every thread.
std::vector<ExpertTask> make_tasks(const std::vector<int64_t>& count, int64_t panels, int threads) {
  int64_t active = 0;
  for (int64_t c : count) active += c > 0;
  int64_t chunk = kNcPanels;
  while (chunk > 1 && active * ((panels + chunk - 1) / chunk) < 4 * threads) chunk /= 2;
  std::vector<ExpertTask> tasks;
  for (size_t e = 0; e < count.size(); ++e) {
    if (count[e] == 0) continue;
    for (int64_t p = 0; p < panels; p += chunk)
      tasks.push_back({int32_t(e), int32_t(p), int32_t(std::min(panels, p + chunk))});
  }
  return tasks;
}

}  // namespace

void moe_experts(const OpCall& c, CpuContext& ctx) {
  if (c.w[0]->quant || c.w[1]->quant)
    return quant_moe_experts(c, *ctx.pool, *ctx.level, ctx.quant_dot(), ctx.level->dense->gelu_glu);
  const Tensor &x = *c.in[0], &idx = *c.in[1], &wts = *c.in[2];
  const WeightRef &gu = *c.w[0], &down = *c.w[1];
  Tensor& out = *c.out[0];
  if (!fast_readable(gu) || !fast_readable(down)) return reference::moe_experts(c, *ctx.pool);
  const IsaKernels& isa = *ctx.level->dense;
  ThreadPool& pool = *ctx.pool;
  const int64_t M = x.dim(0), H = x.dim(1), K = idx.dim(1), E = gu.shape[0], I = gu.shape[1] / 2;
  const int64_t mr = isa.mr;
  const PanelType gu_type = panel_type_for(gu.dtype, isa, ctx.bf16_dot);
  const PanelType dn_type = panel_type_for(down.dtype, isa, ctx.bf16_dot);
  const PackedWeight& pgu = ctx.weights.get(gu, E, 2 * I, H, gu_type, pool);
  const PackedWeight& pdn = ctx.weights.get(down, E, H, I, dn_type, pool);

  // Group (token, slot) pairs by expert; tokens ascending within an expert.
  std::vector<int64_t> count(size_t(E), 0), start(size_t(E) + 1, 0), ablock(size_t(E) + 1, 0);
  for (int64_t s = 0; s < M * K; ++s) ++count[size_t(idx.i[size_t(s)])];
  for (int64_t e = 0; e < E; ++e) {
    start[size_t(e) + 1] = start[size_t(e)] + count[size_t(e)];
    ablock[size_t(e) + 1] = ablock[size_t(e)] + (count[size_t(e)] + mr - 1) / mr * mr;  // padded rows
  }
  const int64_t rows = start[size_t(E)], padded = ablock[size_t(E)];
  std::vector<int32_t>& token = ctx.ibuf0;  // row → token
  std::vector<int32_t>& where = ctx.ibuf1;  // slot (m, k) → row
  token.resize(size_t(rows));
  where.resize(size_t(M * K));
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = idx.i[size_t(m * K + k)], r = fill[size_t(e)]++;
        token[size_t(r)] = int32_t(m);
        where[size_t(m * K + k)] = int32_t(r);
      }
  }

  const bool gu_pairs = gu_type == PanelType::kBF16Pairs, dn_pairs = dn_type == PanelType::kBF16Pairs;
  const int64_t hk = gu_pairs ? (H + 1) / 2 : H, ik = dn_pairs ? (I + 1) / 2 : I;
  // Packed A per expert (gathered token rows), gate/up outputs, activations.
  std::vector<float>& a_f = ctx.a_pack;
  std::vector<uint32_t>& a_p = ctx.a_pairs;
  std::vector<float>& gup = ctx.buf0;  // [rows][2I]
  std::vector<float>& act = ctx.buf1;  // [rows][I], then packed for down
  std::vector<float>& y = ctx.buf2;    // [rows][H]
  gup.resize(size_t(rows * 2 * I));
  y.resize(size_t(rows * H));

  auto pack_rows = [&](const float* src, int64_t ld, const int32_t* rows_idx, int64_t e, int64_t k, bool pairs,
                       int64_t kstride) {
    const int64_t cnt = count[size_t(e)];
    if (pairs)
      isa.pack_a_pairs(src, ld, rows_idx, cnt, k, a_p.data() + ablock[size_t(e)] * kstride);
    else
      isa.pack_a(src, ld, rows_idx, cnt, k, a_f.data() + ablock[size_t(e)] * kstride);
  };
  auto gemm_task = [&](const ExpertTask& t, const PackedWeight& pw, bool pairs, int64_t k, int64_t kstride, float* cbuf,
                       int64_t n) {
    const int64_t e = t.expert;
    GemmArgs g;
    g.m = count[size_t(e)];
    g.n = n;
    g.k = k;
    g.a = pairs ? static_cast<const void*>(a_p.data() + ablock[size_t(e)] * kstride)
                : static_cast<const void*>(a_f.data() + ablock[size_t(e)] * kstride);
    g.b = pw.b(e);
    g.c = cbuf + start[size_t(e)] * n;
    g.ldc = n;
    GemmRange r;
    r.p0 = t.p0;
    r.p1 = t.p1;
    r.m0 = 0;
    r.m1 = g.m;
    isa.gemm(g, r, nullptr);
  };

  // 1. Gather + pack x rows per expert.
  if (gu_pairs)
    a_p.resize(size_t(padded * hk));
  else
    a_f.resize(size_t(padded * hk));
  run_dynamic(pool, E, [&](int64_t e) {
    if (count[size_t(e)]) pack_rows(x.f.data(), H, token.data() + start[size_t(e)], e, H, gu_pairs, hk);
  });
  // 2. gate/up GEMM (N = 2I, K = H).
  const std::vector<ExpertTask> t1 = make_tasks(count, pgu.panels, pool.size());
  run_dynamic(pool, int64_t(t1.size()),
              [&](int64_t t) { gemm_task(t1[size_t(t)], pgu, gu_pairs, H, hk, gup.data(), 2 * I); });
  // 3. act = gelu_tanh(gate) · up, then packed as the down GEMM's A.
  act.resize(size_t(rows * I));
  pool.parallel_for(rows, 8, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* g = gup.data() + r * 2 * I;
      isa.gelu_glu(g, g + I, act.data() + r * I, I);
    }
  });
  if (c.out.size() > 1) {
    float* acts = c.out[1]->f.data();
    pool.parallel_for(M * K, 16, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) std::copy_n(act.data() + int64_t(where[size_t(s)]) * I, I, acts + s * I);
    });
  }
  if (dn_pairs)
    a_p.resize(size_t(padded * ik));
  else
    a_f.resize(size_t(padded * ik));
  run_dynamic(pool, E, [&](int64_t e) {
    if (count[size_t(e)]) pack_rows(act.data() + start[size_t(e)] * I, I, nullptr, e, I, dn_pairs, ik);
  });
  // 4. down GEMM (N = H, K = I).
  const std::vector<ExpertTask> t2 = make_tasks(count, pdn.panels, pool.size());
  run_dynamic(pool, int64_t(t2.size()),
              [&](int64_t t) { gemm_task(t2[size_t(t)], pdn, dn_pairs, I, ik, y.data(), H); });
  // 5. out[m] = Σ_k weight[m,k]·y[row(m,k)], experts ascending (the reference's order).
  pool.parallel_for(M, 4, [&](int64_t b, int64_t e) {
    int64_t order[64];
    std::vector<int64_t> big;
    for (int64_t m = b; m < e; ++m) {
      int64_t* ord = order;
      if (K > 64) {
        big.resize(size_t(K));
        ord = big.data();
      }
      for (int64_t k = 0; k < K; ++k) ord[k] = k;
      std::sort(ord, ord + K,
                [&](int64_t a, int64_t bb) { return idx.i[size_t(m * K + a)] < idx.i[size_t(m * K + bb)]; });
      float* o = out.f.data() + m * H;
      std::fill(o, o + H, 0.0f);
      for (int64_t j = 0; j < K; ++j) {
        const int64_t k = ord[j];
        const float wk = wts.f[size_t(m * K + k)];
        const float* yr = y.data() + int64_t(where[size_t(m * K + k)]) * H;
        for (int64_t h = 0; h < H; ++h) o[h] += wk * yr[h];
      }
    }
  });
}

}  // namespace dgemma::cpu::fast
