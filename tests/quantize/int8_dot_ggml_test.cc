// The integer-dot GEMM (backend/cpu/int8_dot.h) on ggml block weights
// (docs/formats.md §5.2):
//  * every integer-level type but Q2_K runs on it, and its output equals, bit
//    for bit, a scalar oracle written here from the block layouts element by
//    element: per sub-block s (ascending) fma(float(Σ q·V), ws·d) and, for the
//    types with an offset, fma(wb, d·Σq) after each 32 columns;
//  * every dispatch level this CPU runs and thread counts 1, 2 and 7 give the
//    same bits, the grouped (experts) GEMM the same as one GEMM per group;
//  * the rows the embedding lookup and the dense copy expand are, element by
//    element, fl(fl(ws·V) + wb) (ggml's order), at every level and for runs
//    that start and end inside blocks;
//  * the oracle's levels, scales and offsets are the reference block
//    decoder's (quantize/ggml_blocks.h), and the expanded rows are
//    dequantize_reference()'s values, bit for bit;
//  * a block with a NaN scale makes its row's outputs NaN, as non-finite
//    activations do theirs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend/cpu/cpu_levels.h"
#include "backend/cpu/int8_dot.h"
#include "backend/cpu/quant_kernels.h"
#include "core/dtype.h"
#include "quantize/ggml_blocks.h"
#include "support/random_ggml_blocks.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1,   GgmlType::kQ5_0,  GgmlType::kQ5_1,
                               GgmlType::kQ8_0, GgmlType::kQ3_K,   GgmlType::kQ4_K,  GgmlType::kQ5_K,
                               GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};

struct GgmlWeight {
  std::shared_ptr<QuantizedWeight> q;
  WeightRef ref;
};

GgmlWeight make(GgmlType t, std::vector<uint8_t> blocks, int64_t rows, int64_t cols) {
  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kGgml;
  q->ggml_type = t;
  q->shape = {rows, cols};
  q->rows = rows;
  q->cols = cols;
  q->block = ggml_traits(t).block_elems;
  q->stored_bytes = blocks.size();
  q->owned.push_back(std::move(blocks));
  q->slices = {QuantSlice{0, rows, q->owned.back().data()}};
  GgmlWeight w;
  w.q = q;
  w.ref.name = std::string("ggml");
  w.ref.dtype = DType::kBF16;
  w.ref.shape = q->shape;
  w.ref.data = q->slices.front().codes;
  w.ref.quant = q;
  return w;
}

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The oracle's view of one element e of a block: its integer level V, the
// scale ws of its sub-block and the offset wb (0 for the types without), with
// value = ws·V + wb (docs/formats.md §5.2), each read on its own from the
// bytes by position.
struct Element {
  int v;
  float ws, wb;
};

constexpr int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The nibble of element e of a 32-element run whose 16 bytes start at qs:
// elements 0-15 in the low nibbles, 16-31 in the high ones.
int split_nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }

// A K-quant 6-bit scale (is_min = false) or min (true) of sub-block s.
int k4_six_bits(const uint8_t* sc, int s, bool is_min) {
  const int low = s < 4 ? sc[s + (is_min ? 4 : 0)] & 63
                        : (is_min ? sc[s + 4] >> 4 : sc[s + 4] & 0xF) | ((sc[s - 4 + (is_min ? 4 : 0)] >> 6) << 4);
  return low;
}

