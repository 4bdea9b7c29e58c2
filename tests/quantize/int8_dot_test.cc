// The integer-dot GEMM (backend/cpu/int8_dot.h) per format:
//  * it computes the documented formula: activations rounded to int8 blocks
//    of 32 and the stored weights (NF4 levels to 15 bits), checked against a
//    double-precision product of independently quantized activations and
//    the dequantized weights;
//  * every dispatch level and thread count gives bit-identical results;
//  * its error against the exact fp32 path is the activation rounding;
//  * non-finite activations give NaN outputs; shapes it cannot tile take the
//    exact path;
//  * the CPU backend's int8_dot mode routes linear and moe_experts on
//    quantized weights through it, at the scalar and the detected level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/cpu_features.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_levels.h"
#include "backend/cpu/int8_dot.h"
#include "backend/cpu/quant_kernels.h"
#include "quantize/quantizers.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

struct Case {
  const char* label;
  QuantScheme scheme;
  int block, bits;
  bool double_quant;
  int64_t rows, cols;
  int64_t slice_rows = 0;
};

std::vector<Case> cases() {
  // nf4_dq_nested (after the first seven, so that the indices below stay): 576 blocks, so
  // rows start and end inside nested groups of 256 blocks and cross their
  // boundaries (the decoder steps the nested scale along a row).
  return {{"nf4_dq", QuantScheme::kNF4, 64, 4, true, 37, 192},
          {"nf4_b32", QuantScheme::kNF4, 32, 4, false, 21, 64},
          {"nvfp4_slices", QuantScheme::kNVFP4, 16, 4, false, 48, 64, 8},
          {"affine4_g64", QuantScheme::kAffine, 64, 4, false, 33, 128},
          {"affine4_g32", QuantScheme::kAffine, 32, 4, false, 8, 96},
          {"affine8", QuantScheme::kAffine, 64, 8, false, 20, 64},
          {"int8", QuantScheme::kInt8, 64, 8, false, 17, 1024},
          {"nf4_dq_nested", QuantScheme::kNF4, 64, 4, true, 96, 384},
          // rows longer than one decoded chunk (512 columns), the last one partial
          {"nf4_k704", QuantScheme::kNF4, 64, 4, false, 19, 704},
          {"nvfp4_k1056", QuantScheme::kNVFP4, 16, 4, false, 18, 1056}};
}

std::shared_ptr<QuantizedWeight> make(const Case& c, uint32_t seed) {
  const std::vector<float> w = normal_values(c.rows * c.cols, seed, 0.2f);
  quant::QuantizeParams p;
  p.block = c.block;
  p.bits = c.bits;
  p.double_quant = c.double_quant;
  p.slice_rows = c.slice_rows;
  quant::FloatSource src{DType::kF32, w.data(), int64_t(w.size())};
  return quant::quantize_weight(c.scheme, src, {c.rows, c.cols}, DType::kBF16, p);
}

WeightRef quant_ref(const std::shared_ptr<QuantizedWeight>& q) {
  WeightRef w;
  w.name = std::string("quantized");
  w.dtype = q->dtype;
  w.shape = q->shape;
  w.data = q->slices.front().codes;
  w.quant = q;
  return w;
}

// max |a - b| / max |b|.
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e = std::max(e, std::fabs(double(a[i]) - double(b[i])));
    m = std::max(m, std::fabs(double(b[i])));
  }
  return e / std::max(m, 1e-30);
}

// The activations as the integer path sees them (int8_dot.h), written
// independently: per block of 32, d = max|x| / 127 and q = round(x / d).
std::vector<double> quantized_activations(const std::vector<float>& x, int64_t M, int64_t K) {
  std::vector<double> out(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < K; b += 32) {
      double amax = 0;
      for (int64_t k = b; k < b + 32; ++k) amax = std::max(amax, std::fabs(double(x[size_t(m * K + k)])));
      const float d = float(amax) / 127.0f, id = 127.0f / float(amax);
      for (int64_t k = b; k < b + 32; ++k)
        out[size_t(m * K + k)] = double(d) * std::nearbyint(x[size_t(m * K + k)] * id);
    }
  return out;
}

std::vector<float> gemm(const cpu::Int8DotIsa& isa, const WeightRef& w, int64_t row0, int64_t n,
                        const std::vector<float>& x, int64_t M, int threads) {
  ThreadPool pool(threads);
  std::vector<float> out(size_t(M * n));
  cpu::int8_dot_gemm(isa, w, row0, n, x.data(), M, out.data(), n, pool);
  return out;
}

