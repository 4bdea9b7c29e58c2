#include "image_inputs.h"

#include <utility>

#include "dgemma/error.h"
#include "image/decode_image.h"

namespace dgemma::cli {

void ImageFlags::add_to(FlagParser& p) {
  p.add_strings("--image", &files,
                "a picture (PNG, JPEG or WebP) for the vision tower; repeat for several, in prompt order", "FILE");
  p.add_int("--max-image-pixels", &max_pixels, "largest picture in width x height; larger are refused before decoding",
            1);
}

ImageLimits ImageFlags::limits() const {
  ImageLimits l;
  l.max_pixels = uint64_t(max_pixels);
  return l;
}

ImageProcessorConfig model_image_processor(const DiffusionGemma& model, const std::string& dir) {
  const ModelConfig& c = model.config();
  if (!c.vision_tower)
    throw Error(c.source + ": this model has no vision tower, so it takes no images" +
                (c.has_vision_config ? " (its checkpoint stores none of the tower's tensors)" : ""));
  ImageProcessorConfig p = read_image_processor_config(dir);
  if (p.patch_size != c.vision.patch_size || p.pooling_kernel_size != c.vision.pooling_kernel_size)
    throw Error(dir + "/preprocessor_config.json: patch_size " + std::to_string(p.patch_size) +
                " and pooling_kernel_size " + std::to_string(p.pooling_kernel_size) +
                " differ from the vision tower's " + std::to_string(c.vision.patch_size) + " and " +
                std::to_string(c.vision.pooling_kernel_size) + " (config.json vision_config)");
  return p;
}

ImageTokenIds model_image_tokens(const DiffusionGemma& model) {
  const ModelConfig& c = model.config();
  return {int32_t(c.image_token_id), int32_t(c.boi_token_id), int32_t(c.eoi_token_id)};
}

std::vector<PreprocessedImage> load_image_files(const std::vector<std::string>& files,
                                                const ImageProcessorConfig& config, const ImageLimits& limits,
                                                ThreadPool* pool) {
  std::vector<PreprocessedImage> out;
  out.reserve(files.size());
  for (const std::string& f : files) {
    RgbImage decoded = decode_image_file(f, limits);  // errors name the file
    out.push_back(preprocess_image(std::move(decoded), config, pool));
  }
  return out;
}

std::vector<VisionInput> vision_inputs(std::vector<PreprocessedImage> images) {
  std::vector<VisionInput> out;
  out.reserve(images.size());
  for (PreprocessedImage& i : images) out.push_back(std::move(i.input));
  return out;
}

}  // namespace dgemma::cli