Element element(GgmlType t, const uint8_t* b, int e) {
  switch (t) {
    case GgmlType::kQ4_0: return {split_nibble(b + 2, e) - 8, half_at(b), 0};
    case GgmlType::kQ4_1: return {split_nibble(b + 4, e), half_at(b), half_at(b + 2)};
    case GgmlType::kQ5_0: {
      const int high = (b[2 + e / 8] >> (e % 8)) & 1;  // bit e of the little-endian u32
      return {split_nibble(b + 6, e) + 16 * high - 16, half_at(b), 0};
    }
    case GgmlType::kQ5_1: {
      const int high = (b[4 + e / 8] >> (e % 8)) & 1;
      return {split_nibble(b + 8, e) + 16 * high, half_at(b), half_at(b + 2)};
    }
    case GgmlType::kQ8_0: return {int8_t(b[2 + e]), half_at(b), 0};
    case GgmlType::kIQ4_NL: return {kIq4[split_nibble(b + 2, e)], half_at(b), 0};
    case GgmlType::kIQ4_XS: {
      const int s = e / 32;
      uint16_t hi;
      std::memcpy(&hi, b + 2, 2);
      const int ls = (s % 2 ? b[4 + s / 2] >> 4 : b[4 + s / 2] & 0xF) + 16 * ((hi >> (2 * s)) & 3);
      return {kIq4[split_nibble(b + 8 + 16 * s, e % 32)], half_at(b) * float(ls - 32), 0};
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const int s = e / 32;  // 64-element chunks: the low nibbles first, then the high ones
      const uint8_t* qs = b + (t == GgmlType::kQ4_K ? 16 : 48);
      const uint8_t byte = qs[32 * (e / 64) + e % 32];
      int q = (e % 64) < 32 ? byte & 0xF : byte >> 4;
      if (t == GgmlType::kQ5_K) q += 16 * ((b[16 + e % 32] >> s) & 1);  // bit e/32 of qh[e % 32]
      return {q, half_at(b) * float(k4_six_bits(b + 4, s, false)),
              -(half_at(b + 2) * float(k4_six_bits(b + 4, s, true)))};
    }
    case GgmlType::kQ6_K: {
      const int h = e / 128, g = (e % 128) / 32, l = e % 32;
      const uint8_t low_byte = b[64 * h + 32 * (g % 2) + l];
      const int low = g < 2 ? low_byte & 0xF : low_byte >> 4, high = (b[128 + 32 * h + l] >> (2 * g)) & 3;
      return {(low | high << 4) - 32, half_at(b + 208) * float(int8_t(b[192 + e / 16])), 0};
    }
    case GgmlType::kQ3_K: {
      const int low = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int high = (b[e % 32] >> (e / 32)) & 1;
      const int t16 = e / 16;
      const int sc_low = (b[96 + t16 % 8] >> (4 * (t16 / 8))) & 0xF,
                sc_high = (b[104 + t16 % 4] >> (2 * (t16 / 4))) & 3;
      return {low - (high ? 0 : 4), half_at(b + 108) * float(sc_low + 16 * sc_high - 32), 0};
    }
    default: ADD_FAILURE() << "no oracle for " << ggml_type_name(t); return {0, 0, 0};
  }
}

