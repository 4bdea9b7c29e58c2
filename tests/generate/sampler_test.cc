// Per-step sampler math (docs/model.md §3.2). The golden replay covers the common
// path; these pin the edges the goldens do not reach (ties, -inf logits,
// stability history, EOS padding, strict/non-strict comparisons).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "generate/sampler.h"

namespace dgemma {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(StepTemperature, MatchesReferenceBitsForTenSteps) {
  // float32 bit patterns of step.0.{0..9}.temperature in golden A (N = 10,
  // t 0.4 -> 0.8), i.e. what torch computed for cur_step = 10 .. 1.
  const uint32_t reference[10] = {0x3f4ccccd, 0x3f428f5c, 0x3f3851ec, 0x3f2e147b, 0x3f23d70a,
                                  0x3f19999a, 0x3f0f5c29, 0x3f051eb8, 0x3ef5c290, 0x3ee147ae};
  for (int64_t s = 0; s < 10; ++s)
    EXPECT_EQ(bits(step_temperature(0.4, 0.8, 10 - s, 10)), reference[s]) << "cur_step " << 10 - s;
}

TEST(StepTemperature, EndpointsForCheckpointSchedule) {
  EXPECT_EQ(step_temperature(0.4, 0.8, 48, 48), 0.8f);
  EXPECT_NEAR(step_temperature(0.4, 0.8, 1, 48), 0.4 + 0.4 / 48, 1e-7);  // 0.40833 (docs/model.md §3.2)
}

TEST(ApplyTemperature, IsDivisionNotReciprocalMultiply) {
  // 1 / 0.44f is inexact, so x * (1/T) and x / T differ for some x; the
  // reference divides.
  const float t = step_temperature(0.4, 0.8, 1, 10);
  std::vector<float> x;
  for (int i = 1; i < 2000; ++i) x.push_back(float(i) * 0.0137f);
  std::vector<float> z = x;
  apply_temperature(z, t);
  int differs_from_reciprocal = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(bits(z[i]), bits(x[i] / t));
    differs_from_reciprocal += bits(z[i]) != bits(x[i] * (1.0f / t));
  }
  EXPECT_GT(differs_from_reciprocal, 0);
}

TEST(RowStats, UniformRowHasLogVEntropyAndFirstArgmax) {
  const std::vector<float> z(512, 1.5f);
  const RowStats st = row_stats(z);
  EXPECT_EQ(st.argmax, 0);
  EXPECT_NEAR(st.entropy, std::log(512.0), 1e-6);
}

TEST(RowStats, ArgmaxTakesFirstMaximum) {
  const std::vector<float> z = {1.f, 3.f, -2.f, 3.f, 2.f};
  EXPECT_EQ(row_stats(z).argmax, 1);
}

TEST(RowStats, EntropyMatchesDefinition) {
  const std::vector<float> z = {0.3f, -1.2f, 2.5f, 0.0f, 1.1f};
  double m = -1e30, s = 0;
  for (float x : z) m = std::max(m, double(x));
  for (float x : z) s += std::exp(double(x) - m);
  double h = 0;
  for (float x : z) {
    const double p = std::exp(double(x) - m) / s;
    h -= p * std::log(p);
  }
  EXPECT_NEAR(row_stats(z).entropy, h, 1e-6);
}

TEST(RowStats, NegativeInfinityIsZeroProbability) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> z = {ninf, 0.f, 0.f, ninf};
  const RowStats st = row_stats(z);
  EXPECT_EQ(st.argmax, 1);
  EXPECT_NEAR(st.entropy, std::log(2.0), 1e-7);
}

TEST(RowStats, NanAndAllMaskedAreErrors) {
  EXPECT_THROW(row_stats(std::vector<float>{0.f, std::nanf("")}), Error);
  EXPECT_THROW(row_stats(std::vector<float>{std::numeric_limits<float>::infinity()}), Error);
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_THROW(row_stats(std::vector<float>{ninf, ninf}), Error);
}

TEST(EntropyBoundAccept, AcceptsLowEntropyPrefix) {
  // Sorted: 0.01 (sum before 0), 0.05 (0.01), 0.2 (0.06), 0.5 (0.26 > 0.1).
  const std::vector<float> h = {0.5f, 0.01f, 0.05f, 0.2f};
  std::vector<uint8_t> acc(4);
  EXPECT_EQ(entropy_bound_accept(h, 0.1, acc), 3);
  EXPECT_EQ(acc, (std::vector<uint8_t>{0, 1, 1, 1}));
}

