#pragma once
// The processor's expansion of image placeholders at the id level
// (docs/model.md §7.6): each `<|image|>` id of a rendered prompt becomes
// BOI, n_soft `<|image|>` ids, EOI, where n_soft is that image's count of
// soft tokens. Special tokens are atomic in the tokenizer, so expanding the
// ids gives the ids of the expanded text.
#include <cstdint>
#include <span>
#include <vector>

namespace dgemma {

struct ImageTokenIds {
  int32_t image = -1, boi = -1, eoi = -1;
};

// Expands the placeholders of `ids` in order with `soft_counts` (one per
// image). Throws dgemma::Error when the number of placeholders differs from
// the number of images, naming both, or when a count is not positive.
std::vector<int32_t> expand_image_placeholders(std::span<const int32_t> ids, std::span<const int64_t> soft_counts,
                                               const ImageTokenIds& tokens);

}  // namespace dgemma
