#pragma once
// The text model's side of image input (docs/model.md §7.6, §7.7): where a
// prompt's image placeholder ids lie, how the images' soft tokens replace
// them, and which keys the encoder's queries see around them.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace dgemma {

// The encoder's mask over a prompt with images (docs/model.md §7.7).
enum class ImageMask {
  kHf,      // Transformers' generate(): causal (sliding: within the window), or the same image block (default)
  kJax,     // Google's JAX code: full layers causal; sliding layers (causal or the same block) within ±window
  kCausal,  // a bare Transformers forward(): the text mask, images ignored
};

// "hf", "jax" or "causal"; anything else is a dgemma::Error naming the value.
ImageMask parse_image_mask(const std::string& name);
std::string_view image_mask_name(ImageMask mask);

// One maximal run of image placeholder ids: positions [first, first + count)
// of the ids of one encode call.
struct ImageRun {
  int64_t first = 0;
  int64_t count = 0;
};
std::vector<ImageRun> image_runs(std::span<const int32_t> ids, int64_t image_token_id);

// One block id per id: the index of the run holding it, -1 outside every run
// (the blocks input of the attention masks, ops/op.h kCausalWindowBlocks).
std::vector<int32_t> image_blocks(std::span<const int32_t> ids, int64_t image_token_id);

// Checks that the images' soft-token counts fit the runs, in order: as many
// runs as images, and run i holds exactly n_soft[i] placeholder ids. Throws a
// dgemma::Error (prefixed with `who`) naming both numbers otherwise. Returns
// the runs.
std::vector<ImageRun> match_image_runs(std::span<const int32_t> ids, int64_t image_token_id,
                                       std::span<const int64_t> n_soft, const std::string& who);

// Whether query row i may attend key row j of the same encode call over an
// empty cache under `mask` (docs/model.md §7.7): the rule the encoder's
// attention ops implement, as a plain function (tests rebuild the boolean
// mask matrices from it). window: the sliding window, 0 on full layers.
bool image_mask_allows(ImageMask mask, int64_t window, int64_t i, int64_t j, std::span<const int32_t> blocks);

}  // namespace dgemma
