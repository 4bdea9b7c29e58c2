#pragma once
// The image processor's settings (docs/image.md §5.1): what a checkpoint's
// preprocessor_config.json says about patch size and soft-token budget, with
// every fixed part of the pipeline checked.
#include <cstdint>
#include <string>
#include <string_view>

namespace dgemma {

struct ImageProcessorConfig {
  int64_t patch_size = 16;          // p: pixels per patch side
  int64_t max_soft_tokens = 280;    // one of 70, 140, 280, 560, 1120
  int64_t pooling_kernel_size = 3;  // k: patches per soft-token side

  int64_t max_patches() const { return max_soft_tokens * pooling_kernel_size * pooling_kernel_size; }
  // Rows of one patch vector: 3·p².
  int64_t patch_values() const { return 3 * patch_size * patch_size; }
};

// Parses and validates a preprocessor_config.json text; `source` names it in
// errors. Missing keys keep their defaults.
ImageProcessorConfig parse_image_processor_config(std::string_view json_text, const std::string& source);

// <folder>/preprocessor_config.json, or the defaults (16, 280, 3) when the
// folder has none.
ImageProcessorConfig read_image_processor_config(const std::string& folder);

}  // namespace dgemma
