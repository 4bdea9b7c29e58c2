// The quantized CPU kernels against the dequantize-then-fp32 reference, per
// format: the fast row expansion is bit-identical to dequantize_reference();
// the tiled GEMM matches a double-precision product of the dequantized
// weight within 1e-5 relative; linear, moe_experts, embedding and
// soft_embedding on a quantized weight match the same ops on the dense
// dequantized weight, through the CPU backend at the scalar and at the
// detected dispatch level. Also the quantizers' round-trip error bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_levels.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_simd.h"
#include "quantize/format_tables.h"
#include "quantize/quantizers.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

using quant::FloatSource;
using quant::QuantizeParams;

struct Case {
  const char* label;
  QuantScheme scheme;
  QuantizeParams params;
  DType dtype;
  int64_t rows, cols;
};

QuantizeParams params(int block, int bits, bool dq, int64_t slice_rows = 0, int64_t scale_rows = 0) {
  QuantizeParams p;
  p.block = block;
  p.bits = bits;
  p.double_quant = dq;
  p.slice_rows = slice_rows;
  p.scale_rows = scale_rows;
  return p;
}

std::vector<Case> cases() {
  return {{"nf4_dq", QuantScheme::kNF4, params(64, 4, true), DType::kBF16, 37, 192},
          {"nf4_straddle_odd", QuantScheme::kNF4, params(64, 4, false), DType::kF32, 7, 99},
          {"nvfp4_slices", QuantScheme::kNVFP4, params(16, 4, false, 8, 16), DType::kBF16, 48, 64},
          {"affine4_bf16", QuantScheme::kAffine, params(64, 4, false), DType::kBF16, 33, 128},
          {"affine4_f32_g32", QuantScheme::kAffine, params(32, 4, false), DType::kF32, 8, 96},
          {"affine8", QuantScheme::kAffine, params(64, 8, false), DType::kF16, 20, 64},
          {"int8", QuantScheme::kInt8, params(64, 8, false), DType::kF32, 17, 128},
          {"fp8_channel", QuantScheme::kFP8, params(0, 8, false), DType::kBF16, 19, 96},
          {"fp8_block32", QuantScheme::kFP8, params(32, 8, false), DType::kF32, 9, 128}};
}

std::shared_ptr<QuantizedWeight> make(const Case& c, const std::vector<float>& w) {
  FloatSource src{DType::kF32, w.data(), int64_t(w.size())};
  return quant::quantize_weight(c.scheme, src, {c.rows, c.cols}, c.dtype, c.params);
}

std::vector<float> dequantized(const QuantizedWeight& q) {
  std::vector<float> d(size_t(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r) dequantize_reference(q, r, 0, q.cols, d.data() + r * q.cols);
  return d;
}

WeightRef quant_ref(const std::shared_ptr<QuantizedWeight>& q) {
  WeightRef w;
  w.name = "w";
  w.dtype = q->dtype;
  w.shape = q->shape;
  w.data = q->slices.front().codes;
  w.quant = q;
  return w;
}

WeightRef dense_ref(const std::vector<float>& d, std::vector<int64_t> shape) {
  WeightRef w;
  w.name = "w";
  w.dtype = DType::kF32;
  w.shape = std::move(shape);
  w.data = d.data();
  return w;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

// max |a - b| / max |b|.
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::fabs(double(a[i]) - double(b[i])));
  return e / std::max(max_abs(b), 1e-30);
}

// The quantized kernels of the dispatch levels this CPU runs (cpu_levels.h),
// each once.
std::vector<const cpu::QuantIsa*> quant_levels() {
  std::vector<const cpu::QuantIsa*> v;
  for (int l = 0; l <= int(detected_isa()); ++l) {
    const cpu::QuantIsa* q = cpu::cpu_level_kernels(CpuIsa(l)).quant;
    if (v.empty() || v.back() != q) v.push_back(q);
  }
  return v;
}
const cpu::QuantIsa& default_quant() { return *cpu::cpu_level_kernels(default_isa()).quant; }

