// The observer behind calibration (calibrate/expert_amax_observer.h), fed
// taps by hand: each expert's gate/up range is the largest |x| over the rows
// of the tokens routed to it, its down range the largest |a| over its own
// (token, slot) rows; passes not watched are ignored; non-finite values and
// taps without their routing are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "calibrate/expert_amax_observer.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

Tensor idx_of(std::vector<int32_t> v, int64_t M, int64_t K) {
  Tensor t = Tensor::i32({M, K});
  t.i = std::move(v);
  return t;
}

Tensor f32_of(std::vector<int64_t> shape, std::vector<float> v) {
  Tensor t = Tensor::f32(std::move(shape));
  t.f = std::move(v);
  return t;
}

TEST(ExpertAmaxObserver, RangesOverRoutedTokensOnly) {
  ExpertAmaxObserver obs(2, 4, /*encoder=*/true, /*decoder=*/false);
  EXPECT_TRUE(obs.wants_expert_inputs());
  // Layer 1, 3 tokens, top-2: token 0 -> {2, 0}, token 1 -> {0, 1}, token 2 -> {1, 2}.
  obs.on_tap("encoder.router.1.top_k_index", idx_of({2, 0, 0, 1, 1, 2}, 3, 2));
  obs.on_tap("encoder.experts.1.input", f32_of({3, 2}, {0.5f, -4.0f, 1.0f, 2.0f, -8.0f, 3.0f}));
  // down_input [3, 2, 2]: a row per (token, slot).
  obs.on_tap("encoder.experts.1.down_input", f32_of({3, 2, 2}, {1, -9, 2, 2, 3, 3, -6, 4, 5, 5, 0.25f, -0.5f}));
  const ExpertActivationRanges& r = obs.ranges();
  EXPECT_EQ(r.gate_up_amax[r.at(1, 0)], 4.0f);  // tokens 0, 1
  EXPECT_EQ(r.gate_up_amax[r.at(1, 1)], 8.0f);  // tokens 1, 2
  EXPECT_EQ(r.gate_up_amax[r.at(1, 2)], 8.0f);  // tokens 0, 2
  EXPECT_EQ(r.gate_up_amax[r.at(1, 3)], 0.0f);  // nobody
  EXPECT_EQ(r.down_amax[r.at(1, 2)], 9.0f);     // (0,0) and (2,1)
  EXPECT_EQ(r.down_amax[r.at(1, 0)], 3.0f);     // (0,1) and (1,0)
  EXPECT_EQ(r.down_amax[r.at(1, 1)], 6.0f);     // (1,1) and (2,0)
  EXPECT_EQ(r.routed[r.at(1, 0)], 2);
  EXPECT_EQ(r.routed[r.at(1, 3)], 0);
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(r.gate_up_amax[r.at(0, e)], 0.0f);
  // The decoder is not watched; other taps are ignored.
  obs.on_tap("decoder.router.1.top_k_index", idx_of({3, 3, 3, 3, 3, 3}, 3, 2));
  obs.on_tap("decoder.experts.1.input", f32_of({3, 2}, {100, 100, 100, 100, 100, 100}));
  obs.on_tap("encoder.layer_out.1", f32_of({1}, {1000}));
  EXPECT_EQ(r.gate_up_amax[r.at(1, 3)], 0.0f);
}

TEST(ExpertAmaxObserver, BothPassesShareTheRanges) {
  ExpertAmaxObserver obs(1, 2, true, true);
  obs.on_tap("encoder.router.0.top_k_index", idx_of({0}, 1, 1));
  obs.on_tap("encoder.experts.0.input", f32_of({1, 1}, {2}));
  obs.on_tap("decoder.router.0.top_k_index", idx_of({0}, 1, 1));
  obs.on_tap("decoder.experts.0.input", f32_of({1, 1}, {-3}));
  EXPECT_EQ(obs.ranges().gate_up_amax[0], 3.0f);
}

TEST(ExpertAmaxObserver, NonFiniteAndUnroutedTapsAreErrors) {
  ExpertAmaxObserver obs(1, 2, true, false);
  EXPECT_THROW(obs.on_tap("encoder.experts.0.input", f32_of({1, 1}, {2})), Error);  // no routing yet
  obs.on_tap("encoder.router.0.top_k_index", idx_of({1}, 1, 1));
  EXPECT_THROW(obs.on_tap("encoder.experts.0.input", f32_of({1, 2}, {1, std::nanf("")})), Error);
  EXPECT_THROW(obs.on_tap("encoder.experts.0.input", f32_of({1, 1}, {std::numeric_limits<float>::infinity()})), Error);
  EXPECT_THROW(obs.on_tap("encoder.experts.0.down_input", f32_of({2, 1, 1}, {1, 1})), Error);  // 2 tokens vs 1
  obs.on_tap("encoder.router.0.top_k_index", idx_of({5}, 1, 1));
  EXPECT_THROW(obs.on_tap("encoder.experts.0.input", f32_of({1, 1}, {1})), Error);  // expert 5 of 2
}

}  // namespace
}  // namespace dgemma
