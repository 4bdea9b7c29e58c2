// The vision tower's part of the op vocabulary on the CPU backend
// (docs/model.md §7): rope with 2-D positions, affine, pool_cells,
// scatter_rows and the image-blocks attention masks. The reference kernels
// against formulas written here (the masks against a brute-force matrix of
// the three rules), the fast levels against the reference, and malformed
// calls rejected with the problem named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "dgemma/error.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

Tensor i32(std::vector<int64_t> shape, std::vector<int32_t> v) {
  Tensor t = Tensor::i32(std::move(shape));
  t.i = std::move(v);
  return t;
}

CpuBackendOptions at_level(CpuIsa isa, bool bf16_dot = false) {
  CpuBackendOptions o;
  o.threads = 2;
  o.isa = isa;
  o.bf16_dot = bf16_dot;
  return o;
}

Tensor run(Backend& b, OpKind kind, std::vector<const Tensor*> in, std::vector<const WeightRef*> w = {},
           OpAttrs a = {}) {
  Tensor out;
  OpCall c;
  c.kind = kind;
  c.in = std::move(in);
  c.w = std::move(w);
  c.out = {&out};
  c.attrs = a;
  Executor(b).run(c);
  return out;
}

Tensor run_reference(OpKind kind, std::vector<const Tensor*> in, std::vector<const WeightRef*> w = {}, OpAttrs a = {}) {
  CpuBackend scalar(at_level(CpuIsa::kScalar));
  return run(scalar, kind, std::move(in), std::move(w), a);
}

// The fast levels this CPU runs.
std::vector<CpuIsa> fast_levels() {
  std::vector<CpuIsa> v;
  for (CpuIsa l : {CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmx})
    if (int(l) <= int(detected_isa())) v.push_back(l);
  return v;
}

