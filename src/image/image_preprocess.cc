#include "image/image_preprocess.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "dgemma/error.h"
#include "image/decode_image.h"
#include "image/pillow_resize.h"

namespace dgemma {
namespace {

const std::array<float, 256>& rescale_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    const double factor = 1.0 / 255.0;
    for (int v = 0; v < 256; ++v) t[size_t(v)] = float(double(v) * factor);
    return t;
  }();
  return table;
}

}  // namespace

float rescale_u8(uint8_t v) { return rescale_table()[v]; }

TargetSize target_size(int64_t height, int64_t width, const ImageProcessorConfig& config) {
  if (height <= 0 || width <= 0) {
    throw Error("image has zero size (" + std::to_string(height) + "x" + std::to_string(width) + ")");
  }
  const int64_t k = config.pooling_kernel_size;
  const int64_t max_patches = config.max_patches();
  const double target_pixels = double(max_patches * config.patch_size * config.patch_size);
  const int64_t unit = config.patch_size * k;  // each side is a multiple of this
  // Doubles, in this order (docs/image.md §5.2).
  const double factor = std::sqrt(target_pixels / double(height * width));
  int64_t h = int64_t(std::floor(factor * double(height) / double(unit))) * unit;
  int64_t w = int64_t(std::floor(factor * double(width) / double(unit))) * unit;
  const int64_t max_side = (max_patches / (k * k)) * unit;
  if (h == 0 && w == 0) {
    throw Error("image of " + std::to_string(height) + "x" + std::to_string(width) +
                " has no target size (both sides round to zero)");
  }
  if (h == 0) {
    h = unit;
    w = std::min((width / height) * unit, max_side);
  } else if (w == 0) {
    w = unit;
    h = std::min((height / width) * unit, max_side);
  }
  return TargetSize{h, w};
}

VisionInput patchify(const RgbImage& resized, const ImageProcessorConfig& config) {
  const int64_t p = config.patch_size;
  if (resized.height % p != 0 || resized.width % p != 0) {
    throw Error("patchify: image of " + std::to_string(resized.height) + "x" + std::to_string(resized.width) +
                " is not a whole number of " + std::to_string(p) + "-pixel patches");
  }
  VisionInput in;
  in.grid_h = resized.height / p;
  in.grid_w = resized.width / p;
  const int64_t k = config.pooling_kernel_size;
  in.n_soft = (in.grid_h / k) * (in.grid_w / k);
  const int64_t n = in.grid_h * in.grid_w, values = config.patch_values();
  in.pixel_values = Tensor::f32({n, values});
  in.positions = Tensor::i32({n, 2});
  const std::array<float, 256>& table = rescale_table();
  // Patch (py, px) is row py·grid_w + px; inside it (dy, dx, channel), channel
  // fastest (docs/image.md §8.1).
  for (int64_t py = 0; py < in.grid_h; ++py) {
    for (int64_t px = 0; px < in.grid_w; ++px) {
      const int64_t patch = py * in.grid_w + px;
      float* out = in.pixel_values.f.data() + patch * values;
      for (int64_t dy = 0; dy < p; ++dy) {
        const uint8_t* src = resized.row(py * p + dy) + px * p * 3;
        for (int64_t j = 0; j < p * 3; ++j) *out++ = table[src[j]];
      }
      in.positions.i[size_t(2 * patch)] = int32_t(px);
      in.positions.i[size_t(2 * patch + 1)] = int32_t(py);
    }
  }
  return in;
}

PreprocessedImage preprocess_image(RgbImage decoded, const ImageProcessorConfig& config, ThreadPool* pool) {
  PreprocessedImage out;
  const TargetSize size = target_size(decoded.height, decoded.width, config);
  if (size.height == decoded.height && size.width == decoded.width) {
    out.resized = decoded;
  } else {
    out.resized = resize_bicubic(decoded, size.height, size.width, pool);
  }
  out.decoded = std::move(decoded);
  out.input = patchify(out.resized, config);
  if (out.input.n_soft > config.max_soft_tokens) {
    throw Error("image gives " + std::to_string(out.input.n_soft) + " soft tokens, over max_soft_tokens " +
                std::to_string(config.max_soft_tokens));
  }
  return out;
}

PreprocessedImage preprocess_image(std::span<const uint8_t> bytes, const ImageProcessorConfig& config,
                                   const ImageLimits& limits, ThreadPool* pool) {
  return preprocess_image(decode_image(bytes, limits), config, pool);
}

PaddedVisionInput pad_to_max_patches(const VisionInput& input, const ImageProcessorConfig& config) {
  const int64_t rows = config.max_patches(), values = config.patch_values();
  const int64_t n = input.pixel_values.rows();
  if (n > rows || input.pixel_values.dim(-1) != values) {
    throw Error("pad_to_max_patches: " + std::to_string(n) + " patches of " +
                std::to_string(input.pixel_values.dim(-1)) + " values do not fit " + std::to_string(rows) + " of " +
                std::to_string(values));
  }
  PaddedVisionInput out;
  out.pixel_values = Tensor::f32({1, rows, values});
  std::fill(out.pixel_values.f.begin(), out.pixel_values.f.end(), 0.0f);
  std::copy(input.pixel_values.f.begin(), input.pixel_values.f.end(), out.pixel_values.f.begin());
  out.positions = Tensor::i32({1, rows, 2});
  std::fill(out.positions.i.begin(), out.positions.i.end(), -1);
  std::copy(input.positions.i.begin(), input.positions.i.end(), out.positions.i.begin());
  return out;
}

}  // namespace dgemma