// The documented sum (int8_dot.h) for every output, scalar, double-free:
// activations per 32 columns d = max|x| / 127, q = round(x · 127 / max|x|).
std::vector<float> oracle(const GgmlWeight& w, int64_t row0, int64_t n, const std::vector<float>& x, int64_t M) {
  const QuantizedWeight& q = *w.q;
  const GgmlTypeTraits& g = ggml_traits(q.ggml_type);
  const int64_t K = q.cols, nb = K / 32, sub = g.sub_block;
  std::vector<int> qa(size_t(M * K));
  std::vector<float> d(size_t(M * nb)), ds(size_t(M * nb));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b) {
      float amax = 0;
      for (int64_t k = 32 * b; k < 32 * b + 32; ++k) amax = std::max(amax, std::fabs(x[size_t(m * K + k)]));
      const float id = 127.0f / amax;
      int sum = 0;
      for (int64_t k = 32 * b; k < 32 * b + 32; ++k)
        sum += qa[size_t(m * K + k)] = int(std::nearbyint(x[size_t(m * K + k)] * id));
      d[size_t(m * nb + b)] = amax / 127.0f;
      ds[size_t(m * nb + b)] = d[size_t(m * nb + b)] * float(sum);
    }
  std::vector<float> out(size_t(M * n));
  const uint64_t row_bytes = ggml_row_bytes(q.ggml_type, K);
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* row = q.slices.front().codes + uint64_t(row0 + j) * row_bytes;
    std::vector<Element> el(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k)
      el[size_t(k)] = element(q.ggml_type, row + (k / g.block_elems) * g.block_bytes, int(k % g.block_elems));
    for (int64_t m = 0; m < M; ++m) {
      float acc = 0;
      for (int64_t s = 0; s < K / sub; ++s) {
        int isum = 0;
        for (int64_t k = s * sub; k < (s + 1) * sub; ++k) isum += qa[size_t(m * K + k)] * el[size_t(k)].v;
        const int64_t b = s * sub / 32;
        acc = std::fma(float(isum), el[size_t(s * sub)].ws * d[size_t(m * nb + b)], acc);
        if (g.has_offset && (s + 1) * sub % 32 == 0)
          acc = std::fma(el[size_t(s * sub)].wb, ds[size_t(m * nb + b)], acc);
      }
      out[size_t(m * n + j)] = acc;
    }
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

// Columns: three K-quant blocks (decoded chunks of 512 and 256 columns), or
// 23 blocks of 32 (chunks of 512 and 224: a last run of 32 after whole 64s).
int64_t cols_of(GgmlType t) { return ggml_traits(t).block_elems == 256 ? 768 : 736; }

TEST(Int8DotGgml, EveryIntegerTypeButQ2KRunsOnIt) {
  Rng rng(1);
  for (GgmlType t : kTypes) {
    const GgmlWeight w = make(t, random_ggml_blocks(t, 2, cols_of(t), rng), 2, cols_of(t));
    EXPECT_TRUE(cpu::int8_dot_supported(*w.q)) << ggml_type_name(t);
  }
  const GgmlWeight q2 = make(GgmlType::kQ2_K, random_ggml_blocks(GgmlType::kQ2_K, 2, 256, rng), 2, 256);
  EXPECT_FALSE(cpu::int8_dot_supported(*q2.q)) << "Q2_K needs activation sums per 16 columns";
  const Int8WeightValues q6 =
      int8_weight_values(*make(GgmlType::kQ6_K, random_ggml_blocks(GgmlType::kQ6_K, 1, 256, rng), 1, 256).q);
  EXPECT_EQ(q6.sub, 16);
  EXPECT_FALSE(q6.bias);
  const Int8WeightValues q4 =
      int8_weight_values(*make(GgmlType::kQ4_K, random_ggml_blocks(GgmlType::kQ4_K, 1, 256, rng), 1, 256).q);
  EXPECT_EQ(q4.sub, 32);
  EXPECT_TRUE(q4.bias);
  EXPECT_EQ(q4.values, I8Values::kU8);
}

TEST(Int8DotGgml, EqualsTheScalarOracleOnEveryLevelAndThreadCount) {
  const std::vector<const cpu::Int8DotIsa*> levels = cpu::int8_dot_levels();
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(ggml_type_name(t));
    Rng rng(uint32_t(t) + 100);
    const int64_t rows = 37, K = cols_of(t);
    const GgmlWeight w = make(t, random_ggml_blocks(t, rows, K, rng), rows, K);
    for (int64_t M : {1, 6, 19}) {
      SCOPED_TRACE(M);
      const std::vector<float> x = normal_values(M * K, uint32_t(7 + M), 1.0f);
      for (auto [row0, n] : std::vector<std::pair<int64_t, int64_t>>{{0, rows}, {3, rows - 5}}) {
        const std::vector<float> want = oracle(w, row0, n, x, M);
        for (const cpu::Int8DotIsa* l : levels)
          for (int threads : {1, 2, 7}) {
            EXPECT_EQ(want, gemm(*l, w.ref, row0, n, x, M, threads)) << l->name << ", " << threads << " threads";
          }
      }
    }
  }
}

