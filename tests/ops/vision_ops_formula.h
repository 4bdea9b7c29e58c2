#pragma once
// The vision vocabulary's ops (ops/op.h: rope with 2-D positions, affine,
// pool_cells, scatter_rows, the image-block attention masks) as test cases
// whose expected outputs come from the ops' formulas, written here from the
// contract in ops/op.h and docs/model.md §7 and independent of every backend:
// the device tests (tests/cuda, tests/opencl) run each case on their backend
// and compare. Attention is summed in double over a brute-force visibility
// matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/backend.h"
#include "ops/op.h"
#include "support/test_rng.h"

namespace dgemma::testing {

// One op call with stable addresses for its inputs and weights, and the
// expected output.
struct VisionCase {
  std::deque<Tensor> in;
  std::deque<std::vector<float>> f32_data;
  std::deque<std::vector<uint16_t>> u16_data;
  std::deque<WeightRef> weights;
  OpCall call;
  std::vector<float> want;
  std::vector<int64_t> want_shape;
  double rtol = 0, atol = 0;  // |got - want| <= atol + rtol · max|want|
  std::string what;

  Tensor& input_f32(std::vector<int64_t> shape, Rng& r, float lo, float hi) {
    in.push_back(uniform_tensor(std::move(shape), r, lo, hi));
    call.in.push_back(&in.back());
    return in.back();
  }
  Tensor& input_i32(std::vector<int64_t> shape, std::vector<int32_t> values) {
    in.push_back(Tensor::i32(std::move(shape)));
    in.back().i = std::move(values);
    call.in.push_back(&in.back());
    return in.back();
  }
  // A weight of dtype F32 or BF16; returns its values as fp32.
  std::vector<float> weight(const std::string& name, std::vector<int64_t> shape, DType dt, Rng& r, float lo, float hi) {
    WeightRef w;
    w.name = name;
    w.dtype = dt;
    w.shape = std::move(shape);
    std::vector<float> v = uniform_values(w.numel(), r, lo, hi);
    if (dt == DType::kBF16) {
      std::vector<uint16_t> h(v.size());
      for (size_t k = 0; k < v.size(); ++k) {
        h[k] = f32_to_bf16(v[k]);
        v[k] = bf16_to_f32(h[k]);
      }
      u16_data.push_back(std::move(h));
      w.data = u16_data.back().data();
    } else {
      f32_data.push_back(v);
      w.data = f32_data.back().data();
    }
    weights.push_back(std::move(w));
    call.w.push_back(&weights.back());
    return v;
  }
};

// Runs the case on `b` through an Executor (outputs may stay on the device
// and are brought back) and compares with the formula; `round_bf16`: the
// backend rounds attention's probabilities to bf16 (a dot mode; the case
// rounds the operands, attention_case), for which the tolerance widens.
inline void expect_case(Backend& b, const VisionCase& cs, bool round_bf16 = false) {
  SCOPED_TRACE(cs.what);
  Tensor got;
  OpCall c = cs.call;
  c.out = {&got};
  ASSERT_NO_THROW(Executor(b).run(c));
  got.ensure_host();
  ASSERT_EQ(got.shape, cs.want_shape);
  double max_ref = 0, worst = 0;
  size_t at = 0;
  for (float v : cs.want) max_ref = std::max(max_ref, std::fabs(double(v)));
  for (size_t k = 0; k < cs.want.size(); ++k) {
    const double d = std::fabs(double(got.f[k]) - double(cs.want[k]));
    if (!(d <= worst)) {
      worst = d;
      at = k;
    }
  }
  // The dot mode's probabilities in bf16 (2^-8 relative each).
  const double rtol = round_bf16 ? std::max(cs.rtol, 8e-3) : cs.rtol;
  EXPECT_LE(worst, cs.atol + rtol * max_ref)
      << "element " << at << ": got " << got.f[at] << ", want " << cs.want[at] << " (max |want| " << max_ref << ")";
}

// rope with pos [M, 2] (column, row): channels [0, d/2) rotate with the
// column, [d/2, d) with the row, each half a split-half RoPE of width
// s = d/2 (pair i with i + s/2, ω_i = θ^(-2i/s) in fp32) for i < pairs.
inline VisionCase rope_2d_case(uint32_t seed, int64_t M, int64_t heads, int64_t d, int pairs, double theta) {
  Rng r(seed);
  VisionCase cs;
  cs.call.kind = OpKind::kRope;
  const Tensor& x = cs.input_f32({M, heads, d}, r, -2, 2);
  std::vector<int32_t> pos;
  for (int64_t m = 0; m < M; ++m) {
    pos.push_back(int32_t(r.uniform_int(0, 60)));
    pos.push_back(int32_t(r.uniform_int(0, 60)));
  }
  cs.input_i32({M, 2}, pos);
  cs.call.attrs.rope_pairs = pairs;
  cs.call.attrs.rope_theta = theta;
  cs.want = x.f;
  cs.want_shape = x.shape;
  const int64_t s = d / 2, hs = s / 2;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t part = 0; part < 2; ++part) {
        const float p = float(pos[size_t(2 * m + part)]);
        const float* xi = x.f.data() + (m * heads + h) * d + part * s;
        float* o = cs.want.data() + (m * heads + h) * d + part * s;
        for (int i = 0; i < pairs; ++i) {
          const float w = 1.0f / std::pow(float(theta), float(2 * i) / float(s));
          const float ang = p * w;
          const float a = xi[i], b = xi[i + hs];
          o[i] = a * std::cos(ang) - b * std::sin(ang);
          o[i + hs] = b * std::cos(ang) + a * std::sin(ang);
        }
      }
  cs.rtol = 2e-6;  // the device's cosf and sinf may differ by an ulp
  cs.atol = 1e-6;
  cs.what = "rope 2-D M=" + std::to_string(M) + " heads=" + std::to_string(heads) + " d=" + std::to_string(d) +
            " pairs=" + std::to_string(pairs);
  return cs;
}