TEST(EntropyBoundAccept, LowestIsAlwaysAccepted) {
  const std::vector<float> h = {3.f, 2.f, 5.f};
  std::vector<uint8_t> acc(3);
  EXPECT_EQ(entropy_bound_accept(h, 0.1, acc), 1);
  EXPECT_EQ(acc, (std::vector<uint8_t>{0, 1, 0}));
}

TEST(EntropyBoundAccept, ComparesInFloat32Inclusive) {
  // Sorted [0.1f, 0.1f, 0.1f]: the second has cumsum - own = 0.2f - 0.1f =
  // 0.1f exactly, accepted because the bound is compared as float32 0.1f
  // (as a double, 0.1f > 0.1 would reject it); the third has 0.3f - 0.1f.
  const std::vector<float> h = {0.1f, 0.1f, 0.1f};
  std::vector<uint8_t> acc(3);
  EXPECT_EQ(entropy_bound_accept(h, 0.1, acc), 2);
  EXPECT_EQ(acc, (std::vector<uint8_t>{1, 1, 0}));
}

TEST(EntropyBoundAccept, CumsumIsRoundedToFloat32) {
  // torch's cumsum returns float32: 0.1f + 0.5f rounds to 0.6f, and
  // 0.6f - 0.5f = 0.100000024f > 0.1f, so the second position is rejected
  // although the exact "sum before" is 0.1f.
  const std::vector<float> h = {0.5f, 0.1f};
  std::vector<uint8_t> acc(2);
  EXPECT_EQ(entropy_bound_accept(h, 0.1, acc), 1);
  EXPECT_EQ(acc, (std::vector<uint8_t>{0, 1}));
}

TEST(EntropyBoundAccept, HugeBoundAcceptsAll) {
  const std::vector<float> many = {4.f, 5.f, 6.f, 7.f};
  std::vector<uint8_t> all(4);
  EXPECT_EQ(entropy_bound_accept(many, 1e9, all), 4);
}

TEST(Renoise, AcceptedKeepSampleOthersGetNoise) {
  const std::vector<uint8_t> acc = {1, 0, 1};
  const std::vector<int32_t> sample = {10, 11, 12}, noise = {20, 21, 22};
  std::vector<int32_t> next(3);
  renoise(acc, sample, noise, next);
  EXPECT_EQ(next, (std::vector<int32_t>{10, 21, 12}));
}

TEST(Confidence, StrictlyBelowThreshold) {
  EXPECT_TRUE(is_confident(0.004f, 0.005));
  EXPECT_FALSE(is_confident(0.005f, 0.005));
  EXPECT_FALSE(is_confident(0.006f, 0.005));
  EXPECT_FLOAT_EQ(mean_entropy(std::vector<float>{1.f, 2.f, 3.f, 6.f}), 3.f);
}

TEST(StabilityTracker, ZeroThresholdIsAlwaysStable) {
  StabilityTracker t(0, 3);
  EXPECT_TRUE(t.update(std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(t.update(std::vector<int32_t>{4, 5, 6}));
}

TEST(StabilityTracker, FirstStepNeverStable) {
  StabilityTracker t(1, 2);
  const std::vector<int32_t> a = {1, 2}, b = {1, 3};
  EXPECT_FALSE(t.update(a));
  EXPECT_TRUE(t.update(a));
  EXPECT_FALSE(t.update(b));
  EXPECT_TRUE(t.update(b));
  t.reset();  // new canvas: history back to the sentinel
  EXPECT_FALSE(t.update(b));
}

TEST(StabilityTracker, UsesWholeHistoryNotJustLastStep) {
  // docs/model.md §6.3 pitfall 5: threshold 2 needs the two previous argmax canvases.
  StabilityTracker t(2, 1);
  const std::vector<int32_t> a = {7}, b = {8};
  EXPECT_FALSE(t.update(a));  // history [-1, -1]
  EXPECT_FALSE(t.update(a));  // history [-1, a]
  EXPECT_TRUE(t.update(a));   // history [a, a]
  EXPECT_FALSE(t.update(b));  // [a, a] vs b
  EXPECT_FALSE(t.update(b));  // [a, b] vs b: one previous differs
  EXPECT_TRUE(t.update(b));
}

TEST(PadAfterFirstEos, KeepsFirstEosAndPadsTheRest) {
  std::vector<int32_t> canvas = {5, 106, 7, 1, 9};
  const std::vector<int32_t> eos = {1, 106, 50};
  EXPECT_TRUE(pad_after_first_eos(canvas, eos, 0));
  EXPECT_EQ(canvas, (std::vector<int32_t>{5, 106, 0, 0, 0}));

  std::vector<int32_t> none = {5, 6, 7};
  EXPECT_FALSE(pad_after_first_eos(none, eos, 0));
  EXPECT_EQ(none, (std::vector<int32_t>{5, 6, 7}));

  std::vector<int32_t> last = {5, 6, 50};
  EXPECT_TRUE(pad_after_first_eos(last, eos, 0));
  EXPECT_EQ(last, (std::vector<int32_t>{5, 6, 50}));

  std::vector<int32_t> no_eos_ids = {1, 2};
  EXPECT_FALSE(pad_after_first_eos(no_eos_ids, std::vector<int32_t>{}, 0));
}

}  // namespace
}  // namespace dgemma

