// The processor's expansion of image placeholders (tokenizer/image_placeholders.h,
// docs/model.md §7.6): BOI, n soft-token placeholders, EOI per image, in order.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "tokenizer/image_placeholders.h"

namespace dgemma {
namespace {

constexpr ImageTokenIds kIds{511, 509, 510};  // golden V's image, BOI and EOI ids

TEST(ImagePlaceholders, EachPlaceholderBecomesItsImagesRun) {
  const std::vector<int32_t> ids = {2, 7, 511, 8, 511, 9};
  const std::vector<int64_t> counts = {2, 3};
  EXPECT_EQ(expand_image_placeholders(ids, counts, kIds),
            (std::vector<int32_t>{2, 7, 509, 511, 511, 510, 8, 509, 511, 511, 511, 510, 9}));
}

TEST(ImagePlaceholders, NoImagesLeavesTextAlone) {
  const std::vector<int32_t> ids = {2, 7, 8};
  EXPECT_EQ(expand_image_placeholders(ids, {}, kIds), ids);
}

TEST(ImagePlaceholders, CountMismatchNamesBothNumbers) {
  const std::vector<int32_t> ids = {2, 511, 511};
  const std::vector<int64_t> one = {4};
  try {
    expand_image_placeholders(ids, one, kIds);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 image placeholders"), std::string::npos) << what;
    EXPECT_NE(what.find("1 image was given"), std::string::npos) << what;
  }
  const std::vector<int32_t> text = {2, 7};
  EXPECT_THROW(expand_image_placeholders(text, one, kIds), Error);
  const std::vector<int64_t> zero = {0, 3};
  EXPECT_THROW(expand_image_placeholders(ids, zero, kIds), Error);
  EXPECT_THROW(expand_image_placeholders(ids, {}, ImageTokenIds{}), Error);
}

}  // namespace
}  // namespace dgemma