// affine: (x - shift) · scale per column, two fp32 roundings: exact.
inline VisionCase affine_case(uint32_t seed, int64_t M, int64_t H, DType dt) {
  Rng r(seed);
  VisionCase cs;
  cs.call.kind = OpKind::kAffine;
  const Tensor& x = cs.input_f32({M, H}, r, -3, 3);
  const std::vector<float> shift = cs.weight("shift", {H}, dt, r, -1, 1);
  const std::vector<float> scale = cs.weight("scale", {H}, dt, r, 0.25f, 4);
  cs.want_shape = {M, H};
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < H; ++h) {
      const float centred = x.f[size_t(m * H + h)] - shift[size_t(h)];
      cs.want.push_back(centred * scale[size_t(h)]);
    }
  cs.what = "affine M=" + std::to_string(M) + " H=" + std::to_string(H) + " " + std::string(dtype_name(dt));
  return cs;
}

// pool_cells: out[c] = Σ over the rows n with cell[n] = c, in row order, of
// fp32(x[n] · scale). Cells in a shuffled order, some empty.
inline VisionCase pool_cells_case(uint32_t seed, int64_t N, int64_t H, int64_t C, float scale) {
  Rng r(seed);
  VisionCase cs;
  cs.call.kind = OpKind::kPoolCells;
  const Tensor& x = cs.input_f32({N, H}, r, -2, 2);
  std::vector<int32_t> cells;
  for (int64_t n = 0; n < N; ++n) cells.push_back(int32_t(r.uniform_int(0, std::max<int64_t>(0, C - 2))));
  cs.input_i32({N}, cells);
  cs.call.attrs.out_rows = C;
  cs.call.attrs.scale = scale;
  cs.want.assign(size_t(C * H), 0.0f);
  cs.want_shape = {C, H};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const float v = x.f[size_t(n * H + h)] * scale;
      cs.want[size_t(cells[size_t(n)] * H + h)] += v;
    }
  cs.rtol = 1e-6;  // another summation order is allowed
  cs.what = "pool_cells N=" + std::to_string(N) + " H=" + std::to_string(H) + " C=" + std::to_string(C);
  return cs;
}

// scatter_rows: base with rows[i] replaced by src[i]: exact.
inline VisionCase scatter_rows_case(uint32_t seed, int64_t T, int64_t n, int64_t H) {
  Rng r(seed);
  VisionCase cs;
  cs.call.kind = OpKind::kScatterRows;
  const Tensor& base = cs.input_f32({T, H}, r, -1, 1);
  const Tensor& src = cs.input_f32({n, H}, r, 2, 3);
  std::vector<int32_t> all(static_cast<size_t>(T)), rows;
  for (int64_t t = 0; t < T; ++t) all[size_t(t)] = int32_t(t);
  for (int64_t i = 0; i < n; ++i) {  // n distinct rows, in no particular order
    const size_t k = size_t(r.uniform_int(int64_t(i), T - 1));
    std::swap(all[size_t(i)], all[k]);
    rows.push_back(all[size_t(i)]);
  }
  cs.input_i32({n}, rows);
  cs.want = base.f;
  cs.want_shape = {T, H};
  for (int64_t i = 0; i < n; ++i)
    std::copy(src.f.begin() + i * H, src.f.begin() + (i + 1) * H, cs.want.begin() + rows[size_t(i)] * H);
  cs.what = "scatter_rows T=" + std::to_string(T) + " n=" + std::to_string(n) + " H=" + std::to_string(H);
  return cs;
}

