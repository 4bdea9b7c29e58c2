// The CPU reference kernels of the op vocabulary, checked against small
// hand-computed cases and double-precision formulas written in the test.
#include <gtest/gtest.h>

#include <cmath>

#include "dgemma/error.h"
#include "backend/cpu/cpu_backend.h"

namespace dgemma {
namespace {

struct Fixture {
  CpuBackend backend{2};
  Executor ex{backend};
  std::vector<std::vector<float>> storage;

  WeightRef weight(std::vector<int64_t> shape, std::vector<float> data, const char* name = "w") {
    storage.push_back(std::move(data));
    WeightRef w;
    w.name = name;
    w.dtype = DType::kF32;
    w.shape = std::move(shape);
    w.data = storage.back().data();
    return w;
  }
  Tensor run(OpKind kind, std::vector<const Tensor*> in, std::vector<const WeightRef*> w, OpAttrs a = {}) {
    Tensor out;
    OpCall c;
    c.kind = kind;
    c.in = std::move(in);
    c.w = std::move(w);
    c.out = {&out};
    c.attrs = a;
    ex.run(c);
    return out;
  }
};

Tensor f32(std::vector<int64_t> shape, std::vector<float> v) {
  Tensor t = Tensor::f32(std::move(shape));
  t.f = std::move(v);
  return t;
}
Tensor i32(std::vector<int64_t> shape, std::vector<int32_t> v) {
  Tensor t = Tensor::i32(std::move(shape));
  t.i = std::move(v);
  return t;
}

TEST(CpuOps, RmsNormWithAndWithoutScale) {
  Fixture f;
  Tensor x = f32({2, 2}, {3, 4, 0, 0});
  WeightRef w = f.weight({2}, {2.0f, 0.5f});
  OpAttrs a;
  a.eps = 1e-6f;
  Tensor y = f.run(OpKind::kRmsNorm, {&x}, {&w}, a);
  const double inv = 1.0 / std::sqrt(12.5 + 1e-6);  // mean(9, 16) = 12.5
  EXPECT_NEAR(y.f[0], 3 * inv * 2.0, 1e-6);
  EXPECT_NEAR(y.f[1], 4 * inv * 0.5, 1e-6);
  EXPECT_EQ(y.f[2], 0.0f);  // RMSNorm(0) = 0: the first self-conditioning step relies on it
  Tensor z = f.run(OpKind::kRmsNorm, {&x}, {}, a);
  EXPECT_NEAR(z.f[1], 4 * inv, 1e-6);
}

TEST(CpuOps, RopeSplitHalfPairsAndPartialRotation) {
  Fixture f;
  // One token, one head, d = 8: pairs (0,4), (1,5), (2,6), (3,7).
  Tensor x = f32({1, 1, 8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor pos = i32({1}, {3});
  OpAttrs a;
  a.rope_theta = 100.0;
  a.rope_pairs = 2;  // "proportional": only pairs 0 and 1 rotate, exponent over the full d
  Tensor y = f.run(OpKind::kRope, {&x, &pos}, {}, a);
  for (int i = 0; i < 2; ++i) {
    const double w = std::pow(100.0, -2.0 * i / 8.0), ang = 3 * w;
    const double xa = x.f[size_t(i)], xb = x.f[size_t(i + 4)];
    EXPECT_NEAR(y.f[size_t(i)], xa * std::cos(ang) - xb * std::sin(ang), 1e-5);
    EXPECT_NEAR(y.f[size_t(i + 4)], xb * std::cos(ang) + xa * std::sin(ang), 1e-5);
  }
  for (int i : {2, 3, 6, 7}) EXPECT_EQ(y.f[size_t(i)], x.f[size_t(i)]);  // identity beyond rope_pairs
}

TEST(CpuOps, AttentionScaleOneAndCausalWindowMask) {
  Fixture f;
  // 3 tokens, 1 query head, 1 kv head, d = 2.
  Tensor q = f32({3, 1, 2}, {1, 0, 0, 1, 1, 1});
  Tensor k = f32({3, 1, 2}, {1, 0, 0, 1, 1, 1});
  Tensor v = f32({3, 1, 2}, {1, 2, 3, 4, 5, 6});
  Tensor pos = i32({3}, {0, 1, 2});
  OpAttrs a;
  a.mask = AttentionMask::kCausalWindow;
  a.window = 2;  // query 2 sees keys 1 and 2 only
  Tensor o = f.run(OpKind::kAttention, {&q, &k, &v, &pos, &pos}, {}, a);
  EXPECT_FLOAT_EQ(o.f[0], 1.0f);  // query 0 sees only key 0
  EXPECT_FLOAT_EQ(o.f[1], 2.0f);
  // query 2: scores (no 1/sqrt(d)) k1·q2 = 1, k2·q2 = 2.
  const double p1 = std::exp(1.0) / (std::exp(1.0) + std::exp(2.0)), p2 = 1 - p1;
  EXPECT_NEAR(o.f[4], p1 * 3 + p2 * 5, 1e-6);
  EXPECT_NEAR(o.f[5], p1 * 4 + p2 * 6, 1e-6);
}

TEST(CpuOps, AttentionGroupedQueryHeadsShareKeyHeads) {
  Fixture f;
  // 4 query heads over 2 kv heads: heads 0,1 -> kv 0; heads 2,3 -> kv 1 (repeat_kv).
  Tensor q = f32({1, 4, 1}, {1, 1, 1, 1});
  Tensor k = f32({1, 2, 1}, {1, 1});
  Tensor v = f32({1, 2, 1}, {10, 20});
  Tensor pos = i32({1}, {0});
  Tensor o = f.run(OpKind::kAttention, {&q, &k, &v, &pos, &pos}, {}, {});
  EXPECT_EQ(o.f, (std::vector<float>{10, 10, 20, 20}));
}

// The cache segment (ops/op.h attention_keys): cache rows skip_rows.. then
// the new rows; a value computed by hand, and malformed segments rejected
// with the field named.
TEST(CpuOps, AttentionReadsTheCacheSegmentFromSkipRows) {
  Fixture f;
  // Cache rows at positions 0, 1 (row 0 left out by skip_rows 1), a new key
  // at position 2; one query at position 2, d = 1, q = 1: scores = keys.
  Tensor q = f32({1, 1, 1}, {1});
  Tensor ck = f32({2, 1, 1}, {50, 1}), cv = f32({2, 1, 1}, {-100, 3}), cpos = i32({2}, {0, 1});
  Tensor k = f32({1, 1, 1}, {2}), v = f32({1, 1, 1}, {5}), pos = i32({1}, {2});
  OpAttrs a;
  a.skip_rows = 1;
  Tensor o = f.run(OpKind::kAttention, {&q, &k, &v, &pos, &pos, &ck, &cv, &cpos}, {}, a);
  const double p1 = std::exp(1.0) / (std::exp(1.0) + std::exp(2.0));
  EXPECT_NEAR(o.f[0], p1 * 3 + (1 - p1) * 5, 1e-6);
  auto fails = [&](std::vector<const Tensor*> in, int64_t skip, const std::string& want) {
    OpAttrs b;
    b.skip_rows = skip;
    try {
      f.run(OpKind::kAttention, std::move(in), {}, b);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  fails({&q, &k, &v, &pos, &pos, &ck, &cv, &cpos}, 3, "skip_rows 3 outside the cache's 2 rows");
  fails({&q, &k, &v, &pos, &pos}, 1, "skip_rows without cache inputs");
  Tensor wide = f32({2, 2, 1}, {0, 0, 0, 0});
  fails({&q, &k, &v, &pos, &pos, &wide, &wide, &cpos}, 0, "cached keys [2, 2, 1] do not match the new keys [1, 1, 1]");
  fails({&q, &k, &v, &pos, &pos, &ck, &wide, &cpos}, 0, "cached keys [2, 1, 1] and values [2, 2, 1] differ");
  Tensor one_pos = i32({1}, {0});
  fails({&q, &k, &v, &pos, &pos, &ck, &cv, &one_pos}, 0, "cached key position count does not match");
  fails({&q, &k, &v, &pos, &pos, &ck, &cv}, 0, "expected 5 inputs, or 8 with a cache segment, got 7");
}

TEST(CpuOps, RouterTopkRenormalizesAndScalesPerExpert) {
  Fixture f;
  // H = 2, E = 3, k = 2. x = (1, 1): normalized (1, 1); scale (1, 1); · H^-1/2.
  Tensor x = f32({1, 2}, {1, 1});
  WeightRef scale = f.weight({2}, {1, 1});
  WeightRef proj = f.weight({3, 2}, {1, 0, 0, 2, 0, 0});
  WeightRef pes = f.weight({3}, {0.5f, 2.0f, 3.0f});
  Tensor idx, w;
  OpCall c;
  c.kind = OpKind::kRouterTopk;
  c.in = {&x};
  c.w = {&scale, &proj, &pes};
  c.out = {&idx, &w};
  c.attrs.eps = 1e-6f;
  c.attrs.top_k = 2;
  f.ex.run(c);
  const double r = 1.0 / std::sqrt(1.0 + 1e-6) / std::sqrt(2.0);  // each component of r
  const double s0 = r, s1 = 2 * r, s2 = 0;
  const double e0 = std::exp(s0), e1 = std::exp(s1), e2 = std::exp(s2);
  (void)e2;
  EXPECT_EQ(idx.i, (std::vector<int32_t>{1, 0}));  // descending probability
  EXPECT_NEAR(w.f[0], e1 / (e0 + e1) * 2.0, 1e-6);
  EXPECT_NEAR(w.f[1], e0 / (e0 + e1) * 0.5, 1e-6);
}

TEST(CpuOps, MoeExpertsSumWeightedGeluGlu) {
  Fixture f;
  // H = 1, I = 1, E = 2: gate_up[e] = [g_e; u_e], down[e] = d_e.
  Tensor x = f32({1, 1}, {2});
  Tensor idx = i32({1, 2}, {1, 0});
  Tensor w = f32({1, 2}, {0.25f, 2.0f});
  WeightRef gu = f.weight({2, 2, 1}, {1, 3, -1, 0.5f});
  WeightRef down = f.weight({2, 1, 1}, {10, 100});
  Tensor o = f.run(OpKind::kMoeExperts, {&x, &idx, &w}, {&gu, &down});
  auto gelu = [](double u) { return 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u))); };
  const double y0 = 10 * gelu(2) * 6, y1 = 100 * gelu(-2) * 1;
  EXPECT_NEAR(o.f[0], 2.0 * y0 + 0.25 * y1, 1e-3);
}

TEST(CpuOps, GeluTanhIsFiniteForLargeInputs) {
  Fixture f;
  Tensor g = f32({1, 4}, {40, -40, 1e4f, -1e4f});
  Tensor u = f32({1, 4}, {1, 1, 1, 1});
  Tensor o = f.run(OpKind::kGeluGlu, {&g, &u}, {});
  EXPECT_FLOAT_EQ(o.f[0], 40.0f);
  EXPECT_EQ(o.f[1], 0.0f);
  for (float v : o.f) EXPECT_TRUE(std::isfinite(v));
}

TEST(CpuOps, SoftcapAndScale) {
  Fixture f;
  Tensor x = f32({3}, {0, 30, -300});
  OpAttrs a;
  a.cap = 30.0f;
  Tensor y = f.run(OpKind::kSoftcap, {&x}, {}, a);
  EXPECT_NEAR(y.f[1], 30 * std::tanh(1.0), 1e-5);
  EXPECT_NEAR(y.f[2], -30.0, 1e-4);
  WeightRef s = f.weight({1}, {0.5f});
  Tensor z = f.run(OpKind::kScale, {&x}, {&s});
  EXPECT_EQ(z.f, (std::vector<float>{0, 15, -150}));
}

TEST(CpuOps, EmbeddingAndSoftEmbedding) {
  Fixture f;
  WeightRef table = f.weight({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor ids = i32({2}, {2, 0});
  OpAttrs a;
  a.scale = 2.0f;
  Tensor e = f.run(OpKind::kEmbedding, {&ids}, {&table}, a);
  EXPECT_EQ(e.f, (std::vector<float>{10, 12, 2, 4}));
  // softmax(0, 0, ln 2) = (1/4, 1/4, 1/2) -> expected embedding (3.5, 4.5) · 2
  Tensor logits = f32({1, 3}, {0, 0, float(std::log(2.0))});
  Tensor s = f.run(OpKind::kSoftEmbedding, {&logits}, {&table}, a);
  EXPECT_NEAR(s.f[0], 7.0, 1e-5);
  EXPECT_NEAR(s.f[1], 9.0, 1e-5);
  Tensor bad = i32({1}, {3});
  EXPECT_THROW(f.run(OpKind::kEmbedding, {&bad}, {&table}, a), Error);
}

TEST(CpuOps, ShapeErrorsNameTheOp) {
  Fixture f;
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  WeightRef w = f.weight({4, 5}, std::vector<float>(20, 1.0f), "layers.0.q_proj");
  try {
    OpCall c;
    c.kind = OpKind::kLinear;
    c.site = "self_attn.q_proj";
    c.layer = 7;
    c.pass = Pass::kDecoder;
    Tensor out;
    c.in = {&x};
    c.w = {&w};
    c.out = {&out};
    f.ex.run(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op linear (self_attn.q_proj) in layer 7, decoder pass: linear weight "
                                         "layers.0.q_proj has shape [4, 5], expected [4, 3]"),
              std::string::npos)
        << e.what();
  }
  Tensor idx = i32({1, 1}, {5});
  Tensor wt = f32({1, 1}, {1});
  Tensor xx = f32({1, 1}, {1});
  WeightRef gu = f.weight({2, 2, 1}, {1, 1, 1, 1});
  WeightRef dn = f.weight({2, 1, 1}, {1, 1});
  EXPECT_THROW(f.run(OpKind::kMoeExperts, {&xx, &idx, &wt}, {&gu, &dn}), Error);  // expert 5 of 2
}

TEST(CpuOps, LinearHandlesBf16Weights) {
  Fixture f;
  std::vector<uint16_t> wb = {f32_to_bf16(1.5f), f32_to_bf16(-2.0f), f32_to_bf16(0.25f), f32_to_bf16(4.0f)};
  WeightRef w;
  w.name = "w";
  w.dtype = DType::kBF16;
  w.shape = {2, 2};
  w.data = wb.data();
  Tensor x = f32({1, 2}, {2, 1});
  Tensor y = f.run(OpKind::kLinear, {&x}, {&w});
  EXPECT_EQ(y.f, (std::vector<float>{1.0f, 4.5f}));
}

// The KV cache op (ops/op.h concat_rows): rows skip.. of (a then b), in F32
// and I32, including a skip that reaches into b (an append longer than the
// sliding window) and the shape checks.
TEST(CpuOps, ConcatRows) {
  Fixture f;
  Tensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({3, 2}, {5, 6, 7, 8, 9, 10});
  const std::vector<float> all = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (int64_t skip = 0; skip <= 5; ++skip) {
    OpAttrs at;
    at.skip_rows = skip;
    Tensor y = f.run(OpKind::kConcatRows, {&a, &b}, {}, at);
    EXPECT_EQ(y.shape, (std::vector<int64_t>{5 - skip, 2}));
    EXPECT_EQ(y.f, std::vector<float>(all.begin() + skip * 2, all.end())) << "skip " << skip;
  }
  Tensor e = Tensor::i32({0}), p = Tensor::i32({2});
  p.i = {7, 9};
  Tensor q = f.run(OpKind::kConcatRows, {&e, &p}, {});
  EXPECT_EQ(q.i, (std::vector<int32_t>{7, 9}));
  OpAttrs bad;
  bad.skip_rows = 6;
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a, &b}, {}, bad), Error);
  Tensor wide = f32({1, 3}, {1, 2, 3});
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a, &wide}, {}), Error);
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a, &p}, {}), Error);
}