// Runs the call and expects an Error whose text holds `want`.
void expect_rejected(OpKind kind, std::vector<const Tensor*> in, std::vector<const WeightRef*> w, OpAttrs a,
                     const std::string& want) {
  try {
    run_reference(kind, std::move(in), std::move(w), a);
    ADD_FAILURE() << "accepted: " << want;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

WeightRef f32_weight(const char* name, std::vector<int64_t> shape, const std::vector<float>& v) {
  WeightRef w;
  w.name = name;
  w.dtype = DType::kF32;
  w.shape = std::move(shape);
  w.data = v.data();
  return w;
}

// ---- rope with 2-D positions -----------------------------------------------------------

// x[M, heads, d] rotated in double: channel i < pairs of each half of width
// s = d/2 pairs with i + s/2, ω_i = θ^(-2i/s); the first half turns with the
// column, the second with the row.
std::vector<double> rope_2d_formula(const Tensor& x, const Tensor& pos, int pairs, double theta) {
  const int64_t M = x.dim(0), heads = x.dim(1), d = x.dim(2), s = d / 2, half = s / 2;
  std::vector<double> out(x.f.begin(), x.f.end());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < heads; ++h)
      for (int axis = 0; axis < 2; ++axis) {
        const double p = pos.i[size_t(2 * m + axis)];
        const int64_t base = (m * heads + h) * d + axis * s;
        for (int i = 0; i < pairs; ++i) {
          const double ang = p * std::pow(theta, -2.0 * i / double(s));
          const double a = x.f[size_t(base + i)], b = x.f[size_t(base + i + half)];
          out[size_t(base + i)] = a * std::cos(ang) - b * std::sin(ang);
          out[size_t(base + i + half)] = b * std::cos(ang) + a * std::sin(ang);
        }
      }
  return out;
}

TEST(VisionOps, Rope2dRotatesTheHalvesWithColumnAndRow) {
  Rng rng(71);
  // d = 72: the 26B tower's head (s = 36, 18 pairs per half); d = 8: golden V's.
  for (const auto& [d, pairs] : std::vector<std::pair<int64_t, int>>{{72, 18}, {8, 2}, {16, 3}}) {
    const int64_t M = 11, heads = 3;
    Tensor x = uniform_tensor({M, heads, d}, rng, -2, 2);
    std::vector<int32_t> p;
    for (int64_t m = 0; m < M; ++m) {
      p.push_back(int32_t(m % 5 * 7));   // column
      p.push_back(int32_t(m / 5 * 13));  // row
    }
    Tensor pos = i32({M, 2}, p);
    OpAttrs a;
    a.rope_pairs = pairs;
    a.rope_theta = 100.0;
    const Tensor got = run_reference(OpKind::kRope, {&x, &pos}, {}, a);
    const std::vector<double> want = rope_2d_formula(x, pos, pairs, a.rope_theta);
    ASSERT_EQ(got.shape, x.shape);
    for (size_t e = 0; e < want.size(); ++e)
      ASSERT_NEAR(got.f[e], want[e], 2e-5 * (1 + std::fabs(want[e]))) << "d " << d << " element " << e;
    // Channels past the rotated pairs stay as they are, bit for bit.
    const int64_t s = d / 2;
    for (int64_t r = 0; r < M * heads; ++r)
      for (int64_t c = 0; c < d; ++c)
        if (c % (s / 2) >= pairs) {
          ASSERT_EQ(got.f[size_t(r * d + c)], x.f[size_t(r * d + c)]) << "channel " << c;
        }
    // Each half is the 1-D kernel of width s at that half's position, bit
    // for bit (the same float angles and cos/sin).
    for (int axis = 0; axis < 2; ++axis) {
      Tensor part = Tensor::f32({M, heads, s});
      std::vector<int32_t> p1;
      for (int64_t r = 0; r < M * heads; ++r) std::copy_n(x.f.begin() + r * d + axis * s, s, part.f.begin() + r * s);
      for (int64_t m = 0; m < M; ++m) p1.push_back(p[size_t(2 * m + axis)]);
      Tensor pos1 = i32({M}, p1);
      const Tensor one = run_reference(OpKind::kRope, {&part, &pos1}, {}, a);
      for (int64_t r = 0; r < M * heads; ++r)
        for (int64_t c = 0; c < s; ++c)
          ASSERT_EQ(got.f[size_t(r * d + axis * s + c)], one.f[size_t(r * s + c)]) << "axis " << axis;
    }
    // The fast levels run the same kernel.
    for (CpuIsa l : fast_levels()) {
      CpuBackend fast(at_level(l));
      EXPECT_EQ(run(fast, OpKind::kRope, {&x, &pos}, {}, a).f, got.f) << isa_name(l);
    }
  }
}

TEST(VisionOps, Rope2dRejectsBadShapes) {
  Tensor x6 = Tensor::f32({2, 1, 6}), x8 = Tensor::f32({2, 1, 8});
  Tensor pos = i32({2, 2}, {0, 0, 1, 1}), pos3 = i32({2, 3}, {0, 0, 0, 1, 1, 1});
  OpAttrs a;
  a.rope_theta = 100.0;
  a.rope_pairs = 1;
  expect_rejected(OpKind::kRope, {&x6, &pos}, {}, a, "head dim % 4 == 0");
  expect_rejected(OpKind::kRope, {&x8, &pos3}, {}, a, "positions [2, 3] do not match the 2 rows of x");
  a.rope_pairs = 3;  // > d/4
  expect_rejected(OpKind::kRope, {&x8, &pos}, {}, a, "invalid rotated pair count 3 for head dim 8");
}

// ---- affine, pool_cells, scatter_rows ----------------------------------------------------

TEST(VisionOps, AffineSubtractsThenMultipliesPerColumn) {
  Rng rng(5);
  const int64_t M = 9, H = 13;
  Tensor x = uniform_tensor({M, H}, rng, 0, 1);
  std::vector<float> shift = uniform_values(H, rng, -1, 1), scale = uniform_values(H, rng, 0.5f, 3);
  WeightRef ws = f32_weight("std_bias", {H}, shift), wk = f32_weight("std_scale", {H}, scale);
  const Tensor got = run_reference(OpKind::kAffine, {&x}, {&ws, &wk});
  ASSERT_EQ(got.shape, x.shape);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < H; ++h) {
      const float centred = x.f[size_t(m * H + h)] - shift[size_t(h)];  // two float roundings
      ASSERT_EQ(got.f[size_t(m * H + h)], centred * scale[size_t(h)]) << m << "," << h;
    }
  // The patch input 2·(p - 0.5) with bf16 weights (0.5 and 2 are exact).
  std::vector<uint16_t> half(size_t(H), f32_to_bf16(0.5f)), two(size_t(H), f32_to_bf16(2.0f));
  WeightRef bh = ws, bt = wk;
  bh.dtype = bt.dtype = DType::kBF16;
  bh.data = half.data();
  bt.data = two.data();
  for (CpuIsa l : fast_levels()) {
    CpuBackend fast(at_level(l));
    const Tensor patch = run(fast, OpKind::kAffine, {&x}, {&bh, &bt});
    for (size_t e = 0; e < x.f.size(); ++e) ASSERT_EQ(patch.f[e], 2.0f * (x.f[e] - 0.5f)) << isa_name(l);
  }
}

