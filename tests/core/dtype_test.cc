// dtype table (docs/formats.md §1.2) and the scalar conversions: bf16, f16,
// fp8 e4m3fn / e5m2, including NaN, Inf, subnormals and round-to-nearest-even.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dgemma/error.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- table ----------------------------------------------------------------------

TEST(DTypeTable, NamesBitsAndKinds) {
  struct Row {
    const char* name;
    int bits;
    bool is_float;
  };
  const Row rows[] = {
      {"BOOL", 8, false},    {"U8", 8, false},          {"I8", 8, false},          {"U16", 16, false},
      {"I16", 16, false},    {"U32", 32, false},        {"I32", 32, false},        {"U64", 64, false},
      {"I64", 64, false},    {"F16", 16, true},         {"BF16", 16, true},        {"F32", 32, true},
      {"F64", 64, true},     {"C64", 64, false},        {"F8_E4M3", 8, true},      {"F8_E5M2", 8, true},
      {"F8_E8M0", 8, false}, {"F8_E4M3FNUZ", 8, false}, {"F8_E5M2FNUZ", 8, false}, {"F4", 4, false},
      {"F6_E2M3", 6, false}, {"F6_E3M2", 6, false},
  };
  for (const Row& r : rows) {
    auto t = dtype_from_name(r.name);
    ASSERT_TRUE(t.has_value()) << r.name;
    EXPECT_EQ(dtype_name(*t), r.name);
    EXPECT_EQ(dtype_bits(*t), r.bits) << r.name;
    EXPECT_EQ(dtype_is_float(*t), r.is_float) << r.name;
  }
  for (const char* bad : {"", "f32", "FP32", "F8_E4M3FN", "float32", "F32 ", "Q4_0"})
    EXPECT_FALSE(dtype_from_name(bad).has_value()) << bad;
}

// ---- bf16 -------------------------------------------------------------------------

TEST(BF16, KnownValues) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(bf16_to_f32(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7fc0)));
  EXPECT_EQ(bf16_to_f32(0x0001), float_of(0x00010000));  // subnormal
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
}

TEST(BF16, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7 (odd): down.
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808000)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(f32_to_bf16(float_of(0x3f818000)), 0x3f82);
  // Just above / below halfway.
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808001)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(float_of(0x3f807fff)), 0x3f80);
  // The largest float rounds up to infinity; bf16 max stays.
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7f0000)), 0x7f7f);
  // Subnormals round like everything else (no flush to zero).
  EXPECT_EQ(f32_to_bf16(float_of(0x00008000)), 0x0000);
  EXPECT_EQ(f32_to_bf16(float_of(0x00018000)), 0x0002);
  EXPECT_EQ(f32_to_bf16(float_of(0x00008001)), 0x0001);
  EXPECT_EQ(round_bf16(1.00390625f), 1.0f);
}

TEST(BF16, NaNStaysQuietNaN) {
  for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f810000u}) {
    uint16_t h = f32_to_bf16(float_of(u));
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << u;
    EXPECT_TRUE(h & 0x0040) << std::hex << u;  // quiet bit set
    EXPECT_EQ(h & 0x8000, (u >> 16) & 0x8000);
  }
}

TEST(BF16, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16_to_f32(uint16_t(h));
    EXPECT_EQ(bits_of(f), h << 16);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h) << std::hex << h;
  }
}

// ---- f16 ---------------------------------------------------------------------------

TEST(F16, KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(1e-10f), 0x0000);
  EXPECT_EQ(f32_to_f16(-1e-10f), 0x8000);
}

TEST(F16, NaNStaysNaN) {
  for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0xffc00000u}) {
    uint16_t h = f32_to_f16(float_of(u));
    EXPECT_TRUE(std::isnan(f16_to_f32(h))) << std::hex << u;
    EXPECT_EQ(h & 0x8000, (u >> 16) & 0x8000);
  }
}

TEST(F16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // halfway, to even (down)
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // halfway, to even (up)
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // halfway to 2^16: even is Inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway 0 / min subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // halfway 1 / 2 subnormal units
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(2047.0f, -25)), 0x0400);  // largest subnormal + half: to normal
}

TEST(F16, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7c00, 0x7c00u);
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

