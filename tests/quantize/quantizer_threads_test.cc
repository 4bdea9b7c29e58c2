// The quantizers' fast paths against their plain definitions: blocks and
// rows split over threads (quantizers.h) must give the same bytes for every
// thread count, including ranges that end inside a row and a last partial
// NF4 block; the NF4 code search (format_tables.cc) must pick what a full
// scan of the code book picks, ties and NaN included.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "quantize/format_tables.h"
#include "quantize/quantizers.h"
#include "support/test_rng.h"

namespace dgemma::quant {
namespace {

std::vector<float> random_tensor(int64_t n, uint32_t seed) {
  std::vector<float> v = normal_values(n, seed, 0.3f);
  for (int64_t i = 0; i < 256; ++i) v[size_t(i)] = 0.0f;  // an all-zero block
  return v;
}

TEST(QuantizerThreads, BytesDoNotDependOnTheThreadCount) {
  const int64_t rows = 1031, cols = 1024;                           // 1.06 M elements: 4 threads get ~264 K each
  const std::vector<float> v = random_tensor(rows * cols - 40, 5);  // NF4: a partial last block
  const std::vector<float> full = random_tensor(rows * cols, 6);
  const FloatSource nf4_src{DType::kF32, v.data(), int64_t(v.size())};
  const FloatSource src{DType::kF32, full.data(), rows * cols};
  const Nf4Packed n1 = quantize_nf4(nf4_src, 64, true, 256, 1);
  const float g = nvfp4_global_scale(abs_max(src, 0, rows * cols));
  const Nvfp4Packed f1 = quantize_nvfp4(src, 0, rows, cols, g, 1);
  const AffinePacked a1 = quantize_affine(src, rows, cols, 4, 64, DType::kBF16, 1);
  const AffinePacked e1 = quantize_affine(src, rows, cols, 8, 32, DType::kF32, 1);
  const Int8Packed i1 = quantize_int8(src, rows, cols, 64, 1);
  const Fp8Packed p1 = quantize_fp8(src, rows, cols, cols, 1);
  for (const int t : {2, 3, 4, 0}) {
    SCOPED_TRACE("threads " + std::to_string(t));
    const Nf4Packed n = quantize_nf4(nf4_src, 64, true, 256, t);
    EXPECT_EQ(n.codes, n1.codes);
    EXPECT_EQ(n.absmax_codes, n1.absmax_codes);
    EXPECT_EQ(n.nested_absmax, n1.nested_absmax);
    const Nvfp4Packed f = quantize_nvfp4(src, 0, rows, cols, g, t);
    EXPECT_EQ(f.codes, f1.codes);
    EXPECT_EQ(f.scales, f1.scales);
    const AffinePacked a = quantize_affine(src, rows, cols, 4, 64, DType::kBF16, t);
    EXPECT_EQ(a.codes, a1.codes);
    EXPECT_EQ(a.scales, a1.scales);
    EXPECT_EQ(a.biases, a1.biases);
    EXPECT_EQ(quantize_affine(src, rows, cols, 8, 32, DType::kF32, t).codes, e1.codes);
    const Int8Packed i = quantize_int8(src, rows, cols, 64, t);
    EXPECT_EQ(i.codes, i1.codes);
    EXPECT_EQ(i.scales, i1.scales);
    const Fp8Packed p = quantize_fp8(src, rows, cols, cols, t);
    EXPECT_EQ(p.codes, p1.codes);
    EXPECT_EQ(p.scales, p1.scales);
  }
  EXPECT_GE(resolve_quantize_threads(0), 1);
  EXPECT_EQ(resolve_quantize_threads(3), 3);
}

uint8_t full_scan(float v) {
  int best = 0;
  float bd = std::fabs(v - kNf4Values[0]);
  for (int c = 1; c < 16; ++c)
    if (std::fabs(v - kNf4Values[c]) < bd) bd = std::fabs(v - kNf4Values[c]), best = c;
  return uint8_t(best);
}

TEST(QuantizerThreads, NearestCode16MatchesAFullScan) {
  std::vector<float> probes = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               2.0f,
                               -3.0f,
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 15; ++i) {  // around every midpoint and code, a few ulps each way
    for (float x : {0.5f * (kNf4Values[i] + kNf4Values[i + 1]), kNf4Values[i]}) {
      float lo = x, hi = x;
      for (int k = 0; k < 4; ++k) {
        probes.push_back(lo = std::nextafter(lo, -2.0f));
        probes.push_back(hi = std::nextafter(hi, 2.0f));
      }
      probes.push_back(x);
    }
  }
  Rng rng(3);
  for (int i = 0; i < 200000; ++i) probes.push_back(rng.uniform_real(-1.2f, 1.2f));
  for (const float v : probes) ASSERT_EQ(nearest_code16(kNf4Values, v), full_scan(v)) << "v = " << v;
}

}  // namespace
}  // namespace dgemma::quant