// affine → pool_cells → scatter_rows chained on one backend, each op taking
// the previous one's output as it left it (on the device, for the residency
// tests of tests/cuda and tests/opencl), and the chain's value from the
// formulas, step by step. Not copyable: the calls point into it.
struct TowerOpsChain {
  VisionCase aff = affine_case(60, 18, 24, DType::kF32);
  VisionCase pool = pool_cells_case(61, 18, 24, 5, 0.5f);
  VisionCase scat = scatter_rows_case(62, 9, 5, 24);
  Tensor x = aff.in[0], base = scat.in[0], a_out, p_out, s_out;

  TowerOpsChain() = default;
  TowerOpsChain(const TowerOpsChain&) = delete;
  TowerOpsChain& operator=(const TowerOpsChain&) = delete;

  void run(Backend& backend) {
    OpCall a = aff.call, p = pool.call, s = scat.call;
    a.in = {&x};
    a.out = {&a_out};
    p.in = {&a_out, p.in[1]};
    p.out = {&p_out};
    s.in = {&base, &p_out, s.in[2]};
    s.out = {&s_out};
    Executor ex(backend);
    ex.run(a);
    ex.run(p);
    ex.run(s);
  }
  bool outputs_on_device() const { return a_out.host_stale && p_out.host_stale && s_out.host_stale; }
  void expect_result() {
    std::vector<float> pooled(5 * 24, 0.0f);
    for (int64_t n = 0; n < 18; ++n)
      for (int64_t h = 0; h < 24; ++h)
        pooled[size_t(pool.in[1].i[size_t(n)] * 24 + h)] += aff.want[size_t(n * 24 + h)] * 0.5f;
    std::vector<float> want = base.f;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t h = 0; h < 24; ++h) want[size_t(scat.in[2].i[size_t(i)] * 24 + h)] = pooled[size_t(i * 24 + h)];
    s_out.ensure_host();
    ASSERT_EQ(s_out.f.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(s_out.f[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << k;
  }
};

// Whether a query sees a key under the block masks (docs/model.md §7.7),
// written out from the contract in ops/op.h.
inline bool block_mask_sees(AttentionMask mask, int64_t window, int32_t qp, int32_t kp, int32_t qb, int32_t kb) {
  const bool same = qb >= 0 && qb == kb;
  if (mask == AttentionMask::kCausalWindowBlocks) return same || (kp <= qp && (window == 0 || qp - kp < window));
  if (mask == AttentionMask::kJaxBlocks) return (kp <= qp || same) && std::abs(int64_t(qp) - kp) < window;
  return true;  // kNone
}

// Attention (scale 1, softmax) in double over the keys the mask lets each
// query see; the keys are the cache's rows (block -1) then the new rows.
// `blocks` empty: mask kNone (the vision tower's). With bf16_operands, q, k
// and v are rounded to bf16 first (a device's dot mode rounds them).
struct AttentionShape {
  int64_t M = 0, Hq = 1, Hk = 1, d = 8, cache = 0;
  AttentionMask mask = AttentionMask::kNone;
  int64_t window = 0;
  std::vector<int32_t> blocks;  // one per new row (block masks)
};
inline VisionCase attention_case(uint32_t seed, const AttentionShape& a, bool bf16_operands = false) {
  Rng r(seed);
  VisionCase cs;
  cs.call.kind = OpKind::kAttention;
  const int64_t M = a.M, Hq = a.Hq, Hk = a.Hk, d = a.d, C = a.cache, S = C + M, G = Hq / Hk;
  const Tensor& q = cs.input_f32({M, Hq, d}, r, -1, 1);
  const Tensor& k = cs.input_f32({M, Hk, d}, r, -1, 1);
  const Tensor& v = cs.input_f32({M, Hk, d}, r, -1, 1);
  std::vector<int32_t> pos(static_cast<size_t>(M)), cpos(static_cast<size_t>(C));
  for (int64_t m = 0; m < M; ++m) pos[size_t(m)] = int32_t(C + m);
  for (int64_t s = 0; s < C; ++s) cpos[size_t(s)] = int32_t(s);
  cs.input_i32({M}, pos);
  cs.input_i32({M}, pos);
  const Tensor *ck = nullptr, *cv = nullptr;
  if (C > 0) {
    ck = &cs.input_f32({C, Hk, d}, r, -1, 1);
    cv = &cs.input_f32({C, Hk, d}, r, -1, 1);
    cs.input_i32({C}, cpos);
  }
  if (!a.blocks.empty()) cs.input_i32({M}, a.blocks);
  cs.call.attrs.mask = a.mask;
  cs.call.attrs.window = int(a.window);
  cs.want_shape = {M, Hq * d};
  cs.want.assign(size_t(M * Hq * d), 0.0f);
  auto operand = [&](float f) { return bf16_operands ? bf16_to_f32(f32_to_bf16(f)) : f; };
  auto key = [&](const Tensor* cache, const Tensor& fresh, int64_t s, int64_t kh, int64_t j) {
    return operand(s < C ? cache->f[size_t((s * Hk + kh) * d + j)] : fresh.f[size_t(((s - C) * Hk + kh) * d + j)]);
  };
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / G;
      const int32_t qb = a.blocks.empty() ? -1 : a.blocks[size_t(m)];
      std::vector<double> score(static_cast<size_t>(S), -INFINITY);
      double mx = -INFINITY;
      for (int64_t s = 0; s < S; ++s) {
        const int32_t kp = s < C ? cpos[size_t(s)] : pos[size_t(s - C)];
        const int32_t kb = s < C || a.blocks.empty() ? -1 : a.blocks[size_t(s - C)];
        if (!block_mask_sees(a.mask, a.window, pos[size_t(m)], kp, qb, kb)) continue;
        double dot = 0;
        for (int64_t j = 0; j < d; ++j)
          dot += double(operand(q.f[size_t((m * Hq + h) * d + j)])) * key(ck, k, s, kh, j);
        score[size_t(s)] = dot;
        mx = std::max(mx, dot);
      }
      if (mx == -INFINITY) continue;  // no visible key: zeros
      double sum = 0;
      std::vector<double> o(static_cast<size_t>(d), 0.0);
      for (int64_t s = 0; s < S; ++s) {
        if (score[size_t(s)] == -INFINITY) continue;
        const double e = std::exp(score[size_t(s)] - mx);
        sum += e;
        for (int64_t j = 0; j < d; ++j) o[size_t(j)] += e * key(cv, v, s, kh, j);
      }
      for (int64_t j = 0; j < d; ++j) cs.want[size_t(m * Hq * d + h * d + j)] = float(o[size_t(j)] / sum);
    }
  cs.rtol = 1e-5;
  cs.atol = 1e-6;
  cs.what = "attention mask=" + std::to_string(int(a.mask)) + " M=" + std::to_string(M) + " Hq=" + std::to_string(Hq) +
            " Hk=" + std::to_string(Hk) + " d=" + std::to_string(d) + " cache=" + std::to_string(C) +
            " window=" + std::to_string(a.window);
  return cs;
}

// The block-mask attention cases: two image blocks, one reaching past the
// window and across the kernels' key tiles (32 keys) and query tiles (16
// rows), text rows between, with and without a cache segment.
inline std::vector<AttentionShape> block_mask_shapes() {
  std::vector<AttentionShape> out;
  for (AttentionMask mask : {AttentionMask::kCausalWindowBlocks, AttentionMask::kJaxBlocks})
    for (int variant = 0; variant < 3; ++variant) {
      AttentionShape a;
      a.mask = mask;
      a.M = variant == 2 ? 75 : 14;
      a.Hk = variant == 1 ? 2 : 1;
      a.Hq = variant == 1 ? 4 : 2;
      a.d = variant == 0 ? 8 : variant == 1 ? 16 : 72;
      a.cache = variant == 1 ? 5 : 0;
      a.window = variant == 2 ? 9 : 3;
      a.blocks.assign(size_t(a.M), -1);
      if (variant == 2) {
        for (int64_t m = 3; m < 48; ++m) a.blocks[size_t(m)] = 0;   // longer than the window, across tiles
        for (int64_t m = 50; m < 70; ++m) a.blocks[size_t(m)] = 7;  // another id, right after text rows
      } else {
        for (int64_t m = 2; m < 7; ++m) a.blocks[size_t(m)] = 0;
        for (int64_t m = 8; m < 13; ++m) a.blocks[size_t(m)] = 1;
      }
      if (mask == AttentionMask::kCausalWindowBlocks && variant == 1) a.window = 0;  // no window: causal only
      out.push_back(a);
    }
  return out;
}

}  // namespace dgemma::testing