// f32 -> f16 against a slow reference: the nearest f16 found by search,
// ties to the even code; beyond 65520 the result is Inf.
TEST(F16, MatchesReferenceOnRandomFloats) {
  std::vector<double> values;  // non-negative finite f16 values, ascending with the code
  for (uint32_t h = 0; h < 0x7c00; ++h) values.push_back(double(f16_to_f32(uint16_t(h))));
  auto reference = [&](float f) -> uint16_t {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(double(f));
    if (a >= 65520.0) return sign | 0x7c00;
    auto it = std::lower_bound(values.begin(), values.end(), a);
    size_t hi = size_t(it - values.begin());
    if (hi < values.size() && values[hi] == a) return uint16_t(sign | hi);
    size_t lo = hi - 1;
    if (hi == values.size()) return uint16_t(sign | lo);
    const double dlo = a - values[lo], dhi = values[hi] - a;
    size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return uint16_t(sign | pick);
  };
  Rng rng(1234);
  for (int i = 0; i < 200000; ++i) {
    // Half the samples in f16's range (dense in interesting cases), half any bits.
    float f = (i % 2) ? float_of(rng())
                      : std::ldexp(1.0f + float(rng() % 4096) / 4096.0f, int(rng.uniform_real(-27.0f, 17.0f))) *
                            ((i % 4 == 0) ? -1.0f : 1.0f);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), reference(f)) << std::hexfloat << f;
  }
}

// ---- fp8 ---------------------------------------------------------------------------

TEST(F8E4M3, KnownValues) {
  EXPECT_EQ(f8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(f8_e4m3_to_f32(0x80)));
  EXPECT_EQ(f8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(f8_e4m3_to_f32(0x7e), 448.0f);  // max finite (e4m3fn)
  EXPECT_EQ(f8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(f8_e4m3_to_f32(0x78), 256.0f);                // exponent 15 is finite in fn
  EXPECT_EQ(f8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // min subnormal
  EXPECT_EQ(f8_e4m3_to_f32(0x07), std::ldexp(7.0f, -9));  // max subnormal
  EXPECT_EQ(f8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // min normal
  EXPECT_TRUE(std::isnan(f8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(f8_e4m3_to_f32(0xff)));
}

TEST(F8E4M3, AllCodesFiniteMonotonicSymmetric) {
  int nans = 0;
  for (int v = 0; v < 256; ++v) {
    float f = f8_e4m3_to_f32(uint8_t(v));
    if (std::isnan(f)) {
      ++nans;
      continue;
    }
    EXPECT_FALSE(std::isinf(f)) << v;  // no Inf in e4m3fn
    EXPECT_EQ(f8_e4m3_to_f32(uint8_t(v ^ 0x80)), -f) << v;
  }
  EXPECT_EQ(nans, 2);
  for (int v = 1; v < 0x7f; ++v) EXPECT_LT(f8_e4m3_to_f32(uint8_t(v - 1)), f8_e4m3_to_f32(uint8_t(v))) << v;
}

TEST(F8E5M2, KnownValues) {
  EXPECT_EQ(f8_e5m2_to_f32(0x3c), 1.0f);
  EXPECT_EQ(f8_e5m2_to_f32(0xc0), -2.0f);
  EXPECT_EQ(f8_e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(f8_e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(f8_e5m2_to_f32(0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(f8_e5m2_to_f32(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f8_e5m2_to_f32(0xfc), -std::numeric_limits<float>::infinity());
  for (int v : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) EXPECT_TRUE(std::isnan(f8_e5m2_to_f32(uint8_t(v)))) << v;
  for (int v = 1; v < 0x7c; ++v) EXPECT_LT(f8_e5m2_to_f32(uint8_t(v - 1)), f8_e5m2_to_f32(uint8_t(v))) << v;
}

// ---- load_as_f32 -----------------------------------------------------------------------

TEST(LoadAsF32, EveryFloatDtype) {
  const float f32[] = {1.5f, -2.0f};
  const double f64[] = {0.25, -8.0};
  const uint16_t bf16[] = {0x3f80, 0xc040};
  const uint16_t f16[] = {0x3c00, 0xc200};
  const uint8_t e4m3[] = {0x38, 0x7e};
  const uint8_t e5m2[] = {0x3c, 0x7b};
  EXPECT_EQ(load_as_f32(DType::kF32, f32, 1), -2.0f);
  EXPECT_EQ(load_as_f32(DType::kF64, f64, 0), 0.25f);
  EXPECT_EQ(load_as_f32(DType::kBF16, bf16, 1), -3.0f);
  EXPECT_EQ(load_as_f32(DType::kF16, f16, 1), -3.0f);
  EXPECT_EQ(load_as_f32(DType::kF8_E4M3, e4m3, 1), 448.0f);
  EXPECT_EQ(load_as_f32(DType::kF8_E5M2, e5m2, 1), 57344.0f);
  // Unaligned source: load_as_f32 must not assume alignment.
  alignas(4) uint8_t raw[9] = {};
  const float v = 7.25f;
  std::memcpy(raw + 1, &v, 4);
  EXPECT_EQ(load_as_f32(DType::kF32, raw + 1, 0), 7.25f);
}

TEST(LoadAsF32, NonFloatDtypeThrows) {
  const int32_t x = 1;
  try {
    load_as_f32(DType::kI32, &x, 0);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot read dtype I32 as a float");
  }
  EXPECT_THROW(load_as_f32(DType::kF8_E8M0, &x, 0), Error);
}

}  // namespace
}  // namespace dgemma