// The kernels of the default dispatch level (DGEMMA_CPU_ISA or the CPU's),
// and the portable ones (the scalar level's).
const cpu::CpuLevelKernels& default_level() { return cpu::cpu_level_kernels(default_isa()); }
const cpu::Int8DotIsa& portable() { return *cpu::cpu_level_kernels(CpuIsa::kScalar).int8_dot; }

TEST(Int8Dot, ComputesQuantizedActivationsTimesStoredWeights) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    auto q = make(c, 3);
    ASSERT_TRUE(cpu::int8_dot_supported(*q));
    const WeightRef w = quant_ref(q);
    std::vector<float> d(size_t(q->rows * q->cols));
    for (int64_t r = 0; r < q->rows; ++r) dequantize_reference(*q, r, 0, q->cols, d.data() + r * q->cols);
    for (int64_t M : {1, 6, 33}) {
      SCOPED_TRACE(M);
      const std::vector<float> x = normal_values(M * c.cols, uint32_t(4 + M), 1.0f);
      const std::vector<double> xq = quantized_activations(x, M, c.cols);
      for (auto [row0, n] : std::vector<std::pair<int64_t, int64_t>>{{0, c.rows}, {3, c.rows - 5}}) {
        const std::vector<float> got = gemm(*default_level().int8_dot, w, row0, n, x, M, 2);
        std::vector<float> want(got.size());
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t k = 0; k < c.cols; ++k)
              s += xq[size_t(m * c.cols + k)] * double(d[size_t((row0 + j) * c.cols + k)]);
            want[size_t(m * n + j)] = float(s);
          }
        // fp32 accumulation of exact block sums; NF4: the levels to 15 bits
        // (1.5e-5 of absmax per weight, not cancelling over 64-192 columns).
        EXPECT_LE(rel_error(got, want), c.scheme == QuantScheme::kNF4 ? 1e-4 : 2e-6);
      }
    }
  }
}

// Every level this CPU runs (AVX2, AVX-VNNI, AVX-512, AVX512-VNNI, AMX-INT8)
// against the portable one, bit for bit, with row counts that exercise each
// level's row blocking (3, 6 or 16 rows at a time) and its remainders. Those
// include the one of each dispatch level's row (cpu_levels.h).
TEST(Int8Dot, LevelsAndThreadCountsAreBitIdentical) {
  const cpu::Int8DotIsa &p = portable(), &f = *default_level().int8_dot;
  const std::vector<const cpu::Int8DotIsa*> levels = cpu::int8_dot_levels();
  std::string names;
  for (const cpu::Int8DotIsa* l : levels) names += std::string(" ") + l->name;
  std::printf("int8-dot kernels use the %s level; this CPU runs:%s\n", f.name, names.c_str());
  for (int l = 0; l <= int(detected_isa()); ++l) {
    const cpu::Int8DotIsa* row = cpu::cpu_level_kernels(CpuIsa(l)).int8_dot;
    EXPECT_NE(std::find(levels.begin(), levels.end(), row), levels.end())
        << isa_name(CpuIsa(l)) << " uses " << row->name << ", not among the levels compared";
  }
  if (detected_isa() >= CpuIsa::kAvx2) {
    EXPECT_STRNE(f.name, p.name) << "the AVX2 level is not in use on an AVX2 CPU";
    EXPECT_GE(levels.size(), 2u);
  }
  if (cpu_features().amx_int8 && default_isa() >= CpuIsa::kAmx) {
    EXPECT_STREQ(f.name, "amx-int8") << "an AMX-INT8 CPU does not use its tiles";
  } else if (cpu_features().avx512_vnni && detected_isa() >= CpuIsa::kAvx512 && default_isa() >= CpuIsa::kAvx512) {
    EXPECT_STREQ(f.name, "avx512-vnni") << "an AVX512-VNNI CPU does not use its VNNI level";
  }
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    const WeightRef w = quant_ref(make(c, 5));
    for (int64_t M : {1, 4, 7, 11, 19, 35}) {
      const std::vector<float> x = normal_values(M * c.cols, uint32_t(40 + M), 1.0f);
      const std::vector<float> a = gemm(p, w, 0, c.rows, x, M, 1);
      for (const cpu::Int8DotIsa* l : levels) {
        SCOPED_TRACE(l->name);
        EXPECT_EQ(a, gemm(*l, w, 0, c.rows, x, M, 1)) << "M=" << M;
      }
      EXPECT_EQ(a, gemm(f, w, 0, c.rows, x, M, 3));
    }
  }
}

