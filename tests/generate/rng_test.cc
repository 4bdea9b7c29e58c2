// Philox4x32-10 against the Random123 known-answer vectors, and the derived
// uniform draws: determinism, keying, range and uniformity (docs/model.md §3.5).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "generate/rng.h"

namespace dgemma {
namespace {

// Random123 tests/kat_vectors, "philox4x32 10" lines: counter, key, result.
TEST(Philox, Random123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxStream, WordsFollowTheDocumentedCounterLayout) {
  // [0] position, [1] canvas, [2] step, [3] purpose << 28 | block; key = seed halves.
  const uint64_t seed = 0x0123456789abcdefull;
  PhiloxStream s(seed, 3, 7, DrawPurpose::kRenoise, 11);
  const PhiloxKey key{0x89abcdefu, 0x01234567u};
  const PhiloxCounter b0 = philox4x32_10({11, 3, 7, 2u << 28}, key);
  const PhiloxCounter b1 = philox4x32_10({11, 3, 7, (2u << 28) | 1u}, key);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.next_u32(), b0[size_t(i)]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.next_u32(), b1[size_t(i)]);
}

TEST(PhiloxStream, DeterministicAndKeyedByEveryField) {
  auto first = [](uint64_t seed, uint32_t canvas, uint32_t step, DrawPurpose p, uint32_t pos) {
    PhiloxStream s(seed, canvas, step, p, pos);
    return std::vector<uint32_t>{s.next_u32(), s.next_u32()};
  };
  const auto base = first(42, 1, 2, DrawPurpose::kSample, 3);
  EXPECT_EQ(base, first(42, 1, 2, DrawPurpose::kSample, 3));
  EXPECT_NE(base, first(43, 1, 2, DrawPurpose::kSample, 3));
  EXPECT_NE(base, first(42ull | (1ull << 40), 1, 2, DrawPurpose::kSample, 3));  // high seed bits count
  EXPECT_NE(base, first(42, 0, 2, DrawPurpose::kSample, 3));
  EXPECT_NE(base, first(42, 1, 1, DrawPurpose::kSample, 3));
  EXPECT_NE(base, first(42, 1, 2, DrawPurpose::kRenoise, 3));
  EXPECT_NE(base, first(42, 1, 2, DrawPurpose::kSample, 4));
}

// Pearson chi-square statistic of `counts` against equal expected counts.
double chi_square(const std::vector<int64_t>& counts, int64_t total) {
  const double expected = double(total) / double(counts.size());
  double x2 = 0;
  for (int64_t c : counts) x2 += (double(c) - expected) * (double(c) - expected) / expected;
  return x2;
}

TEST(PhiloxStream, UniformIntChiSquare) {
  // 64 bins, 200k draws spread over positions of one seed. The 0.999
  // quantile of chi-square with 63 degrees of freedom is 103.4.
  constexpr uint32_t kBins = 64;
  constexpr int64_t kDraws = 200000;
  std::vector<int64_t> counts(kBins);
  for (int64_t i = 0; i < kDraws; ++i) {
    PhiloxStream s(2024, uint32_t(i / 1000), 0, DrawPurpose::kInit, uint32_t(i % 1000));
    const uint32_t v = s.uniform_int(kBins);
    ASSERT_LT(v, kBins);
    ++counts[v];
  }
  EXPECT_LT(chi_square(counts, kDraws), 103.4);
}

TEST(PhiloxStream, UniformIntNonPowerOfTwoChiSquare) {
  // n = 3 * 2^30: without rejection, multiply-high maps two 32-bit words to
  // every v with v % 3 == 0 and one word to the others (P = 1/2 instead of
  // 1/3), so residues mod 3 expose a missing or wrong rejection step.
  // 0.999 quantile of chi-square with 2 dof: 13.8.
  constexpr uint32_t n = 3u << 30;
  constexpr int64_t kDraws = 90000;
  std::vector<int64_t> counts(3);
  for (int64_t i = 0; i < kDraws; ++i) {
    PhiloxStream s(7, 0, uint32_t(i), DrawPurpose::kRenoise, 0);
    const uint32_t v = s.uniform_int(n);
    ASSERT_LT(v, n);
    ++counts[v % 3];
  }
  EXPECT_LT(chi_square(counts, kDraws), 13.8);
}

TEST(PhiloxStream, UniformIntRejectionHeavyRange) {
  // n = 2^31 + 1 rejects almost half of the words; results must stay in range
  // and roughly centred.
  constexpr uint32_t n = (1u << 31) + 1;
  double sum = 0;
  for (uint32_t i = 0; i < 20000; ++i) {
    PhiloxStream s(99, 0, 0, DrawPurpose::kInit, i);
    const uint32_t v = s.uniform_int(n);
    ASSERT_LT(v, n);
    sum += double(v) / double(n);
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);
  PhiloxStream one(1, 0, 0, DrawPurpose::kInit, 0);
  EXPECT_EQ(one.uniform_int(1), 0u);
}

TEST(PhiloxStream, UniformFloatAndDoubleInUnitInterval) {
  constexpr int kBins = 16;
  constexpr int64_t kDraws = 64000;
  std::vector<int64_t> f_counts(kBins), d_counts(kBins);
  PhiloxStream s(5, 0, 0, DrawPurpose::kSample, 0);
  for (int64_t i = 0; i < kDraws; ++i) {
    const float f = s.uniform_float();
    const double d = s.uniform_double();
    ASSERT_GE(f, 0.0f);
    ASSERT_LT(f, 1.0f);
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    ++f_counts[size_t(f * kBins)];
    ++d_counts[size_t(d * kBins)];
  }
  // 0.999 quantile of chi-square with 15 dof: 37.7.
  EXPECT_LT(chi_square(f_counts, kDraws), 37.7);
  EXPECT_LT(chi_square(d_counts, kDraws), 37.7);
}

}  // namespace
}  // namespace dgemma
