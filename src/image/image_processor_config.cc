#include "image/image_processor_config.h"

#include <cmath>
#include <filesystem>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

[[noreturn]] void refuse(const std::string& source, const std::string& what) {
  throw Error(source + ": " + what + " (dgemma runs the Gemma 4 image pipeline only: docs/image.md §5.1)");
}

bool all_equal(const json::Value& v, double want, const std::string& what) {
  if (v.is_number()) return v.as_double(what) == want;
  for (const json::Value& x : v.as_array(what)) {
    if (x.as_double(what) != want) return false;
  }
  return true;
}

}  // namespace

ImageProcessorConfig parse_image_processor_config(std::string_view text, const std::string& source) {
  json::ParseOptions options;
  options.source = source;
  const json::Value root = json::parse(text, options);
  root.as_object(source);
  ImageProcessorConfig c;
  auto integer = [&](const char* key, int64_t& out) {
    if (const json::Value* v = root.find(key)) out = v->as_int(source + ": " + key);
  };
  integer("patch_size", c.patch_size);
  integer("max_soft_tokens", c.max_soft_tokens);
  integer("pooling_kernel_size", c.pooling_kernel_size);
  if (c.patch_size < 1 || c.patch_size > 1024) {
    refuse(source, "patch_size " + std::to_string(c.patch_size) + " is not between 1 and 1024");
  }
  if (c.pooling_kernel_size < 1 || c.pooling_kernel_size > 64) {
    refuse(source, "pooling_kernel_size " + std::to_string(c.pooling_kernel_size) + " is not between 1 and 64");
  }
  const int64_t t = c.max_soft_tokens;
  if (t != 70 && t != 140 && t != 280 && t != 560 && t != 1120) {
    refuse(source, "max_soft_tokens " + std::to_string(t) + " is not one of 70, 140, 280, 560, 1120");
  }
  if (const json::Value* v = root.find("resample"); v && v->as_int(source + ": resample") != 3) {
    refuse(source, "resample " + std::to_string(v->as_int()) + " is not 3 (bicubic)");
  }
  if (const json::Value* v = root.find("do_resize"); v && !v->as_bool(source + ": do_resize")) {
    refuse(source, "do_resize is false");
  }
  if (const json::Value* v = root.find("do_convert_rgb"); v && !v->as_bool(source + ": do_convert_rgb")) {
    refuse(source, "do_convert_rgb is false");
  }
  if (const json::Value* v = root.find("do_rescale"); v && !v->as_bool(source + ": do_rescale")) {
    refuse(source, "do_rescale is false");
  }
  if (const json::Value* v = root.find("rescale_factor")) {
    const double f = v->as_double(source + ": rescale_factor");
    if (std::fabs(f - 1.0 / 255.0) > 1e-12) refuse(source, "rescale_factor " + json::dump(*v) + " is not 1/255");
  }
  const json::Value* normalize = root.find("do_normalize");
  if (normalize && normalize->as_bool(source + ": do_normalize")) {
    const json::Value* mean = root.find("image_mean");
    const json::Value* std_dev = root.find("image_std");
    if (!mean || !std_dev || !all_equal(*mean, 0.0, source + ": image_mean") ||
        !all_equal(*std_dev, 1.0, source + ": image_std")) {
      refuse(source, "do_normalize is true with an image_mean other than 0 or an image_std other than 1");
    }
  }
  return c;
}

ImageProcessorConfig read_image_processor_config(const std::string& folder) {
  const std::string path = (std::filesystem::path(folder) / "preprocessor_config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ImageProcessorConfig{};
  return parse_image_processor_config(read_text_file(path), path);
}

}  // namespace dgemma
