#pragma once
// The three decoders behind decode_image (docs/image.md §2). Each reads the
// header, checks it against the limits before allocating pixels, decodes,
// and returns the image turned upright by its EXIF orientation (§4).
#include <cstdint>
#include <span>

#include "image/rgb_image.h"

namespace dgemma::image {

RgbImage decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits);
RgbImage decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits);
RgbImage decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits);

}  // namespace dgemma::image