TEST(VisionOps, PoolCellsSumsScaledRowsInRowOrder) {
  Rng rng(9);
  const int64_t N = 24, H = 70, C = 5;
  Tensor x = uniform_tensor({N, H}, rng, -3, 3);
  std::vector<int32_t> cells(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) cells[size_t(n)] = int32_t((n * 7) % (C - 1));  // cell C-1 stays empty
  Tensor cell = i32({N}, cells);
  OpAttrs a;
  a.out_rows = C;
  a.scale = 1.0f / 9.0f;  // 1/k² of a 3×3 pool: not exact in binary
  const Tensor got = run_reference(OpKind::kPoolCells, {&x, &cell}, {}, a);
  ASSERT_EQ(got.shape, (std::vector<int64_t>{C, H}));
  std::vector<float> want(size_t(C * H), 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const float term = x.f[size_t(n * H + h)] * a.scale;
      want[size_t(cells[size_t(n)] * H + h)] += term;
    }
  EXPECT_EQ(got.f, want);
  for (CpuIsa l : fast_levels()) {
    CpuBackend fast(at_level(l));
    EXPECT_EQ(run(fast, OpKind::kPoolCells, {&x, &cell}, {}, a).f, want) << isa_name(l);
  }
}

TEST(VisionOps, ScatterRowsReplacesTheNamedRows) {
  Rng rng(3);
  Tensor base = uniform_tensor({6, 4}, rng, -1, 1), src = uniform_tensor({2, 4}, rng, 5, 6);
  Tensor rows = i32({2}, {4, 1});
  const Tensor got = run_reference(OpKind::kScatterRows, {&base, &src, &rows});
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t h = 0; h < 4; ++h) {
      const float want = r == 4 ? src.f[size_t(h)] : r == 1 ? src.f[size_t(4 + h)] : base.f[size_t(r * 4 + h)];
      ASSERT_EQ(got.f[size_t(r * 4 + h)], want) << r << "," << h;
    }
}

TEST(VisionOps, RowOpsRejectBadCalls) {
  Tensor x = Tensor::f32({3, 4}), x3 = Tensor::f32({3, 4, 1});
  std::vector<float> v4(4, 1.0f), v5(5, 1.0f);
  WeightRef w4 = f32_weight("std_scale", {4}, v4), w5 = f32_weight("std_bias", {5}, v5);
  expect_rejected(OpKind::kAffine, {&x}, {&w5, &w4}, {}, "shift weight std_bias has shape [5], expected [4]");
  expect_rejected(OpKind::kAffine, {&x3}, {&w4, &w4}, {}, "x must have rank 2");
  Tensor cells = i32({3}, {0, 3, 1}), two = i32({2}, {0, 1});
  OpAttrs a;
  a.out_rows = 3;
  expect_rejected(OpKind::kPoolCells, {&x, &cells}, {}, a, "cell 3 outside [0, 3)");
  expect_rejected(OpKind::kPoolCells, {&x, &two}, {}, a, "cell count does not match the rows of x");
  a.out_rows = 0;
  expect_rejected(OpKind::kPoolCells, {&x, &cells}, {}, a, "out_rows must be positive");
  Tensor src = Tensor::f32({2, 4}), wide = Tensor::f32({2, 5});
  Tensor twice = i32({2}, {1, 1}), outside = i32({2}, {0, 3});
  expect_rejected(OpKind::kScatterRows, {&x, &src, &twice}, {}, {}, "row 1 given twice");
  expect_rejected(OpKind::kScatterRows, {&x, &src, &outside}, {}, {}, "row 3 outside [0, 3)");
  expect_rejected(OpKind::kScatterRows, {&x, &wide, &two}, {}, {}, "differ in width");
}