TEST(QuantKernels, FastExpansionIsBitIdenticalToReference) {
  for (const cpu::QuantIsa* level : quant_levels()) {
    SCOPED_TRACE(level->name);
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.label);
      auto q = make(c, normal_values(c.rows * c.cols, 1, 0.2f));
      std::vector<float> a(size_t(c.cols)), b(size_t(c.cols));
      for (int64_t r = 0; r < c.rows; ++r) {
        for (auto [col, n] :
             std::vector<std::pair<int64_t, int64_t>>{{0, c.cols}, {1, c.cols - 2}, {17, 15}, {c.cols - 1, 1}}) {
          dequantize_reference(*q, r, col, n, a.data());
          cpu::dequantize_row(*level, *q, r, col, n, b.data());
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[size_t(i)], b[size_t(i)]) << "row " << r << " col " << col + i;
        }
      }
    }
  }
}

// Every vector building block of `f` against the portable `p`.
void expect_level_agrees(const cpu::QuantIsa& p, const cpu::QuantIsa& f) {
  Rng rng(21);
  std::vector<uint8_t> codes(256);
  for (auto& c : codes) c = uint8_t(rng());
  std::vector<uint8_t> scales(16);
  for (auto& c : scales) c = uint8_t(rng() % 0x7f);  // finite E4M3
  const std::vector<float> lut = normal_values(16, 22, 1.0f);
  std::vector<float> a(256), b(256);
  for (bool high : {true, false}) {
    p.nibbles_scaled(codes.data(), 256, high, lut.data(), 0.37f, a.data());
    f.nibbles_scaled(codes.data(), 256, high, lut.data(), 0.37f, b.data());
    EXPECT_EQ(a, b);
  }
  p.nvfp4_blocks(codes.data(), scales.data(), 16, 0.011f, quant::kE2m1Values, quant::e4m3_table(), a.data());
  f.nvfp4_blocks(codes.data(), scales.data(), 16, 0.011f, quant::kE2m1Values, quant::e4m3_table(), b.data());
  EXPECT_EQ(a, b);
  p.affine4(codes.data(), 256, 0.013f, -0.1f, a.data());
  f.affine4(codes.data(), 256, 0.013f, -0.1f, b.data());
  EXPECT_EQ(a, b);
  p.affine8(codes.data(), 256, 0.0013f, -0.17f, a.data());
  f.affine8(codes.data(), 256, 0.0013f, -0.17f, b.data());
  EXPECT_EQ(a, b);
  p.int8(reinterpret_cast<const int8_t*>(codes.data()), 256, 0.003f, a.data());
  f.int8(reinterpret_cast<const int8_t*>(codes.data()), 256, 0.003f, b.data());
  EXPECT_EQ(a, b);
  for (int i = 0; i < 256; ++i) codes[size_t(i)] = uint8_t(i);  // every E4M3 code, NaN (0x7f, 0xff) included
  p.fp8(codes.data(), 256, quant::e4m3_table(), 0.0021f, a.data());
  f.fp8(codes.data(), 256, quant::e4m3_table(), 0.0021f, b.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  const int64_t M = 7, kc = 96, ldw = 128;
  const std::vector<float> x = normal_values(M * kc, 23, 1.0f), w = normal_values(cpu::kQuantTileRows * ldw, 24, 0.2f);
  std::vector<float> acc_p(size_t(M * cpu::kQuantTileRows * cpu::kQuantLanes), 0.5f), acc_f = acc_p;
  p.tile_dot(x.data(), kc, M, w.data(), ldw, kc, acc_p.data());
  f.tile_dot(x.data(), kc, M, w.data(), ldw, kc, acc_f.data());
  EXPECT_LE(rel_error(acc_f, acc_p), 1e-6);
}

TEST(QuantKernels, VectorLevelsAgreeWithPortable) {
  std::printf("quantized kernels use the %s level\n", default_quant().name);
  const cpu::QuantIsa& p = *cpu::cpu_level_kernels(CpuIsa::kScalar).quant;
  for (const cpu::QuantIsa* level : quant_levels()) {
    SCOPED_TRACE(level->name);
    expect_level_agrees(p, *level);
  }
}

TEST(QuantKernels, RoundTripErrorWithinFormatBounds) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    const std::vector<float> w = normal_values(c.rows * c.cols, 2, 0.2f);
    auto q = make(c, w);
    const std::vector<float> d = dequantized(*q);
    double num = 0, den = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      num += double(d[i] - w[i]) * double(d[i] - w[i]);
      den += double(w[i]) * double(w[i]);
    }
    const double rms = std::sqrt(num / den);
    // FP8 E4M3 keeps 3 mantissa bits: a relative error up to 2^-4 per value.
    const double bound = c.scheme == QuantScheme::kFP8 ? 0.05 : q->bits == 8 ? 0.01 : 0.15;
    EXPECT_LT(rms, bound) << "relative RMS error " << rms;
    EXPECT_GT(rms, 0.0);
  }
}

