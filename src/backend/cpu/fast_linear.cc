// GEMM drivers (threading, A packing) and the GEMM-shaped ops linear and
// router_topk (scores GEMM); soft_embedding is in fast_soft_embedding.cc.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu {

float* thread_scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

// One GEMM with A already packed, split into panel-range × row-range tasks:
// whole panel ranges per thread while there are enough panels (each thread
// then streams only its share of B), rows split too when N is narrow.
static void run_gemm(CpuContext& ctx, const GemmArgs& g) {
  const IsaKernels& isa = *ctx.level->dense;
  const int64_t P = (g.n + kNr - 1) / kNr, MB = (g.m + isa.mr - 1) / isa.mr;
  const int64_t T = ctx.pool->size();
  const int64_t np = std::min(P, T), nm = std::min(MB, std::max<int64_t>(1, T / np));
  ctx.pool->parallel_for(np * nm, 1, [&](int64_t b, int64_t e) {
    // Unpacked B: a block of up to kNcPanels panels is packed per K block.
    float* scratch = g.b.rows ? thread_scratch(size_t(kKc * kNr * kNcPanels)) : nullptr;
    for (int64_t t = b; t < e; ++t) {
      const int64_t pi = t / nm, mi = t % nm;
      GemmRange r;
      r.p0 = P * pi / np;
      r.p1 = P * (pi + 1) / np;
      r.m0 = MB * mi / nm * isa.mr;
      r.m1 = std::min(g.m, MB * (mi + 1) / nm * isa.mr);
      if (r.p0 < r.p1 && r.m0 < r.m1) isa.gemm(g, r, scratch);
    }
  });
}

// Packs rows of x for the B operand's panel type into ctx buffers; returns A.
static const void* pack_a(CpuContext& ctx, const float* x, int64_t ldx, const int32_t* rows, int64_t m, int64_t k,
                          PanelType type) {
  const IsaKernels& isa = *ctx.level->dense;
  const int64_t mr = isa.mr, MB = (m + mr - 1) / mr;
  const bool pairs = type == PanelType::kBF16Pairs;
  const int64_t kk = pairs ? (k + 1) / 2 : k;
  if (pairs)
    ctx.a_pairs.resize(size_t(MB * mr * kk));
  else
    ctx.a_pack.resize(size_t(MB * mr * kk));
  ctx.pool->parallel_for(MB, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k * mr)), [&](int64_t b, int64_t e) {
    const int64_t r0 = b * mr, cnt = std::min(m, e * mr) - r0;
    const float* xs = rows ? x : x + r0 * ldx;
    const int32_t* rs = rows ? rows + r0 : nullptr;
    if (pairs)
      isa.pack_a_pairs(xs, ldx, rs, cnt, k, ctx.a_pairs.data() + r0 * kk);
    else
      isa.pack_a(xs, ldx, rs, cnt, k, ctx.a_pack.data() + r0 * kk);
  });
  return pairs ? static_cast<const void*>(ctx.a_pairs.data()) : static_cast<const void*>(ctx.a_pack.data());
}

void gemm_packed(CpuContext& ctx, const float* x, int64_t ldx, const int32_t* a_rows, int64_t m, int64_t k,
                 const GemmB& b, int64_t n, float* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t r = 0; r < m; ++r) std::fill(c + r * ldc, c + r * ldc + n, 0.0f);
    return;
  }
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = pack_a(ctx, x, ldx, a_rows, m, k, b.type);
  g.b = b;
  g.c = c;
  g.ldc = ldc;
  g.accumulate = accumulate;
  run_gemm(ctx, g);
}

namespace fast {

void linear(const OpCall& c, CpuContext& ctx) {
  if (c.w[0]->quant) return quant_linear(c, *ctx.pool, *ctx.level, ctx.quant_dot());
  const Tensor& x = *c.in[0];
  const WeightRef& w = *c.w[0];
  Tensor& out = *c.out[0];
  if (!fast_readable(w)) return reference::linear(c, *ctx.pool);
  const int64_t M = x.dim(0), K = x.dim(1), N = w.shape[0];
  const PackedWeight& pw =
      ctx.weights.get(w, 1, N, K, panel_type_for(w.dtype, *ctx.level->dense, ctx.bf16_dot), *ctx.pool);
  gemm_packed(ctx, x.f.data(), K, nullptr, M, K, pw.b(), N, out.f.data(), N);
}

// Router (docs/model.md §1.5): the per-row normalization and the top-k are the
// reference's; the scores r·projᵀ are one GEMM over all rows.
void router_topk(const OpCall& c, CpuContext& ctx) {
  const Tensor& x = *c.in[0];
  const WeightRef &scale = *c.w[0], &proj = *c.w[1], &pes = *c.w[2];
  if (!fast_readable(proj)) return reference::router_topk(c, *ctx.pool);
  Tensor &idx = *c.out[0], &wts = *c.out[1];
  const int64_t M = x.dim(0), H = x.dim(1), E = proj.shape[0];
  const int K = c.attrs.top_k;
  std::vector<float> sc(static_cast<size_t>(H)), pe(static_cast<size_t>(E));
  scale.row_f32(0, H, sc.data());
  pes.row_f32(0, E, pe.data());
  const float root = float(1.0 / std::sqrt(double(H)));
  std::vector<float>& r = ctx.buf0;
  std::vector<float>& scores = ctx.buf1;
  r.resize(size_t(M * H));
  scores.resize(size_t(M * E));
  ctx.pool->parallel_for(M, 4, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const float* xr = x.f.data() + m * H;
      float* rr = r.data() + m * H;
      const float inv = 1.0f / std::sqrt(reference::dot_f32(xr, xr, H) / float(H) + c.attrs.eps);
      for (int64_t h = 0; h < H; ++h) rr[h] = xr[h] * inv * sc[size_t(h)] * root;
    }
  });
  // Router weights are fp32-exact even in bf16_dot mode (routing decisions
  // are discrete; keep them on the fp32 path).
  const PackedWeight& pw =
      ctx.weights.get(proj, 1, E, H, panel_type_for(proj.dtype, *ctx.level->dense, false), *ctx.pool);
  gemm_packed(ctx, r.data(), H, nullptr, M, H, pw.b(), E, scores.data(), E);
  ctx.pool->parallel_for(M, 4, [&](int64_t b, int64_t e) {
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t m = b; m < e; ++m) {
      float* p = scores.data() + m * E;
      float mx = -INFINITY;
      for (int64_t ex = 0; ex < E; ++ex) mx = std::max(mx, p[ex]);
      float sum = 0;
      for (int64_t ex = 0; ex < E; ++ex) sum += (p[ex] = std::exp(p[ex] - mx));
      for (int64_t ex = 0; ex < E; ++ex) p[ex] /= sum;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(),
                        [&](int32_t a, int32_t bb) { return p[a] > p[bb] || (p[a] == p[bb] && a < bb); });
      float top = 0;
      for (int k = 0; k < K; ++k) top += p[order[size_t(k)]];
      for (int k = 0; k < K; ++k) {
        const int32_t ex = order[size_t(k)];
        idx.i[size_t(m * K + k)] = ex;
        wts.f[size_t(m * K + k)] = p[ex] / top * pe[size_t(ex)];
      }
    }
  });
}

}  // namespace fast
}  // namespace dgemma::cpu
