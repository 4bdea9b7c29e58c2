// Row-local ops of the CPU reference backend: embeddings, norms, RoPE,
// activations and elementwise arithmetic.
#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

#include "dgemma/error.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu::reference {

float dot_f32(const float* a, const float* b, int64_t n) {
  // Four independent accumulators in a fixed order: faster than one chain and
  // deterministic.
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// gelu_pytorch_tanh (docs/model.md §1.5). tanh saturates, so large |x| gives x or 0,
// never NaN.
float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

void embedding(const OpCall& c, ThreadPool& pool) {
  if (c.w[0]->quant) return quant_embedding(c, pool, cpu_level_kernels(CpuIsa::kScalar));
  const Tensor& ids = *c.in[0];
  const WeightRef& table = *c.w[0];
  Tensor& out = *c.out[0];
  const int64_t V = table.shape[0], H = table.shape[1];
  for (int32_t id : ids.i)
    if (id < 0 || id >= V)
      throw Error("embedding: token id " + std::to_string(id) + " is out of range [0, " + std::to_string(V) + ")");
  const float s = c.attrs.scale;
  pool.parallel_for(ids.numel(), 8, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      float* o = out.f.data() + m * H;
      table.row_f32(ids.i[size_t(m)], H, o);
      for (int64_t h = 0; h < H; ++h) o[h] *= s;
    }
  });
}

// Expected embedding under softmax(logits) (docs/model.md §2.3, §3.3): in a bf16 run
// (attrs.round_to_bf16) the logits are first cast to bf16 (HF passes them in
// the embedding dtype) and the fp32 softmax is cast to bf16 again; then they
// are multiplied with the table (fp32 accumulation) and scaled.
void soft_embedding(const OpCall& c, ThreadPool& pool) {
  if (c.w[0]->quant)
    return quant_soft_embedding(c, cpu_level_kernels(CpuIsa::kScalar),
                                [&](const OpCall& d) { soft_embedding(d, pool); });
  const Tensor& logits = *c.in[0];
  const WeightRef& table = *c.w[0];
  Tensor& out = *c.out[0];
  const int64_t M = logits.dim(0), V = table.shape[0], H = table.shape[1];
  const bool to_bf16 = c.attrs.round_to_bf16;
  std::vector<float> probs(static_cast<size_t>(M * V));
  pool.parallel_for(M, 1, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const float* z = logits.f.data() + m * V;
      float* p = probs.data() + m * V;
      float mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) {
        p[v] = to_bf16 ? round_bf16(z[v]) : z[v];
        mx = std::max(mx, p[v]);
      }
      float sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += (p[v] = std::exp(p[v] - mx));
      for (int64_t v = 0; v < V; ++v) p[v] = to_bf16 ? round_bf16(p[v] / sum) : p[v] / sum;
    }
  });
  // out[m, h] = Σ_v p[m, v] · table[v, h]; parallel over h-blocks so each
  // table row is converted once per block.
  const float s = c.attrs.scale;
  pool.parallel_for(H, 16, [&](int64_t hb, int64_t he) {
    std::vector<float> row(static_cast<size_t>(H));
    std::vector<float> acc(size_t(M * (he - hb)), 0.0f);
    for (int64_t v = 0; v < V; ++v) {
      table.row_f32(v, H, row.data());
      for (int64_t m = 0; m < M; ++m) {
        const float pv = probs[size_t(m * V + v)];
        if (pv == 0.0f) continue;
        float* a = acc.data() + m * (he - hb);
        for (int64_t h = hb; h < he; ++h) a[h - hb] += pv * row[size_t(h)];
      }
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t h = hb; h < he; ++h) out.f[size_t(m * H + h)] = acc[size_t(m * (he - hb) + h - hb)] * s;
  });
}

// RMSNorm in fp32 (docs/model.md §1.2): x · (mean(x²) + eps)^(-1/2) · w, w used as is.
void rms_norm(const OpCall& c, ThreadPool& pool) {
  const Tensor& x = *c.in[0];
  Tensor& out = *c.out[0];
  const int64_t D = x.dim(-1), R = x.rows();
  const WeightRef* w = c.w.empty() ? nullptr : c.w[0];
  std::vector<float> wf;
  if (w) {
    wf.resize(size_t(D));
    w->row_f32(0, D, wf.data());
  }
  const float eps = c.attrs.eps;
  pool.parallel_for(R, 32, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x.f.data() + r * D;
      float* o = out.f.data() + r * D;
      float ss = dot_f32(xr, xr, D);
      float inv = 1.0f / std::sqrt(ss / float(D) + eps);
      for (int64_t d = 0; d < D; ++d) o[d] = w ? xr[d] * inv * wf[size_t(d)] : xr[d] * inv;
    }
  });
}