// FP8 E4M3 with one scale per row: values that are a representable E4M3
// number times the scale come back exactly, a tie rounds to even, NaN stays
// NaN, an all-zero row has scale 0 and zero codes, and every value of the
// normal range is within half an E4M3 step (relative 2^-4).
TEST(QuantKernels, Fp8PerChannelCodes) {
  const int64_t cols = 8;
  // Row 0: amax 448 (scale 1): exact values, then 1.0625 (between 1 and
  // 1.125: to even, 1), then -0.0078125 (2^-7, a subnormal of E4M3).
  // Row 1: NaN among values of amax 2 (scale 2/448). Row 2: zeros.
  const std::vector<float> w = {448.0f, -448.0f, 1.5f,  3.25f, 0.015625f, 1.0625f, -0.0078125f, 0.0f,
                                2.0f,   NAN,     -1.0f, 0.5f,  0.25f,     -2.0f,   0.125f,      1.0f,
                                0.0f,   0.0f,    0.0f,  0.0f,  0.0f,      0.0f,    0.0f,        0.0f};
  auto q = quant::quantize_weight(QuantScheme::kFP8, FloatSource{DType::kF32, w.data(), int64_t(w.size())}, {3, cols},
                                  DType::kBF16);
  ASSERT_EQ(q->block, cols);
  std::vector<float> d(w.size());
  for (int64_t r = 0; r < 3; ++r) dequantize_reference(*q, r, 0, cols, d.data() + r * cols);
  const std::vector<float> want0 = {448.0f, -448.0f, 1.5f, 3.25f, 0.015625f, 1.0f, -0.0078125f, 0.0f};
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(d[size_t(c)], want0[size_t(c)]) << "row 0 column " << c;
  EXPECT_TRUE(std::isnan(d[9]));
  const float s1 = 2.0f / 448.0f;
  for (int64_t c : {8, 10, 11, 12, 13, 14, 15}) {
    EXPECT_NEAR(d[size_t(c)], w[size_t(c)], std::fabs(w[size_t(c)]) / 16.0f) << "row 1 column " << c;
    EXPECT_EQ(d[size_t(c)], s1 * quant::e4m3_table()[q->slices[0].codes[size_t(c)]]);  // scale · e4m3, fp32
  }
  float s2 = -1.0f;
  std::memcpy(&s2, q->slices[0].scales + 2 * 4, 4);
  EXPECT_EQ(s2, 0.0f);
  for (int64_t c = 16; c < 24; ++c) {
    EXPECT_EQ(q->slices[0].codes[size_t(c)], 0);
    EXPECT_EQ(d[size_t(c)], 0.0f);
  }
  // The CPU kernels' expansion agrees (also with a block of 4 columns).
  std::vector<float> fast(w.size());
  for (int64_t r = 0; r < 3; ++r) cpu::dequantize_row(default_quant(), *q, r, 0, cols, fast.data() + r * cols);
  EXPECT_EQ(std::memcmp(fast.data(), d.data(), d.size() * 4), 0);
  QuantizeParams p4;
  p4.block = 4;
  auto b = quant::quantize_weight(QuantScheme::kFP8, FloatSource{DType::kF32, w.data(), int64_t(w.size())}, {3, cols},
                                  DType::kF32, p4);
  std::vector<float> db(static_cast<size_t>(cols));
  dequantize_reference(*b, 0, 0, cols, db.data());
  EXPECT_EQ(db[2], 1.5f);                               // block 0: amax 448, scale 1
  EXPECT_NEAR(db[6], -0.0078125f, 0.0078125f / 16.0f);  // block 1: its own scale
}