// More than two inputs (a batched pass stacks its sequences' self-conditioning
// rows with one op): rows skip.. of all of them in order, empty inputs
// anywhere, every skip and take; one input, or a mismatched one, is an error.
TEST(CpuOps, ConcatRowsOfSeveralInputs) {
  Fixture f;
  Tensor a = f32({2, 2}, {1, 2, 3, 4}), none = f32({0, 2}, {}), b = f32({1, 2}, {5, 6}),
         c = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  const std::vector<float> all = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  for (int64_t skip = 0; skip <= 6; ++skip)
    for (int64_t take = 0; skip + take <= 6; ++take) {
      OpAttrs at;
      at.skip_rows = skip;
      at.take_rows = take;
      Tensor y = f.run(OpKind::kConcatRows, {&a, &none, &b, &c, &none}, {}, at);
      const int64_t end = take > 0 ? skip + take : 6;
      EXPECT_EQ(y.shape, (std::vector<int64_t>{end - skip, 2}));
      EXPECT_EQ(y.f, std::vector<float>(all.begin() + skip * 2, all.begin() + end * 2))
          << "skip " << skip << " take " << take;
    }
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a}, {}), Error);
  Tensor wide = f32({1, 3}, {1, 2, 3});
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a, &b, &wide}, {}), Error);
  Tensor ids = Tensor::i32({1});
  ids.i = {4};
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a, &b, &ids}, {}), Error);
}

