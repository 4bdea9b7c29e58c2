#pragma once
// Pictures given on the command line (run, chat, generate, forward): the
// --image flag, the model's image processor, and the files made ready for the
// vision tower (docs/image.md).
#include <cstdint>
#include <string>
#include <vector>

#include "core/vision_input.h"
#include "flags.h"
#include "image/image_preprocess.h"
#include "image/image_processor_config.h"
#include "model/diffusion_gemma.h"
#include "tokenizer/image_placeholders.h"

namespace dgemma::cli {

struct ImageFlags {
  std::vector<std::string> files;  // --image FILE, in order (repeatable)
  int64_t max_pixels = int64_t(ImageLimits::kDefaultMaxPixels);

  void add_to(FlagParser& p);
  ImageLimits limits() const;
};

// The image processor of the checkpoint in `dir` (its preprocessor_config.json,
// else the defaults), checked against the model's vision tower: the same
// patch size and pooling. Throws dgemma::Error (naming both values) on a
// mismatch, and when the model has no vision tower.
ImageProcessorConfig model_image_processor(const DiffusionGemma& model, const std::string& dir);

// The model's image placeholder, begin and end ids.
ImageTokenIds model_image_tokens(const DiffusionGemma& model);

// Each file decoded and preprocessed, in order; errors name the file.
std::vector<PreprocessedImage> load_image_files(const std::vector<std::string>& files,
                                                const ImageProcessorConfig& config, const ImageLimits& limits,
                                                ThreadPool* pool);
std::vector<VisionInput> vision_inputs(std::vector<PreprocessedImage> images);

}  // namespace dgemma::cli