TEST(Int8Dot, GroupedGemmEqualsOneGemmPerGroup) {
  // 5 "experts" of 24 rows each in one [120, 64] NF4 weight; groups of 0..9 rows.
  const Case c{"experts", QuantScheme::kNF4, 64, 4, true, 5 * 24, 64};
  const WeightRef w = quant_ref(make(c, 30));
  const int64_t n = 24, M = 4 + 9 + 1 + 7;
  const std::vector<float> x = normal_values(M * c.cols, 31, 1.0f);
  const std::vector<cpu::Int8Group> groups = {{0, 0, 4}, {24, 4, 13}, {48, 13, 13}, {72, 13, 14}, {96, 14, 21}};
  ThreadPool pool(3);
  std::vector<float> got(size_t(M * n), -1.0f);
  cpu::int8_dot_grouped_gemm(*default_level().int8_dot, w, groups, n, x.data(), M, got.data(), n, pool);
  for (const cpu::Int8Group& g : groups) {
    if (g.m1 == g.m0) continue;
    const std::vector<float> xs(x.begin() + g.m0 * c.cols, x.begin() + g.m1 * c.cols);
    const std::vector<float> want = gemm(*default_level().int8_dot, w, g.row0, n, xs, g.m1 - g.m0, 1);
    EXPECT_EQ(want, std::vector<float>(got.begin() + g.m0 * n, got.begin() + g.m1 * n)) << "group at row " << g.row0;
  }
}

// A decoded row in the level's row format, as int16 values: the int16
// levels store them as is; the byte levels (AMX) n low bytes, then n high
// bytes.
std::vector<int16_t> row_values(const cpu::Int8DotIsa& level, const std::vector<int16_t>& row, int64_t n) {
  if (!level.int8_rows) return std::vector<int16_t>(row.begin(), row.begin() + n);
  const auto* b = reinterpret_cast<const uint8_t*>(row.data());
  std::vector<int16_t> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[size_t(k)] = int16_t(int(int8_t(b[n + k])) * 256 + b[k]);
  return v;
}

TEST(Int8Dot, DecodingLevelsAgree) {
  for (const cpu::Int8DotIsa* level : cpu::int8_dot_levels()) {
    SCOPED_TRACE(level->name);
    const cpu::Int8DotIsa &p = portable(), &f = *level;
    Rng rng(7);
    std::vector<uint8_t> codes(512);
    for (auto& c : codes) c = uint8_t(rng());
    int16_t table[16];
    for (auto& t : table) t = int16_t(int(rng() % 65535) - 32767);
    std::vector<int16_t> a(512), b(512);
    const cpu::NibbleTable nt = cpu::nibble_table(table);
    for (bool high : {true, false})
      for (int64_t n : {512, 480, 32}) {  // whole 64-code steps and a last run of 32
        std::fill(a.begin(), a.end(), 0);
        std::fill(b.begin(), b.end(), 0);
        p.nibbles(codes.data(), n, high, nt, a.data());
        f.nibbles(codes.data(), n, high, nt, b.data());
        EXPECT_EQ(row_values(p, a, n), row_values(f, b, n)) << n;
        EXPECT_EQ(a[2], table[high ? codes[1] >> 4 : codes[1] & 0xF]);
        EXPECT_EQ(a[size_t(n) - 1], table[high ? codes[size_t(n / 2 - 1)] & 0xF : codes[size_t(n / 2 - 1)] >> 4]);
      }
    for (bool is_signed : {true, false}) {
      p.bytes(codes.data(), 256, is_signed, a.data());
      f.bytes(codes.data(), 256, is_signed, b.data());
      EXPECT_EQ(row_values(p, a, 256), row_values(f, b, 256));
    }
    if (f.nibble_pairs) {
      // Straight into the pair layout: the same v as nibbles() per row and
      // interleave(), with rows past nr zero; chunks of 1 to 8 runs of 64
      // pairs, the last one partial.
      std::vector<uint8_t> src(16 * 256);
      for (auto& c : src) c = uint8_t(rng());
      for (bool high : {true, false})
        for (int nr : {16, 5, 1})
          for (int64_t kc : {32, 96, 128, 160, 192, 512}) {
            SCOPED_TRACE(::testing::Message() << "high " << high << " nr " << nr << " kc " << kc);
            std::vector<int16_t> decoded(16 * 512, 0), want(16 * 512, -1), got(16 * 512 + 32, -1);
            const uint8_t* rows[16] = {};
            for (int j = 0; j < nr; ++j) {
              rows[j] = src.data() + j * 256;
              p.nibbles(rows[j], kc, high, nt, decoded.data() + j * 512);
            }
            p.interleave(decoded.data(), 512, kc, cpu::I8Values::kS16, want.data());
            f.nibble_pairs(rows, nr, kc, high, nt, got.data());
            EXPECT_EQ(std::vector<int16_t>(want.begin(), want.begin() + 16 * kc),
                      std::vector<int16_t>(got.begin(), got.begin() + 16 * kc));
            EXPECT_EQ(got[size_t(16 * kc)], -1) << "wrote past the chunk";
          }
    }
    std::vector<int16_t> rows(16 * 64), va(16 * 64), vb(16 * 64);
    for (auto& r : rows) r = int16_t(rng());
    if (!f.int8_rows) {
      p.interleave(rows.data(), 64, 64, cpu::I8Values::kS16, va.data());
      f.interleave(rows.data(), 64, 64, cpu::I8Values::kS16, vb.data());
      EXPECT_EQ(va, vb);
      EXPECT_EQ(va[(5 * 16 + 3) * 2 + 1], rows[3 * 64 + 11]);  // pair 5 of row 3, second element
      continue;
    }
    // The byte levels: quads of k by row, the low plane, then the high one.
    // Rows of kc = 32 ... 128 bytes per plane (partial and whole column
    // groups of 64) at a stride of 128 int16 (the row format needs kc ≤ ld).
    for (int64_t kc : {32, 64, 96, 128}) {
      SCOPED_TRACE(kc);
      std::vector<int16_t> in(16 * 128), out(16 * 128, 0);
      auto* bytes = reinterpret_cast<uint8_t*>(in.data());
      for (int64_t i = 0; i < 16 * 128 * 2; ++i) bytes[i] = uint8_t(rng());
      f.interleave(in.data(), 128, kc, cpu::I8Values::kS16, out.data());
      const auto* o = reinterpret_cast<const uint8_t*>(out.data());
      int wrong = 0;
      for (int plane = 0; plane < 2; ++plane)
        for (int64_t k = 0; k < kc; ++k)
          for (int j = 0; j < 16; ++j)
            wrong += o[plane * 16 * kc + ((k / 4) * 16 + j) * 4 + k % 4] != bytes[j * 256 + plane * kc + k];
      EXPECT_EQ(wrong, 0);
    }
  }
}