// take_rows (a batched decoder pass slices its stacked rows with it): rows
// skip..skip+take-1 of (a then b), wherever they lie, in F32 and I32; 0 takes
// the rest; a slice past the end is an error.
TEST(CpuOps, ConcatRowsTakesASlice) {
  Fixture f;
  Tensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({3, 2}, {5, 6, 7, 8, 9, 10});
  const std::vector<float> all = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (int64_t skip = 0; skip <= 4; ++skip)
    for (int64_t take = 1; skip + take <= 5; ++take) {
      OpAttrs at;
      at.skip_rows = skip;
      at.take_rows = take;
      Tensor y = f.run(OpKind::kConcatRows, {&a, &b}, {}, at);
      EXPECT_EQ(y.shape, (std::vector<int64_t>{take, 2}));
      EXPECT_EQ(y.f, std::vector<float>(all.begin() + skip * 2, all.begin() + (skip + take) * 2))
          << "skip " << skip << " take " << take;
    }
  Tensor ids = Tensor::i32({4}), none = Tensor::i32({0});
  ids.i = {10, 11, 12, 13};
  OpAttrs mid;
  mid.skip_rows = 1;
  mid.take_rows = 2;
  EXPECT_EQ(f.run(OpKind::kConcatRows, {&ids, &none}, {}, mid).i, (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(f.run(OpKind::kConcatRows, {&none, &ids}, {}, mid).i, (std::vector<int32_t>{11, 12}));
  OpAttrs rest;
  rest.skip_rows = 3;
  EXPECT_EQ(f.run(OpKind::kConcatRows, {&ids, &none}, {}, rest).i, (std::vector<int32_t>{13}));
  OpAttrs past;
  past.skip_rows = 3;
  past.take_rows = 3;
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a, &b}, {}, past), Error);
  OpAttrs negative;
  negative.take_rows = -1;
  EXPECT_THROW(f.run(OpKind::kConcatRows, {&a, &b}, {}, negative), Error);
}

}  // namespace
}  // namespace dgemma