// Split-half RoPE (docs/model.md §1.4): pair (i, i+d/2) rotated by pos·ω_i with
// ω_i = θ^(-2i/d) for i < rope_pairs, identity beyond. Angles and cos/sin in
// fp32 as the reference computes them. With 2-D positions (column, row) the
// head splits in two halves of width s = d/2, each such a RoPE of width s
// (ω_i = θ^(-2i/s)): the first turns with the column, the second with the
// row (docs/model.md §7.3).
namespace {

// The split-half rotation of channels [off, off + width) of each head of one
// row by angles p·inv_freq[i], i < pairs.
void rotate_split_half(const float* x, float* out, int64_t heads, int64_t d, int64_t off, int64_t width,
                       const std::vector<float>& inv_freq, float p) {
  const int64_t half = width / 2;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float ang = p * inv_freq[i];
    const float cs = std::cos(ang), sn = std::sin(ang);
    for (int64_t h = 0; h < heads; ++h) {
      const float* xi = x + h * d + off;
      float* o = out + h * d + off;
      const float a = xi[i], bb = xi[int64_t(i) + half];
      o[i] = a * cs - bb * sn;
      o[int64_t(i) + half] = bb * cs + a * sn;
    }
  }
}

}  // namespace

void rope(const OpCall& c, ThreadPool& pool) {
  const Tensor& x = *c.in[0];
  const Tensor& pos = *c.in[1];
  Tensor& out = *c.out[0];
  const int64_t M = x.dim(0), heads = x.dim(1), d = x.dim(2);
  const bool two_d = pos.shape.size() == 2;
  const int64_t width = two_d ? d / 2 : d;  // of each split-half RoPE
  const int pairs = c.attrs.rope_pairs;
  std::vector<float> inv_freq(static_cast<size_t>(pairs));
  for (int i = 0; i < pairs; ++i)
    inv_freq[size_t(i)] = 1.0f / std::pow(float(c.attrs.rope_theta), float(2 * i) / float(width));
  std::copy(x.f.begin(), x.f.begin() + x.numel(), out.f.begin());
  pool.parallel_for(M, 4, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const float* xm = x.f.data() + m * heads * d;
      float* om = out.f.data() + m * heads * d;
      if (!two_d) {
        rotate_split_half(xm, om, heads, d, 0, d, inv_freq, float(pos.i[size_t(m)]));
        continue;
      }
      rotate_split_half(xm, om, heads, d, 0, width, inv_freq, float(pos.i[size_t(2 * m)]));          // column
      rotate_split_half(xm, om, heads, d, width, width, inv_freq, float(pos.i[size_t(2 * m + 1)]));  // row
    }
  });
}

void gelu_glu(const OpCall& c, ThreadPool& pool) {
  const Tensor &g = *c.in[0], &u = *c.in[1];
  Tensor& out = *c.out[0];
  pool.parallel_for(g.numel(), 4096, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) out.f[size_t(k)] = gelu_tanh(g.f[size_t(k)]) * u.f[size_t(k)];
  });
}

void add(const OpCall& c, ThreadPool&) {
  const Tensor &a = *c.in[0], &b = *c.in[1];
  Tensor& out = *c.out[0];
  for (size_t k = 0; k < a.f.size(); ++k) out.f[k] = a.f[k] + b.f[k];
}

void scale(const OpCall& c, ThreadPool&) {
  const float s = c.w[0]->at(0);
  const Tensor& x = *c.in[0];
  Tensor& out = *c.out[0];
  for (size_t k = 0; k < x.f.size(); ++k) out.f[k] = x.f[k] * s;
}

void softcap(const OpCall& c, ThreadPool& pool) {
  const float cap = c.attrs.cap;
  const Tensor& x = *c.in[0];
  Tensor& out = *c.out[0];
  pool.parallel_for(x.numel(), 8192, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) out.f[size_t(k)] = cap * std::tanh(x.f[size_t(k)] / cap);
  });
}

// Rows skip.. of the inputs one after the other, the first take_rows of them
// when set (a plain copy: exact in every dtype).
void concat_rows(const OpCall& c, ThreadPool&) {
  Tensor& out = *c.out[0];
  const bool f32 = c.in[0]->dtype == DType::kF32;
  int64_t dst = 0;
  for (const ConcatRowsPart& p : concat_rows_parts(c)) {  // only parts with elements: storage exists
    const Tensor& src = *c.in[p.input];
    if (f32)
      std::memcpy(out.f.data() + dst, src.f.data() + p.from, size_t(p.count) * 4);
    else
      std::memcpy(out.i.data() + dst, src.i.data() + p.from, size_t(p.count) * 4);
    dst += p.count;
  }
}

}  // namespace dgemma::cpu::reference