TEST(Int8Dot, ErrorAgainstTheExactPathIsTheActivationRounding) {
  ThreadPool pool(2);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    const WeightRef w = quant_ref(make(c, 9));
    const int64_t M = 16;
    const std::vector<float> x = normal_values(M * c.cols, 10, 1.0f);
    std::vector<float> exact(size_t(M * c.rows)), dot(exact.size());
    cpu::quant_gemm(w, 0, c.rows, x.data(), M, exact.data(), c.rows, pool, default_level(), cpu::QuantDot::kExact);
    cpu::quant_gemm(w, 0, c.rows, x.data(), M, dot.data(), c.rows, pool, default_level(), cpu::QuantDot::kInt8);
    const double e = rel_error(dot, exact);
    EXPECT_LT(e, 0.02);
    EXPECT_GT(e, 0.0) << "the activations were not rounded";
  }
}

TEST(Int8Dot, NonFiniteActivationsGiveNaN) {
  const Case c = cases()[0];
  const WeightRef w = quant_ref(make(c, 11));
  for (const cpu::Int8DotIsa* isa : cpu::int8_dot_levels()) {
    SCOPED_TRACE(isa->name);
    for (float bad : {INFINITY, -INFINITY, NAN}) {
      std::vector<float> x = normal_values(3 * c.cols, 12, 1.0f);
      x[size_t(c.cols + 70)] = bad;  // row 1
      const std::vector<float> out = gemm(*isa, w, 0, c.rows, x, 3, 2);
      for (int64_t j = 0; j < c.rows; ++j) {
        EXPECT_TRUE(std::isfinite(out[size_t(j)]));
        EXPECT_TRUE(std::isnan(out[size_t(c.rows + j)]));
        EXPECT_TRUE(std::isfinite(out[size_t(2 * c.rows + j)]));
      }
    }
  }
}

TEST(Int8Dot, ZeroAndTinyBlocksGiveZero) {
  const Case c = cases()[6];
  const WeightRef w = quant_ref(make(c, 13));
  std::vector<float> x(size_t(2 * c.cols), 0.0f);
  for (int64_t k = 0; k < c.cols; ++k) x[size_t(c.cols + k)] = 1e-35f;
  for (const cpu::Int8DotIsa* isa : cpu::int8_dot_levels()) {
    const std::vector<float> out = gemm(*isa, w, 0, c.rows, x, 2, 1);
    for (float v : out) EXPECT_EQ(v, 0.0f);
  }
}

