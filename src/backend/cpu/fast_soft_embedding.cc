// Expected embedding (docs/model.md §2.3, §3.3): out[m] = s · Σ_v p[m, v] · table[v],
// p = softmax over V of the logits (in a bf16 run the logits and the
// probabilities are rounded to bf16, OpAttrs::round_to_bf16).
//
// Sparse rows. After a few denoising steps most canvas rows put nearly all of
// their probability on a handful of tokens, and the dense product (M·V·H
// multiply-adds, 189 GFLOP at real dimensions) mostly adds zeros. Per row, the
// entries with p < τ = kDropMass / V are dropped; their total mass d is at
// most kDropMass, and they change the row by at most d · max_v ‖table[v]‖
// (triangle inequality). When that bound is within kRowTolerance of the
// kept sum's norm, the row is the kept sum (fp32, ascending v); otherwise —
// and whenever more than V / kSparseFraction entries carry mass — the row
// goes to the dense product. The result differs from the dense one by at
// most kRowTolerance relative plus fp32 summation order.
//
// Dense rows: two passes over the logits, row max and sum first, then the
// probabilities chunk by chunk (kChunk vocabulary entries, so the buffer stays
// 8 MB instead of M·V·4 = 268 MB at M = 256), each chunk packed as A and
// multiplied with the matching table rows (read in place, packed per panel on
// the fly). In a bf16 run over a bf16 table the probabilities are bf16 values
// already, so the bf16 dot-product kernel is exact per product and is used
// when present.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu {
namespace {

constexpr double kRowTolerance = 1e-6;
constexpr double kDropMass = 1e-7;
constexpr int64_t kSparseFraction = 32;
constexpr int64_t kChunk = 8192;  // a multiple of kKc (even: pair blocks align)

// max_v ‖table[v]‖₂, once per table (the table's bytes never change while a
// backend holds it; clear_packed_weights() forgets it with the panels).
double max_row_norm(CpuContext& ctx, const WeightRef& table, int64_t V, int64_t H) {
  auto it = ctx.table_max_row_norm.find(table.data);
  if (it != ctx.table_max_row_norm.end()) return it->second;
  const int64_t T = ctx.pool->size();
  std::vector<double> part(size_t(T), 0.0);
  ctx.pool->parallel_for(T, 1, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(H));
    for (int64_t t = b; t < e; ++t) {
      double best = 0;
      for (int64_t v = V * t / T; v < V * (t + 1) / T; ++v) {
        table.row_f32(v, H, row.data());
        double n2 = 0;
        for (const float x : row) n2 += double(x) * double(x);
        best = std::max(best, n2);
      }
      part[size_t(t)] = best;
    }
  });
  const double norm = std::sqrt(*std::max_element(part.begin(), part.end()));
  ctx.table_max_row_norm[table.data] = norm;
  return norm;
}

// The probabilities of one row exactly as the dense path computes them.
void row_probabilities(const IsaKernels& isa, const float* logits, int64_t n, bool to_bf16, float mx, float sum,
                       float* p) {
  std::memcpy(p, logits, size_t(n) * 4);
  if (to_bf16) isa.scale_round_bf16(p, 1.0f, n);
  isa.exp_sum(p, mx, p, n);
  for (int64_t v = 0; v < n; ++v) p[v] /= sum;
  if (to_bf16) isa.scale_round_bf16(p, 1.0f, n);
}

// Tries the sparse sum for one row; writes s · Σ p_v table[v] to `out` and
// returns the kept count, or returns -1 when the row must be dense.
int64_t sparse_row(const IsaKernels& isa, const WeightRef& table, const float* logits, int64_t V, int64_t H,
                   bool to_bf16, float mx, float sum, double table_norm, float s, float* out) {
  const float tau = float(kDropMass / double(V));
  const int64_t limit = V / kSparseFraction;
  // A dense row is told from its logits alone, before any exponential:
  // p_v ≥ τ needs z_v ≥ mx + ln(τ·sum). Counting the logits at least one
  // unit (plus the bf16 rounding of z) above that bound undercounts the
  // kept entries, so a count over the limit means the row is dense.
  const double bound = double(mx) + std::log(double(tau) * double(sum));
  const float above = float(bound + 1.0 + (std::max(std::fabs(bound), std::fabs(double(mx))) + 1.0) / 128.0);
  int64_t surely_kept = 0;
  for (int64_t v = 0; v < V; ++v) surely_kept += logits[v] >= above ? 1 : 0;
  if (surely_kept > limit) return -1;
  float* p = thread_scratch(size_t(V + H));
  float* row = p + V;
  row_probabilities(isa, logits, V, to_bf16, mx, sum, p);
  thread_local std::vector<int32_t> kept;
  kept.clear();
  double dropped = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (p[v] >= tau) {
      if (int64_t(kept.size()) == limit) return -1;
      kept.push_back(int32_t(v));
    } else {
      dropped += double(p[v]);
    }
  }
  std::fill(out, out + H, 0.0f);
  for (const int32_t v : kept) {
    table.row_f32(v, H, row);
    const float pv = p[v];
    for (int64_t h = 0; h < H; ++h) out[h] += pv * row[h];
  }
  double n2 = 0;
  for (int64_t h = 0; h < H; ++h) n2 += double(out[h]) * double(out[h]);
  if (dropped * table_norm > kRowTolerance * std::sqrt(n2)) return -1;
  for (int64_t h = 0; h < H; ++h) out[h] *= s;
  return int64_t(kept.size());
}