TEST(Int8DotGgml, GroupedGemmEqualsOneGemmPerGroup) {
  // 4 experts of 20 rows in one Q4_K weight [80, 512]; groups of 0..9 tokens.
  Rng rng(40);
  const int64_t n = 20, K = 512, M = 3 + 9 + 5;
  const GgmlWeight w = make(GgmlType::kQ4_K, random_ggml_blocks(GgmlType::kQ4_K, 4 * n, K, rng), 4 * n, K);
  const std::vector<float> x = normal_values(M * K, 41, 1.0f);
  const std::vector<cpu::Int8Group> groups = {{0, 0, 3}, {20, 3, 3}, {40, 3, 12}, {60, 12, 17}};
  for (const cpu::Int8DotIsa* l : cpu::int8_dot_levels()) {
    SCOPED_TRACE(l->name);
    ThreadPool pool(2);
    std::vector<float> got(size_t(M * n), -1.0f);
    cpu::int8_dot_grouped_gemm(*l, w.ref, groups, n, x.data(), M, got.data(), n, pool);
    for (const cpu::Int8Group& g : groups) {
      if (g.m1 == g.m0) continue;
      const std::vector<float> xs(x.begin() + g.m0 * K, x.begin() + g.m1 * K);
      EXPECT_EQ(oracle(w, g.row0, n, xs, g.m1 - g.m0),
                std::vector<float>(got.begin() + g.m0 * n, got.begin() + g.m1 * n))
          << "group at row " << g.row0;
    }
  }
}

TEST(Int8DotGgml, DequantizedRowsAreTheBlockFormula) {
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(ggml_type_name(t));
    Rng rng(uint32_t(t) + 200);
    const int64_t rows = 3, K = cols_of(t);
    const GgmlWeight w = make(t, random_ggml_blocks(t, rows, K, rng), rows, K);
    const GgmlTypeTraits& g = ggml_traits(t);
    for (int l = 0; l <= int(detected_isa()); ++l) {
      const cpu::CpuLevelKernels& level = cpu::cpu_level_kernels(CpuIsa(l));
      for (auto [col, n] : std::vector<std::pair<int64_t, int64_t>>{{0, K}, {5, K - 5 - 7}, {300, 17}}) {
        std::vector<float> got(static_cast<size_t>(n));
        cpu::dequantize_row(*level.quant, *w.q, 1, col, n, got.data());
        const uint8_t* row = w.q->slices.front().codes + ggml_row_bytes(t, K);
        int wrong = 0;
        for (int64_t k = col; k < col + n; ++k) {
          const Element e = element(t, row + (k / g.block_elems) * g.block_bytes, int(k % g.block_elems));
          volatile float p = e.ws * float(e.v);  // rounded before the offset is added
          const float want = g.has_offset ? p + e.wb : p;
          wrong += std::memcmp(&want, &got[size_t(k - col)], 4) != 0;
        }
        EXPECT_EQ(wrong, 0) << isa_name(CpuIsa(l)) << ", columns " << col << " + " << n;
      }
    }
  }
}