// ---- the image-blocks attention masks ------------------------------------------------------

// One attention call: C cache rows at positions 0..C-1 (the first `skip` left
// out), then M new rows at positions C..C+M-1, which are the queries. Image
// blocks are position ranges [begin, end) of new rows.
struct BlockCase {
  int64_t C = 0, skip = 0, M = 0, Hq = 2, Hk = 1, d = 8;
  int window = 0;
  std::vector<std::pair<int64_t, int64_t>> blocks;
};

enum class Rule { kCausal, kHf, kJax };

// The brute-force mask: whether query position i sees key position j, from
// the rules as stated (docs/model.md §7.7), with [s, e) the query's block.
bool oracle(Rule rule, const BlockCase& bc, int64_t i, int64_t j, bool key_is_new) {
  int64_t s = 0, e = 0;
  for (const auto& [b, en] : bc.blocks)
    if (i >= b && i < en) s = b, e = en;
  const bool in_block = key_is_new && j >= s && j < e;  // cache keys belong to no block
  const int64_t W = bc.window;
  const bool causal_window = j <= i && (W == 0 || j > i - W);
  switch (rule) {
    case Rule::kCausal: return causal_window;
    case Rule::kHf: return causal_window || in_block;
    case Rule::kJax: return (j <= i || in_block) && j > i - W && j < i + W;
  }
  return false;
}

struct Built {
  Tensor q, k, v, qpos, kpos, ck, cv, cpos, blocks;
  std::vector<const Tensor*> in;
  OpAttrs a;
};

void build(const BlockCase& bc, Rule rule, uint32_t seed, Built& b) {
  Rng rng(seed);
  // Scores of a few units whatever d (the bf16 dot mode's rounding of Q and
  // K moves them by about 2^-8 relative).
  const float qk = 3.0f / std::sqrt(float(bc.d));
  b.q = uniform_tensor({bc.M, bc.Hq, bc.d}, rng, -qk, qk);
  b.k = uniform_tensor({bc.M, bc.Hk, bc.d}, rng, -qk, qk);
  b.v = uniform_tensor({bc.M, bc.Hk, bc.d}, rng, -1, 1);
  std::vector<int32_t> pos(size_t(bc.M)), ids(size_t(bc.M), -1), cp(size_t(bc.C));
  for (int64_t m = 0; m < bc.M; ++m) pos[size_t(m)] = int32_t(bc.C + m);
  for (int64_t c = 0; c < bc.C; ++c) cp[size_t(c)] = int32_t(c);
  for (size_t n = 0; n < bc.blocks.size(); ++n)
    for (int64_t p = bc.blocks[n].first; p < bc.blocks[n].second; ++p) ids[size_t(p - bc.C)] = int32_t(n);
  b.qpos = i32({bc.M}, pos);
  b.kpos = i32({bc.M}, pos);
  b.in = {&b.q, &b.k, &b.v, &b.qpos, &b.kpos};
  if (bc.C > 0) {
    b.ck = uniform_tensor({bc.C, bc.Hk, bc.d}, rng, -qk, qk);
    b.cv = uniform_tensor({bc.C, bc.Hk, bc.d}, rng, -1, 1);
    b.cpos = i32({bc.C}, cp);
    b.in.insert(b.in.end(), {&b.ck, &b.cv, &b.cpos});
    b.a.skip_rows = bc.skip;
  }
  b.a.window = bc.window;
  b.a.mask = rule == Rule::kCausal ? AttentionMask::kCausalWindow
             : rule == Rule::kHf   ? AttentionMask::kCausalWindowBlocks
                                   : AttentionMask::kJaxBlocks;
  if (rule != Rule::kCausal) {
    b.blocks = i32({bc.M}, ids);
    b.in.push_back(&b.blocks);
  }
}