namespace dgemma {
namespace {

// process_row = apply_temperature + row_stats + RandomDraws::sample_token's
// inverse CDF, bit for bit, including -inf (masked) logits and huge values.
TEST(ProcessRow, EqualsTheSeparatePasses) {
  const size_t V = 1000;
  std::vector<float> raw(V), scratch(V);
  uint64_t s = 12345;
  for (int trial = 0; trial < 20; ++trial) {
    for (size_t v = 0; v < V; ++v) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      raw[v] = float(int64_t(s >> 33) % 20000) / 1000.0f - 10.0f;
    }
    if (trial % 3 == 1) raw[7] = raw[500] = -std::numeric_limits<float>::infinity();
    if (trial % 5 == 2) raw[3] = 3e4f;
    const float T = 0.4f + 0.05f * float(trial);
    const double u = double(trial) / 20.0 + 0.013;
    std::vector<float> z = raw;
    apply_temperature(z, T);
    const RowStats st = row_stats(z);
    std::vector<float> row = raw;
    const RowPass r = process_row(row.data(), V, T, &u, scratch.data(), "t");
    EXPECT_EQ(row, z) << trial;
    EXPECT_EQ(r.argmax, st.argmax) << trial;
    EXPECT_EQ(bits(r.entropy), bits(st.entropy)) << trial;
    // Inverse CDF by hand over exp(z - max z).
    const float mx = z[size_t(st.argmax)];
    double total = 0;
    for (float x : z) total += double(std::exp(x - mx));
    double cdf = 0;
    int32_t expect = -1;
    for (size_t v = 0; v < V && expect < 0; ++v) {
      const float p = std::exp(z[v] - mx);
      if (p <= 0.0f) continue;
      cdf += double(p);
      if (cdf > u * total) expect = int32_t(v);
    }
    EXPECT_EQ(r.sample, expect) << trial;
    EXPECT_NE(raw[size_t(r.sample)], -std::numeric_limits<float>::infinity());
  }
  std::vector<float> row = raw;
  const RowPass no_draw = process_row(row.data(), V, 1.0f, nullptr, scratch.data(), "t");
  EXPECT_EQ(no_draw.sample, -1);
}

TEST(ProcessRow, BadLogitsNameTheRow) {
  std::vector<float> row = {1.f, std::numeric_limits<float>::infinity(), 0.f}, scratch(3);
  EXPECT_THROW(process_row(row.data(), 3, 1.f, nullptr, scratch.data(), "canvas 2 step 3"), Error);
  std::vector<float> masked(3, -std::numeric_limits<float>::infinity());
  try {
    process_row(masked.data(), 3, 1.f, nullptr, scratch.data(), "canvas 2 step 3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("canvas 2 step 3: every logit is -inf"), std::string::npos) << e.what();
  }
}

TEST(InverseCdf, SkipsZeroWeightsAndClampsToTheLastPositive) {
  const float p[5] = {0.f, 1.f, 0.f, 2.f, 0.f};
  EXPECT_EQ(inverse_cdf(p, 5, 0.0), 1);
  EXPECT_EQ(inverse_cdf(p, 5, 0.999), 1);
  EXPECT_EQ(inverse_cdf(p, 5, 1.0), 3);
  EXPECT_EQ(inverse_cdf(p, 5, 3.5), 3);  // beyond the total: last positive
  const float z[2] = {0.f, 0.f};
  EXPECT_EQ(inverse_cdf(z, 2, 0.0), -1);
}

}  // namespace
}  // namespace dgemma
