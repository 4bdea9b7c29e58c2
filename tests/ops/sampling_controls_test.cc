// The sampling controls of the row pass (docs/model.md §3.7): the filters of
// draw B on hand-built weight rows, the penalties on hand-computed logits,
// and what process_row does with each. Every expected value is worked out by
// hand in the comment next to it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/row_sampling.h"
#include "ops/sampling_filters.h"
#include "ops/token_penalties.h"

namespace dgemma {
namespace {

// Weights (powers of two: every sum below is exact). Ranked: id1 (1), id2
// (0.5), id4 (0.5, after id2 by index), id0 (0.25), id3 (0.125), id5
// (0.0625); total 2.4375.
const std::vector<float> kWeights = {0.25f, 1.0f, 0.5f, 0.125f, 0.5f, 0.0625f};

std::vector<float> filtered(const SamplingFilters& f, double* kept = nullptr, std::vector<float> w = kWeights) {
  const double sum = filter_weights(w.data(), w.size(), f);
  if (kept != nullptr) *kept = sum;
  return w;
}

SamplingFilters top_k(int64_t k) {
  SamplingFilters f;
  f.top_k = k;
  return f;
}
SamplingFilters top_p(double p) {
  SamplingFilters f;
  f.top_p = p;
  return f;
}
SamplingFilters min_p(double p) {
  SamplingFilters f;
  f.min_p = p;
  return f;
}

TEST(SamplingFilters, TopKKeepsTheKHeaviestTiesByLowerIndex) {
  double kept = 0;
  // k = 2: id1 and id2; id4 ties id2 at 0.5 and loses on index.
  EXPECT_EQ(filtered(top_k(2), &kept), (std::vector<float>{0, 1, 0.5f, 0, 0, 0}));
  EXPECT_EQ(kept, 1.5);
  // k = 3: id1, id2, id4 = 2.0.
  EXPECT_EQ(filtered(top_k(3), &kept), (std::vector<float>{0, 1, 0.5f, 0, 0.5f, 0}));
  EXPECT_EQ(kept, 2.0);
  // k = 1 keeps the first maximum only, even against a tie.
  EXPECT_EQ(filtered(top_k(1), nullptr, {0.5f, 1, 1}), (std::vector<float>{0, 1, 0}));
  // k at or beyond the tokens with weight > 0 keeps them all; zero weights stay zero.
  EXPECT_EQ(filtered(top_k(6), &kept), kWeights);
  EXPECT_EQ(kept, 2.4375);
  EXPECT_EQ(filtered(top_k(3), nullptr, {0, 1, 0, 0.5f}), (std::vector<float>{0, 1, 0, 0.5f}));
}

TEST(SamplingFilters, TopPKeepsTheShortestRankedPrefixReachingP) {
  double kept = 0;
  // p = 0.5: target 1.21875; cumulative 1 (short), 1.5 (reaches): id1, id2.
  EXPECT_EQ(filtered(top_p(0.5), &kept), (std::vector<float>{0, 1, 0.5f, 0, 0, 0}));
  EXPECT_EQ(kept, 1.5);
  // p = 0.4: target 0.975 <= 1: the top token alone.
  EXPECT_EQ(filtered(top_p(0.4), &kept), (std::vector<float>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(kept, 1.0);
  // p = 0.9: target 2.19375; 1, 1.5, 2.0, 2.25 (reaches): id1, id2, id4, id0.
  EXPECT_EQ(filtered(top_p(0.9)), (std::vector<float>{0.25f, 1, 0.5f, 0, 0.5f, 0}));
  // "Reaches" includes equality: total 2, p = 0.75, target 1.5 = 1 + 0.5 exactly.
  EXPECT_EQ(filtered(top_p(0.75), nullptr, {0.25f, 0.5f, 1, 0.25f}), (std::vector<float>{0, 0.5f, 1, 0}));
  // A tiny p still keeps the most likely token.
  EXPECT_EQ(filtered(top_p(1e-9)), (std::vector<float>{0, 1, 0, 0, 0, 0}));
}

TEST(SamplingFilters, TopPSortsOnlyWhatItNeedsAndStillRanksLongRows) {
  // 1000 tokens: weight 1 at id 999, then 0.5 at ids 0..499 and 0.25 at ids
  // 500..998 (total 1 + 250 + 124.75 = 375.75). p = 0.5: target 187.875;
  // 1 + 0.5 k >= 187.875 first at k = 374 (188.0): ids 0..373 and 999 remain.
  std::vector<float> w(1000);
  for (size_t v = 0; v < 1000; ++v) w[v] = v < 500 ? 0.5f : 0.25f;
  w[999] = 1.0f;
  double kept = 0;
  const std::vector<float> out = filtered(top_p(0.5), &kept, w);
  for (size_t v = 0; v < 1000; ++v) EXPECT_EQ(out[v], v < 374 || v == 999 ? w[v] : 0.0f) << v;
  EXPECT_EQ(kept, 188.0);
}

TEST(SamplingFilters, MinPDropsTokensBelowAShareOfTheTop) {
  double kept = 0;
  // min_p = 0.3: 0.25, 0.125, 0.0625 fall below 0.3 x 1.
  EXPECT_EQ(filtered(min_p(0.3), &kept), (std::vector<float>{0, 1, 0.5f, 0, 0.5f, 0}));
  EXPECT_EQ(kept, 2.0);
  // The boundary is kept: w = 0.5 is not below 0.5.
  EXPECT_EQ(filtered(min_p(0.5)), (std::vector<float>{0, 1, 0.5f, 0, 0.5f, 0}));
  // min_p = 1 keeps the ties of the top.
  EXPECT_EQ(filtered(min_p(1.0), nullptr, {1, 0.5f, 1}), (std::vector<float>{1, 0, 1}));
}

TEST(SamplingFilters, EachFilterSeesTheSurvivorsOfTheOneBefore) {
  // top_k 3 leaves id1, id2, id4 (total 2); top_p 0.7 over them: target 1.4,
  // reached at 1.5 (id1, id2). Over the whole row (target 1.70625) it would
  // have kept id4 as well.
  SamplingFilters f = top_k(3);
  f.top_p = 0.7;
  double kept = 0;
  EXPECT_EQ(filtered(f, &kept), (std::vector<float>{0, 1, 0.5f, 0, 0, 0}));
  EXPECT_EQ(kept, 1.5);
  // min_p 0.6 then drops id2 (0.5 < 0.6).
  f.min_p = 0.6;
  EXPECT_EQ(filtered(f, &kept), (std::vector<float>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(kept, 1.0);
}

TEST(SamplingFilters, OffIsNotActiveAndChangesNothing) {
  const SamplingFilters off;
  EXPECT_FALSE(off.active());
  EXPECT_TRUE(top_k(1).active());
  EXPECT_TRUE(top_p(0.99).active());
  EXPECT_TRUE(min_p(0.01).active());
  double kept = 0;
  EXPECT_EQ(filtered(off, &kept), kWeights);
  EXPECT_EQ(kept, 2.4375);
}

TEST(TokenPenalties, PenalizedLogitsByHand) {
  TokenPenalties p;
  p.repeat = 2.0;
  EXPECT_EQ(penalize_logit(3.0f, 1, p), 1.5f);    // positive: divided
  EXPECT_EQ(penalize_logit(-3.0f, 1, p), -6.0f);  // negative: multiplied
  EXPECT_EQ(penalize_logit(0.0f, 1, p), 0.0f);
  p.repeat = 1.0;
  p.frequency = 0.5;
  p.presence = 1.0;
  EXPECT_EQ(penalize_logit(3.0f, 3, p), 0.5f);  // 3 - (0.5 x 3 + 1)
  EXPECT_EQ(penalize_logit(3.0f, 1, p), 1.5f);  // 3 - (0.5 + 1)
  // Both: 4 / 2 = 2, then 2 - (0.5 x 2 + 0.25) = 0.75.
  p.repeat = 2.0;
  p.presence = 0.25;
  EXPECT_EQ(penalize_logit(4.0f, 2, p), 0.75f);
  // A negative penalty raises the logit: 1 - (-1 x 1 + 0) = 2.
  TokenPenalties encourage;
  encourage.frequency = -1.0;
  EXPECT_EQ(penalize_logit(1.0f, 1, encourage), 2.0f);
  // -inf (a masked token) stays -inf.
  EXPECT_EQ(penalize_logit(-std::numeric_limits<float>::infinity(), 5, p), -std::numeric_limits<float>::infinity());
}

TEST(TokenPenalties, ApplyTouchesOnlyCountedTokensInRange) {
  TokenPenalties p;
  p.presence = 1.0;
  p.counts = {{1, 2}, {3, 1}, {7, 4}, {-1, 1}};  // 7 and -1 are outside a vocabulary of 4
  std::vector<float> row = {2.0f, 2.0f, 2.0f, 2.0f};
  apply_penalties(row.data(), row.size(), p);
  EXPECT_EQ(row, (std::vector<float>{2.0f, 1.0f, 2.0f, 1.0f}));
  EXPECT_FALSE(TokenPenalties{}.active());
  EXPECT_TRUE(p.active());
}

// process_row with controls: penalties move z (and so the argmax and the
// entropy), filters move only the draw.
TEST(RowControls, PenaltiesChangeTheArgmaxFiltersOnlyTheDraw) {
  // Raw row {2, 1.5, 0}, token 0 counted once, presence 1: {1, 1.5, 0}, so
  // the argmax moves from 0 to 1; at T = 0.5, z = {2, 3, 0}.
  TokenPenalties penalties;
  penalties.presence = 1.0;
  penalties.counts = {{0, 1}};
  RowControls controls;
  controls.penalties = &penalties;
  std::vector<float> row = {2.0f, 1.5f, 0.0f}, scratch(3);
  const RowPass pass = process_row(row.data(), 3, 0.5f, nullptr, scratch.data(), "test", &controls);
  EXPECT_EQ(pass.argmax, 1);
  EXPECT_EQ(row, (std::vector<float>{2.0f, 3.0f, 0.0f}));
  // Entropy of softmax({2, 3, 0}) = log S - sum(e d)/S with d = {-1, 0, -3}.
  const double e0 = std::exp(-1.0), e2 = std::exp(-3.0), S = e0 + 1.0 + e2;
  EXPECT_NEAR(pass.entropy, std::log(S) - (-e0 - 3.0 * e2) / S, 1e-6);

  // Four equal logits: weights {1, 1, 1, 1}. u = 0.75: unfiltered the target
  // is 3 (cumulative 1, 2, 3, 4 > 3: token 3); top_k 2 keeps tokens 0 and 1,
  // target 1.5 (cumulative 1, 2 > 1.5: token 1). Argmax 0 and entropy log 4
  // either way.
  const double u = 0.75;
  std::vector<float> flat(4, 0.0f);
  scratch.resize(4);  // V floats
  const RowPass plain = process_row(flat.data(), 4, 1.0f, &u, scratch.data(), "test");
  EXPECT_EQ(plain.sample, 3);
  SamplingFilters filters;
  filters.top_k = 2;
  RowControls filtering;
  filtering.filters = &filters;
  std::vector<float> flat2(4, 0.0f);
  const RowPass top2 = process_row(flat2.data(), 4, 1.0f, &u, scratch.data(), "test", &filtering);
  EXPECT_EQ(top2.sample, 1);
  EXPECT_EQ(top2.argmax, 0);
  EXPECT_EQ(top2.entropy, plain.entropy);
  EXPECT_NEAR(top2.entropy, std::log(4.0), 1e-6);
  EXPECT_EQ(flat2, flat);  // z is not filtered
}

TEST(RowControls, FiltersNeverChangeTheArgmaxAndKeepTheDrawInsideTheKeptSet) {
  // Logits v / 8 for v = 0..63, except the maximum 8 at 17: the top 3 are
  // {17, 63, 62} (weights 1, e^-1/8, e^-2/8). Draws at 100 uniforms stay in
  // that set with top_k 3 and reach all three; without the filter most land
  // outside it. The argmax is 17 throughout.
  std::vector<float> base(64);
  for (size_t v = 0; v < 64; ++v) base[v] = float(v) / 8.0f;
  base[17] = 8.0f;
  SamplingFilters filters;
  filters.top_k = 3;
  RowControls controls;
  controls.filters = &filters;
  std::vector<float> scratch(64);
  int outside_unfiltered = 0;
  std::vector<int> hits(64, 0);
  for (int i = 0; i < 100; ++i) {
    const double u = (i + 0.5) / 100.0;
    std::vector<float> row = base;
    const RowPass pass = process_row(row.data(), 64, 1.0f, &u, scratch.data(), "test", &controls);
    EXPECT_EQ(pass.argmax, 17);
    ASSERT_TRUE(pass.sample == 17 || pass.sample == 63 || pass.sample == 62) << pass.sample;
    ++hits[size_t(pass.sample)];
    row = base;
    const RowPass plain = process_row(row.data(), 64, 1.0f, &u, scratch.data(), "test");
    outside_unfiltered += plain.sample != 17 && plain.sample != 63 && plain.sample != 62;
  }
  EXPECT_GT(hits[17], 0);
  EXPECT_GT(hits[63], 0);
  EXPECT_GT(hits[62], 0);
  EXPECT_GT(outside_unfiltered, 50);
}

}  // namespace
}  // namespace dgemma