// Attention in double under the oracle's mask (scale 1, zeros for a query
// that sees nothing).
std::vector<double> attention_formula(const BlockCase& bc, Rule rule, const Built& b, int64_t* visible_pairs) {
  const int64_t G = bc.Hq / bc.Hk, d = bc.d;
  std::vector<double> out(size_t(bc.M * bc.Hq * d), 0.0);
  *visible_pairs = 0;
  for (int64_t m = 0; m < bc.M; ++m)
    for (int64_t h = 0; h < bc.Hq; ++h) {
      const int64_t kh = h / G;
      std::vector<double> score;
      std::vector<const float*> vals;
      auto key = [&](const Tensor& k, const Tensor& v, int64_t row, int64_t pos, bool is_new) {
        if (!oracle(rule, bc, bc.C + m, pos, is_new)) return;
        double s = 0;
        for (int64_t j = 0; j < d; ++j)
          s += double(b.q.f[size_t((m * bc.Hq + h) * d + j)]) * k.f[size_t((row * bc.Hk + kh) * d + j)];
        score.push_back(s);
        vals.push_back(v.f.data() + (row * bc.Hk + kh) * d);
      };
      for (int64_t c = bc.skip; c < bc.C; ++c) key(b.ck, b.cv, c, c, false);
      for (int64_t r = 0; r < bc.M; ++r) key(b.k, b.v, r, bc.C + r, true);
      *visible_pairs += int64_t(score.size());
      if (score.empty()) continue;
      const double mx = *std::max_element(score.begin(), score.end());
      double sum = 0;
      for (double& s : score) sum += (s = std::exp(s - mx));
      for (size_t n = 0; n < score.size(); ++n)
        for (int64_t j = 0; j < d; ++j) out[size_t((m * bc.Hq + h) * d + j)] += score[n] / sum * vals[n][j];
    }
  return out;
}

const char* rule_name(Rule r) { return r == Rule::kCausal ? "causal" : r == Rule::kHf ? "hf blocks" : "jax blocks"; }

// The three rules differ on these cases: two blocks, one crossing the
// window's edge (longer than the window), one starting at the first new row,
// and a cache segment whose keys belong to no block.
std::vector<BlockCase> block_cases() {
  std::vector<BlockCase> v;
  {
    BlockCase bc;  // small: cache 6 (skip 2), 14 new rows, window 4
    bc.C = 6, bc.skip = 2, bc.M = 14, bc.window = 4;
    bc.blocks = {{6, 9}, {11, 18}};  // the first new row starts a block; the second is longer than the window
    v.push_back(bc);
  }
  {
    BlockCase bc;  // tiles: 300 new rows (kAttnRows 24, 128-key blocks), blocks far wider than the window
    bc.C = 40, bc.skip = 5, bc.M = 300, bc.Hq = 4, bc.Hk = 2, bc.d = 72, bc.window = 16;
    bc.blocks = {{70, 250}, {260, 330}};
    v.push_back(bc);
  }
  {
    BlockCase bc;  // no cache, full attention (window 0: the HF rule only; JAX needs a window)
    bc.M = 200, bc.d = 24, bc.window = 0;
    bc.blocks = {{10, 150}, {170, 171}};
    v.push_back(bc);
  }
  return v;
}

TEST(VisionOps, BlockMasksFollowTheThreeRules) {
  uint32_t seed = 1;
  for (const BlockCase& bc : block_cases())
    for (Rule rule : {Rule::kCausal, Rule::kHf, Rule::kJax}) {
      if (rule == Rule::kJax && bc.window == 0) continue;
      Built b;
      build(bc, rule, ++seed, b);
      const Tensor got = run_reference(OpKind::kAttention, b.in, {}, b.a);
      int64_t visible = 0;
      const std::vector<double> want = attention_formula(bc, rule, b, &visible);
      ASSERT_GT(visible, 0);
      ASSERT_EQ(got.f.size(), want.size());
      double worst = 0;
      for (size_t e = 0; e < want.size(); ++e) worst = std::max(worst, std::fabs(got.f[e] - want[e]));
      EXPECT_LT(worst, 2e-5) << rule_name(rule) << ", M " << bc.M << ", window " << bc.window;
    }
}