void record(SoftEmbeddingStats& st, const std::vector<int64_t>& kept_per_row) {
  ++st.calls;
  for (const int64_t k : kept_per_row) {
    if (k < 0) {
      ++st.rows_dense;
      continue;
    }
    ++st.rows_sparse;
    st.kept_entries += k;
    st.kept_max = std::max(st.kept_max, k);
    int b = 0;
    while (b + 1 < int(st.kept_log2.size()) && (int64_t(2) << b) <= k) ++b;
    ++st.kept_log2[size_t(b)];
  }
}

}  // namespace

namespace fast {

void soft_embedding(const OpCall& c, CpuContext& ctx) {
  if (c.w[0]->quant) return quant_soft_embedding(c, *ctx.level, [&](const OpCall& d) { soft_embedding(d, ctx); });
  const Tensor& logits = *c.in[0];
  const WeightRef& table = *c.w[0];
  Tensor& out = *c.out[0];
  if (table.dtype != DType::kF32 && table.dtype != DType::kBF16) return reference::soft_embedding(c, *ctx.pool);
  const IsaKernels& isa = *ctx.level->dense;
  const int64_t M = logits.dim(0), V = table.shape[0], H = table.shape[1];
  if (M == 0 || H == 0) return;
  if (V == 0) {
    std::fill(out.f.begin(), out.f.begin() + out.numel(), 0.0f);
    return;
  }
  const float s = c.attrs.scale;
  // fp32 probabilities times the table widened exactly (kBF16 panels take
  // fp32 A), or bf16 probabilities times a bf16 table with the bf16 dot.
  const bool to_bf16 = c.attrs.round_to_bf16;
  const bool bf16_table = table.dtype == DType::kBF16;
  const PanelType type = !bf16_table                   ? PanelType::kF32
                         : to_bf16 && isa.pack_a_pairs ? PanelType::kBF16Pairs
                                                       : PanelType::kBF16;
  std::vector<float>& mx = ctx.buf0;
  std::vector<float>& sum = ctx.buf1;
  mx.resize(size_t(M));
  sum.resize(size_t(M));
  // Pass 1: per-row max and Σ e^(z − max) over the (rounded) logits.
  ctx.pool->parallel_for(M, 1, [&](int64_t b, int64_t e) {
    float* row = thread_scratch(size_t(V));
    for (int64_t m = b; m < e; ++m) {
      std::memcpy(row, logits.f.data() + m * V, size_t(V) * 4);
      if (to_bf16) isa.scale_round_bf16(row, 1.0f, V);
      mx[size_t(m)] = isa.row_max(row, V);
      sum[size_t(m)] = isa.exp_sum(row, mx[size_t(m)], row, V);
    }
  });

  // Sparse rows where the bound allows (kept count per row, -1: dense).
  std::vector<int64_t> kept(size_t(M), -1);
  if (ctx.sparse_self_conditioning) {
    const double norm = max_row_norm(ctx, table, V, H);
    ctx.pool->parallel_for(M, 1, [&](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m)
        kept[size_t(m)] = sparse_row(isa, table, logits.f.data() + m * V, V, H, to_bf16, mx[size_t(m)], sum[size_t(m)],
                                     norm, s, out.f.data() + m * H);
    });
    record(ctx.soft_embedding_stats, kept);
  }
  std::vector<int32_t>& dense = ctx.ibuf0;
  dense.clear();
  for (int64_t m = 0; m < M; ++m)
    if (kept[size_t(m)] < 0) dense.push_back(int32_t(m));
  const int64_t D = int64_t(dense.size());
  if (D == 0) return;

  // Dense rows: C[D, H] = P[D, V] · table, chunk by chunk over V. C is the
  // output itself when every row is dense, else a buffer scattered after.
  std::vector<float>& probs = ctx.buf2;
  probs.resize(size_t(D * std::min(V, kChunk)));
  std::vector<float> gathered;
  float* C = out.f.data();
  if (D < M) {
    gathered.resize(size_t(D * H));
    C = gathered.data();
  }
  for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
    const int64_t vc = std::min(kChunk, V - v0);
    ctx.pool->parallel_for(D, 1, [&](int64_t b, int64_t e) {
      for (int64_t d = b; d < e; ++d) {
        const int64_t m = dense[size_t(d)];
        row_probabilities(isa, logits.f.data() + m * V + v0, vc, to_bf16, mx[size_t(m)], sum[size_t(m)],
                          probs.data() + d * vc);
      }
    });
    GemmB g;
    g.type = type;
    g.rows = static_cast<const uint8_t*>(table.data) + size_t(v0 * H) * (bf16_table ? 2 : 4);
    g.ld = H;
    gemm_packed(ctx, probs.data(), vc, nullptr, D, vc, g, H, C, H, v0 > 0);
  }
  // Scale (not past numel: the checker pads outputs with canaries).
  for (int64_t d = 0; d < D; ++d) {
    const float* src = C + d * H;
    float* dst = out.f.data() + int64_t(dense[size_t(d)]) * H;
    for (int64_t h = 0; h < H; ++h) dst[h] = src[h] * s;
  }
}

}  // namespace fast
}  // namespace dgemma::cpu