TEST(QuantKernels, GemmMatchesDequantizedReference) {
  ThreadPool pool(2);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    auto q = make(c, normal_values(c.rows * c.cols, 3, 0.2f));
    const WeightRef w = quant_ref(q);
    const std::vector<float> d = dequantized(*q);
    for (int64_t M : {1, 16, 33}) {
      SCOPED_TRACE(M);
      const std::vector<float> x = normal_values(M * c.cols, uint32_t(4 + M), 1.0f);
      for (auto [row0, n] : std::vector<std::pair<int64_t, int64_t>>{{0, c.rows}, {3, c.rows - 5}}) {
        std::vector<float> got(size_t(M * n)), want(size_t(M * n));
        cpu::quant_gemm(w, row0, n, x.data(), M, got.data(), n, pool, cpu::cpu_level_kernels(default_isa()));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t k = 0; k < c.cols; ++k)
              s += double(x[size_t(m * c.cols + k)]) * double(d[size_t((row0 + j) * c.cols + k)]);
            want[size_t(m * n + j)] = float(s);
          }
        EXPECT_LE(rel_error(got, want), 1e-5);
      }
    }
  }
}

// Runs one op with one output on a backend.
Tensor run(Backend& b, OpKind kind, std::vector<const Tensor*> in, std::vector<const WeightRef*> w, OpAttrs a = {},
           Tensor* second = nullptr) {
  Tensor out;
  OpCall call;
  call.kind = kind;
  call.in = std::move(in);
  call.w = std::move(w);
  call.out = {&out};
  if (second) call.out.push_back(second);
  call.attrs = a;
  Executor(b).run(call);
  return out;
}

Tensor f32(std::vector<int64_t> shape, const std::vector<float>& v) {
  Tensor t = Tensor::f32(std::move(shape));
  t.f = v;
  return t;
}

class QuantOps : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<CpuBackend> backend() {
    CpuBackendOptions o;
    o.threads = 2;
    if (GetParam()) o.isa = CpuIsa::kScalar;
    return std::make_unique<CpuBackend>(o);
  }
};

TEST_P(QuantOps, LinearMatchesDenseWeight) {
  auto b = backend();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    auto q = make(c, normal_values(c.rows * c.cols, 5, 0.2f));
    const WeightRef wq = quant_ref(q);
    const std::vector<float> d = dequantized(*q);
    const WeightRef wd = dense_ref(d, {c.rows, c.cols});
    const Tensor x = f32({9, c.cols}, normal_values(9 * c.cols, 6, 1.0f));
    const Tensor got = run(*b, OpKind::kLinear, {&x}, {&wq});
    const Tensor want = run(*b, OpKind::kLinear, {&x}, {&wd});
    ASSERT_EQ(got.shape, want.shape);
    EXPECT_LE(rel_error(got.f, want.f), 1e-5);
    b->clear_packed_weights();  // packed panels are keyed by address; `d` is freed
  }
}

TEST_P(QuantOps, ExpertsMatchDenseWeights) {
  auto b = backend();
  const int64_t E = 4, I = 32, H = 96, M = 7, K = 2;
  struct Pair {
    const char* label;
    QuantScheme scheme;
    QuantizeParams gu, dn;
  };
  for (const Pair& p : {Pair{"nf4", QuantScheme::kNF4, params(64, 4, true), params(64, 4, true)},
                        Pair{"nvfp4", QuantScheme::kNVFP4, params(16, 4, false, I, 2 * I), params(16, 4, false, H, H)},
                        Pair{"affine", QuantScheme::kAffine, params(32, 4, false), params(32, 4, false)}}) {
    SCOPED_TRACE(p.label);
    const std::vector<float> gu = normal_values(E * 2 * I * H, 7, 0.2f), dn = normal_values(E * H * I, 8, 0.2f);
    auto qgu = quant::quantize_weight(p.scheme, {DType::kF32, gu.data(), int64_t(gu.size())}, {E, 2 * I, H},
                                      DType::kF32, p.gu);
    auto qdn =
        quant::quantize_weight(p.scheme, {DType::kF32, dn.data(), int64_t(dn.size())}, {E, H, I}, DType::kF32, p.dn);
    const std::vector<float> dgu = dequantized(*qgu), ddn = dequantized(*qdn);
    const WeightRef wqgu = quant_ref(qgu), wqdn = quant_ref(qdn);
    const WeightRef wdgu = dense_ref(dgu, {E, 2 * I, H}), wddn = dense_ref(ddn, {E, H, I});
    const Tensor x = f32({M, H}, normal_values(M * H, 9, 1.0f));
    Tensor idx = Tensor::i32({M, K});
    Tensor wts = f32({M, K}, normal_values(M * K, 10, 0.5f));
    for (int64_t m = 0; m < M; ++m) {
      idx.i[size_t(m * K)] = int32_t((m * 3) % E);
      idx.i[size_t(m * K + 1)] = int32_t((m * 3 + 1 + m % 2) % E);
    }
    const Tensor want = run(*b, OpKind::kMoeExperts, {&x, &idx, &wts}, {&wdgu, &wddn});
    const Tensor got = run(*b, OpKind::kMoeExperts, {&x, &idx, &wts}, {&wqgu, &wqdn});
    EXPECT_LE(rel_error(got.f, want.f), 1e-5);
    // One expert tensor quantized, the other plain.
    const Tensor mixed = run(*b, OpKind::kMoeExperts, {&x, &idx, &wts}, {&wqgu, &wddn});
    EXPECT_LE(rel_error(mixed.f, want.f), 1e-5);
    b->clear_packed_weights();
  }
}