TEST(Int8Dot, UntileableShapesTakeTheExactPath) {
  ThreadPool pool(2);
  const Case c{"nf4_straddle_odd", QuantScheme::kNF4, 64, 4, false, 7, 99};
  auto q = make(c, 14);
  EXPECT_FALSE(cpu::int8_dot_supported(*q));
  const WeightRef w = quant_ref(q);
  const std::vector<float> x = normal_values(5 * c.cols, 15, 1.0f);
  std::vector<float> exact(size_t(5 * c.rows)), dot(exact.size());
  cpu::quant_gemm(w, 0, c.rows, x.data(), 5, exact.data(), c.rows, pool, default_level(), cpu::QuantDot::kExact);
  cpu::quant_gemm(w, 0, c.rows, x.data(), 5, dot.data(), c.rows, pool, default_level(), cpu::QuantDot::kInt8);
  EXPECT_EQ(exact, dot);
}

Tensor run_op(Backend& b, const OpCall& proto) {
  Tensor out = *proto.out[0];
  OpCall c = proto;
  c.out = {&out};
  b.run(c);
  return out;
}

TEST(Int8Dot, BackendModeRoutesLinearAndExperts) {
  // linear: x [5, 128] · W [33, 128]ᵀ (MLX 4-bit).
  const Case lc = cases()[3];
  const WeightRef lw = quant_ref(make(lc, 16));
  Tensor x = Tensor::f32({5, lc.cols});
  x.f = normal_values(5 * lc.cols, 17, 1.0f);
  Tensor y = Tensor::f32({5, lc.rows});
  OpCall lin;
  lin.kind = OpKind::kLinear;
  lin.in = {&x};
  lin.w = {&lw};
  lin.out = {&y};
  // moe_experts: 4 experts, H = 64, I = 32, top-2 over 6 tokens (NF4).
  const int64_t E = 4, H = 64, I = 32, T = 6;
  const WeightRef gu = quant_ref(make({"gu", QuantScheme::kNF4, 64, 4, true, E * 2 * I, H}, 18));
  const WeightRef dn = quant_ref(make({"dn", QuantScheme::kNF4, 64, 4, true, E * H, I}, 19));
  WeightRef gu3 = gu, dn3 = dn;
  gu3.shape = {E, 2 * I, H};
  dn3.shape = {E, H, I};
  Tensor xe = Tensor::f32({T, H}), idx = Tensor::i32({T, 2}), wts = Tensor::f32({T, 2}), ye = Tensor::f32({T, H});
  xe.f = normal_values(T * H, 20, 1.0f);
  for (int64_t t = 0; t < T; ++t) {
    idx.i[size_t(2 * t)] = int32_t(t % E);
    idx.i[size_t(2 * t + 1)] = int32_t((t + 1) % E);
    wts.f[size_t(2 * t)] = 0.7f;
    wts.f[size_t(2 * t + 1)] = 0.3f;
  }
  OpCall moe;
  moe.kind = OpKind::kMoeExperts;
  moe.in = {&xe, &idx, &wts};
  moe.w = {&gu3, &dn3};
  moe.out = {&ye};
  for (const OpCall* op : {&lin, &moe}) {
    SCOPED_TRACE(op_name(op->kind));
    CpuBackendOptions exact_o, dot_o, dot_scalar_o;
    dot_o.int8_dot = dot_scalar_o.int8_dot = true;
    dot_scalar_o.isa = CpuIsa::kScalar;
    CpuBackend exact(exact_o), dot(dot_o), dot_scalar(dot_scalar_o);
    const Tensor a = run_op(exact, *op), b = run_op(dot, *op), s = run_op(dot_scalar, *op);
    if (op == &lin) {
      EXPECT_EQ(b.f, s.f) << "int8-dot differs between the scalar and the " << isa_name(dot.isa()) << " level";
    } else {
      // The experts' GELU is the level's own (the fast levels' vector tanh,
      // as for bf16 experts; the scalar level's std::tanh), an ulp apart,
      // which may move an int8 rounding of the down projection's input.
      const double d = rel_error(b.f, s.f);
      std::printf("moe_experts, int8-dot, %s level vs scalar level: max rel diff %.3g\n",
                  std::string(isa_name(dot.isa())).c_str(), d);
      EXPECT_LT(d, 1e-4);
    }
    const double e = rel_error(b.f, a.f);
    EXPECT_LT(e, 0.02);
    EXPECT_GT(e, 0.0) << "int8_dot did not change the path";
  }
}

}  // namespace
}  // namespace dgemma
