// How the differential checker compares one output (backend/differential_backend.h):
// a NaN anywhere fails, and its distance and cosine are NaN, not the 1.0 of
// the elements that remain; infinities must match exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/differential_backend.h"

namespace dgemma {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor f32(std::vector<float> v) {
  Tensor t;
  t.shape = {int64_t(v.size())};
  t.f = std::move(v);
  return t;
}

TEST(CompareOutput, EqualValuesAgree) {
  const OpComparison r = compare_output(f32({1, -2, 3, 0.5f}), f32({1, -2, 3, 0.5f}), Tolerance{});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.max_abs, 0.0);
  EXPECT_NEAR(r.cosine, 1.0, 1e-15);
}

TEST(CompareOutput, ANanInTheTargetFailsWithNanMeasures) {
  // 999 equal elements and one NaN: the remaining elements alone would give cosine 1.
  std::vector<float> ref(1000, 0.25f), got = ref;
  got[7] = kNaN;
  const OpComparison r = compare_output(f32(ref), f32(got), Tolerance{});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "nan");
  EXPECT_TRUE(std::isnan(r.cosine));
  EXPECT_TRUE(std::isnan(r.max_abs));
  EXPECT_NE(r.message.find("1 NaN in the target's output, 0 in the reference's (first at element 7 of 1000)"),
            std::string::npos)
      << r.message;
}

TEST(CompareOutput, ANanOnEitherSideFails) {
  // The same NaN on both sides used to be skipped as agreement.
  OpComparison both = compare_output(f32({1, kNaN, 3}), f32({1, kNaN, 3}), Tolerance{});
  EXPECT_FALSE(both.ok);
  EXPECT_EQ(both.failure, "nan");
  EXPECT_TRUE(std::isnan(both.cosine));
  OpComparison ref_only = compare_output(f32({kNaN, 2}), f32({1, 2}), Tolerance{});
  EXPECT_FALSE(ref_only.ok);
  EXPECT_TRUE(std::isnan(ref_only.cosine));
  EXPECT_NE(ref_only.message.find("0 NaN in the target's output, 1 in the reference's"), std::string::npos)
      << ref_only.message;
}

TEST(CompareOutput, InfinitiesMustMatch) {
  EXPECT_TRUE(compare_output(f32({kInf, 1}), f32({kInf, 1}), Tolerance{}).ok);
  const OpComparison r = compare_output(f32({1, 1}), f32({kInf, 1}), Tolerance{});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "nan");  // a non-finite target value
  EXPECT_TRUE(std::isinf(r.max_abs));
  EXPECT_TRUE(std::isnan(r.cosine));
}

}  // namespace
}  // namespace dgemma