TEST(Int8DotGgml, OracleAndExpandedRowsAgreeWithTheReferenceDecoder) {
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(ggml_type_name(t));
    Rng rng(uint32_t(t) + 400);
    const int64_t rows = 2, K = cols_of(t);
    const GgmlWeight w = make(t, random_ggml_blocks(t, rows, K, rng), rows, K);
    const GgmlTypeTraits& g = ggml_traits(t);
    const uint8_t* row = w.q->slices.front().codes + ggml_row_bytes(t, K);
    int wrong_levels = 0;
    for (int64_t b = 0; b < K / g.block_elems; ++b) {
      quant::GgmlBlockLevels ref;
      quant::ggml_block_levels(t, row + b * g.block_bytes, ref);
      for (int e = 0; e < g.block_elems; ++e) {
        const Element el = element(t, row + b * g.block_bytes, e);
        const int s = e / g.sub_block;
        wrong_levels += el.v != ref.levels[e] || std::memcmp(&el.ws, &ref.scale[s], 4) != 0 ||
                        (g.has_offset && std::memcmp(&el.wb, &ref.offset[s], 4) != 0);
      }
    }
    EXPECT_EQ(wrong_levels, 0);
    std::vector<float> want(static_cast<size_t>(K)), got(static_cast<size_t>(K));
    dequantize_reference(*w.q, 1, 0, K, want.data());
    for (int l = 0; l <= int(detected_isa()); ++l) {
      cpu::dequantize_row(*cpu::cpu_level_kernels(CpuIsa(l)).quant, *w.q, 1, 0, K, got.data());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << isa_name(CpuIsa(l));
    }
  }
}

// Against the exact path (the same blocks expanded to fp32, fp32 products):
// the activation rounding, ~1 % per GEMM, and not zero.
TEST(Int8DotGgml, ErrorAgainstTheExactPathIsTheActivationRounding) {
  ThreadPool pool(2);
  const cpu::CpuLevelKernels& level = cpu::cpu_level_kernels(default_isa());
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(ggml_type_name(t));
    Rng rng(uint32_t(t) + 300);
    const int64_t rows = 24, K = cols_of(t), M = 16;
    const GgmlWeight w = make(t, random_ggml_blocks(t, rows, K, rng), rows, K);
    const std::vector<float> x = normal_values(M * K, 301, 1.0f);
    std::vector<float> exact(size_t(M * rows)), dot(exact.size());
    cpu::quant_gemm(w.ref, 0, rows, x.data(), M, exact.data(), rows, pool, level, cpu::QuantDot::kExact);
    cpu::quant_gemm(w.ref, 0, rows, x.data(), M, dot.data(), rows, pool, level, cpu::QuantDot::kInt8);
    double e = 0, n = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      e += (double(dot[i]) - exact[i]) * (double(dot[i]) - exact[i]);
      n += double(exact[i]) * exact[i];
    }
    const double rms = std::sqrt(e / n);
    std::printf("%s: int8-dot vs exact, relative RMS %.3g\n", std::string(ggml_type_name(t)).c_str(), rms);
    EXPECT_LT(rms, 0.02);
    EXPECT_GT(rms, 0.0) << "the activations were not rounded";
  }
}

TEST(Int8DotGgml, NaNScalesAndActivationsGiveNaN) {
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    SCOPED_TRACE(ggml_type_name(t));
    Rng rng(50);
    const int64_t rows = 5, K = cols_of(t);
    std::vector<uint8_t> blocks = random_ggml_blocks(t, rows, K, rng);
    const uint16_t nan = 0x7E00;  // row 2's second block: d = NaN
    std::memcpy(blocks.data() + 2 * ggml_row_bytes(t, K) + size_t(ggml_traits(t).block_bytes + ggml_half_offsets(t)[0]),
                &nan, 2);
    const GgmlWeight w = make(t, std::move(blocks), rows, K);
    std::vector<float> x = normal_values(3 * K, 51, 1.0f);
    x[size_t(K + 70)] = INFINITY;  // activation row 1
    for (const cpu::Int8DotIsa* l : cpu::int8_dot_levels()) {
      SCOPED_TRACE(l->name);
      const std::vector<float> out = gemm(*l, w.ref, 0, rows, x, 3, 2);
      for (int64_t m = 0; m < 3; ++m)
        for (int64_t j = 0; j < rows; ++j)
          EXPECT_EQ(std::isnan(out[size_t(m * rows + j)]), m == 1 || j == 2) << "row " << m << ", weight row " << j;
    }
  }
}

}  // namespace
}  // namespace dgemma
