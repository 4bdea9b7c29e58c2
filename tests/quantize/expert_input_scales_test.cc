// NVFP4 activation scales from calibrated ranges (quantize/expert_input_scales.h):
// amax / 2688 in float32; ModelOpt's shared rule writes the layer's largest
// range for every expert, the per-expert rule each expert's own with the
// layer's for experts no token reached; a layer whose range is 0 or not
// finite is an error naming it.
#include <gtest/gtest.h>

#include <cmath>

#include "dgemma/error.h"
#include "quantize/expert_input_scales.h"

namespace dgemma {
namespace {

ExpertActivationRanges two_layers() {
  ExpertActivationRanges r;
  r.resize(2, 3);
  r.gate_up_amax = {1.5f, 0.0f, 6.0f, 2688.0f, 1.0f, 3.0f};
  r.down_amax = {0.25f, 0.0f, 0.5f, 7.0f, 7.5f, 1e-3f};
  return r;
}

TEST(ExpertInputScales, SharedIsTheLayerMaximumForEveryExpert) {
  const ExpertInputScales s = expert_input_scales(two_layers(), false);
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(s.gate_up[size_t(e)], 6.0f / 2688.0f);
    EXPECT_EQ(s.gate_up[size_t(3 + e)], 1.0f);
    EXPECT_EQ(s.down[size_t(e)], 0.5f / 2688.0f);
    EXPECT_EQ(s.down[size_t(3 + e)], 7.5f / 2688.0f);
  }
}

TEST(ExpertInputScales, PerExpertWithTheLayerForUnreachedExperts) {
  const ExpertInputScales s = expert_input_scales(two_layers(), true);
  EXPECT_EQ(s.gate_up[0], 1.5f / 2688.0f);
  EXPECT_EQ(s.gate_up[1], 6.0f / 2688.0f);  // no token: the layer's
  EXPECT_EQ(s.gate_up[2], 6.0f / 2688.0f);
  EXPECT_EQ(s.down[5], 1e-3f / 2688.0f);
  EXPECT_EQ(s.down[1], 0.5f / 2688.0f);
}

TEST(ExpertInputScales, ZeroOrNonFiniteLayersAreErrors) {
  ExpertActivationRanges r = two_layers();
  r.down_amax[3] = r.down_amax[4] = r.down_amax[5] = 0.0f;
  try {
    expert_input_scales(r, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1: every down input was 0"), std::string::npos) << e.what();
  }
  r = two_layers();
  r.gate_up_amax[4] = std::nanf("");
  EXPECT_THROW(expert_input_scales(r, true), Error);
  r = two_layers();
  r.gate_up_amax.pop_back();
  EXPECT_THROW(expert_input_scales(r, true), Error);
}

}  // namespace
}  // namespace dgemma