// Embedding rows of a quantized table are its dequantized values in an fp32
// run and those values rounded to bf16 in a bf16 run (OpAttrs::round_to_bf16),
// whatever the logical dtype: the same as a plain table holding them.
TEST_P(QuantOps, EmbeddingsUseRowsRoundedToTheRunDtype) {
  auto b = backend();
  const int64_t V = 40, H = 64;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (const bool bf16_run : {false, true}) {
      SCOPED_TRACE(std::string("logical ") + std::string(dtype_name(dt)) + (bf16_run ? ", bf16 run" : ", fp32 run"));
      const std::vector<float> table = normal_values(V * H, 11, 0.5f);
      auto q = quant::quantize_weight(QuantScheme::kAffine, {DType::kF32, table.data(), V * H}, {V, H}, dt,
                                      params(32, 8, false));
      const WeightRef wq = quant_ref(q);
      // The plain table a run of this precision reads: the dequantized values,
      // rounded to bf16 in a bf16 run.
      const std::vector<float> d = dequantized(*q);
      std::vector<uint16_t> d16(d.size());
      for (size_t i = 0; i < d.size(); ++i) d16[i] = f32_to_bf16(d[i]);
      WeightRef wd = dense_ref(d, {V, H});
      if (bf16_run) {
        wd.dtype = DType::kBF16;
        wd.data = d16.data();
      }
      Tensor ids = Tensor::i32({5});
      ids.i = {0, 39, 7, 7, 12};
      OpAttrs a;
      a.scale = 8.0f;
      a.round_to_bf16 = bf16_run;
      EXPECT_EQ(run(*b, OpKind::kEmbedding, {&ids}, {&wq}, a).f, run(*b, OpKind::kEmbedding, {&ids}, {&wd}, a).f);
      const Tensor logits = f32({3, V}, normal_values(3 * V, 12, 2.0f));
      EXPECT_EQ(run(*b, OpKind::kSoftEmbedding, {&logits}, {&wq}, a).f,
                run(*b, OpKind::kSoftEmbedding, {&logits}, {&wd}, a).f);
      if (!bf16_run && dt == DType::kBF16) {  // the values are not all bf16 values: rounding would show
        WeightRef wr = dense_ref(d, {V, H});
        wr.dtype = DType::kBF16;
        wr.data = d16.data();
        EXPECT_NE(run(*b, OpKind::kEmbedding, {&ids}, {&wq}, a).f, run(*b, OpKind::kEmbedding, {&ids}, {&wr}, a).f);
      }
      // The LM head: a linear over the quantized table.
      const Tensor x = f32({4, H}, normal_values(4 * H, 13, 1.0f));
      const WeightRef wd32 = dense_ref(d, {V, H});
      EXPECT_LE(rel_error(run(*b, OpKind::kLinear, {&x}, {&wq}).f, run(*b, OpKind::kLinear, {&x}, {&wd32}).f), 1e-5);
      b->clear_packed_weights();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantOps, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "scalar" : "detected"; });

}  // namespace
}  // namespace dgemma
