#pragma once
// From an image to the vision tower's input (docs/image.md §5–§8): the target
// size, Pillow's bicubic resize, rescale to [0, 1] and patchify.
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/vision_input.h"
#include "image/image_processor_config.h"
#include "image/rgb_image.h"

namespace dgemma {

class ThreadPool;

struct TargetSize {
  int64_t height = 0, width = 0;
};

// The size an image of height × width is resized to: the largest multiple of
// patch_size·pooling_kernel_size per side that keeps the aspect ratio within
// the max_soft_tokens budget (docs/image.md §5.2). Throws dgemma::Error when
// no such size exists.
TargetSize target_size(int64_t height, int64_t width, const ImageProcessorConfig& config);

// The resized image cut into patches (docs/image.md §8): only the real
// patches, in raster order, pixels rescaled by the table of §7.
VisionInput patchify(const RgbImage& resized, const ImageProcessorConfig& config);

// Every stage, for callers that show or check them (`dgemma forward --image`
// writes image.decoded and image.resized).
struct PreprocessedImage {
  RgbImage decoded;  // upright RGB as decoded
  RgbImage resized;  // at target_size (the same bytes when no resize was needed)
  VisionInput input;
};

PreprocessedImage preprocess_image(RgbImage decoded, const ImageProcessorConfig& config, ThreadPool* pool = nullptr);
// Decodes (decode_image) and preprocesses; errors as decode_image's.
PreprocessedImage preprocess_image(std::span<const uint8_t> bytes, const ImageProcessorConfig& config,
                                   const ImageLimits& limits = {}, ThreadPool* pool = nullptr);

// The reference processor's padded tensors (docs/image.md §8.2): pixel_values
// [1, max_patches, 3·p²] F32 with zero rows after the real ones, and
// positions [1, max_patches, 2] I32 with (−1, −1) rows after them.
struct PaddedVisionInput {
  Tensor pixel_values;
  Tensor positions;
};
PaddedVisionInput pad_to_max_patches(const VisionInput& input, const ImageProcessorConfig& config);

// float32(v · (1/255 as a double)) for v = 0..255 (docs/image.md §7).
float rescale_u8(uint8_t v);

}  // namespace dgemma