// The rules really differ on these cases (else the test above could not tell
// them apart): each pair of rules disagrees on some (query, key).
TEST(VisionOps, BlockCasesSeparateTheRules) {
  const BlockCase bc = block_cases()[0];
  int hf_vs_causal = 0, jax_vs_hf = 0, jax_future = 0;
  for (int64_t i = bc.C; i < bc.C + bc.M; ++i) {
    for (int64_t j = bc.skip; j < bc.C + bc.M; ++j) {
      const bool is_new = j >= bc.C;
      hf_vs_causal += oracle(Rule::kHf, bc, i, j, is_new) != oracle(Rule::kCausal, bc, i, j, is_new);
      jax_vs_hf += oracle(Rule::kJax, bc, i, j, is_new) != oracle(Rule::kHf, bc, i, j, is_new);
      jax_future += oracle(Rule::kJax, bc, i, j, is_new) && j > i;
    }
  }
  EXPECT_GT(hf_vs_causal, 0);
  EXPECT_GT(jax_vs_hf, 0);
  EXPECT_GT(jax_future, 0);
}

// The fast kernels (their key-block skipping included) against the
// reference, at every level, and the bf16 dot mode within its rounding.
TEST(VisionOps, BlockMasksFastLevelsMatchTheReference) {
  uint32_t seed = 100;
  for (const BlockCase& bc : block_cases())
    for (Rule rule : {Rule::kCausal, Rule::kHf, Rule::kJax}) {
      if (rule == Rule::kJax && bc.window == 0) continue;
      Built b;
      build(bc, rule, ++seed, b);
      const Tensor want = run_reference(OpKind::kAttention, b.in, {}, b.a);
      float max_ref = 0;
      for (float x : want.f) max_ref = std::max(max_ref, std::fabs(x));
      for (CpuIsa l : fast_levels())
        for (bool bf16 : {false, true}) {
          CpuBackend fast(at_level(l, bf16));
          if (bf16 && !fast.bf16_dot()) continue;
          const Tensor got = run(fast, OpKind::kAttention, b.in, {}, b.a);
          ASSERT_EQ(got.f.size(), want.f.size());
          double worst = 0;
          for (size_t e = 0; e < want.f.size(); ++e) worst = std::max(worst, double(std::fabs(got.f[e] - want.f[e])));
          const double bound = bf16 ? 3e-2 * max_ref : 1e-5 + 1e-4 * max_ref;
          EXPECT_LE(worst, bound) << rule_name(rule) << " on " << isa_name(l) << (bf16 ? " bf16-dot" : "") << ", M "
                                  << bc.M;
        }
    }
}

TEST(VisionOps, BlockMasksRejectBadCalls) {
  BlockCase bc;
  bc.M = 4;
  bc.window = 2;
  bc.blocks = {{1, 3}};
  Built b;
  build(bc, Rule::kHf, 1, b);
  std::vector<const Tensor*> no_blocks(b.in.begin(), b.in.end() - 1);
  expect_rejected(OpKind::kAttention, no_blocks, {}, b.a, "plus the blocks input, got 5");
  Tensor short_ids = i32({3}, {-1, 0, 0});
  std::vector<const Tensor*> short_in = no_blocks;
  short_in.push_back(&short_ids);
  expect_rejected(OpKind::kAttention, short_in, {}, b.a, "one block id per row");
  OpAttrs jax = b.a;
  jax.mask = AttentionMask::kJaxBlocks;
  jax.window = 0;
  expect_rejected(OpKind::kAttention, b.in, {}, jax, "the JAX blocks mask needs a window");
}

}  // namespace
}  // namespace dgemma
