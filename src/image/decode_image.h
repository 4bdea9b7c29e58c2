#pragma once
// An image file's bytes to upright 8-bit RGB, as the Gemma 4 image processor
// loads an image with Pillow 9.4: open, EXIF transpose, convert to RGB
// (docs/image.md §2–§4).
#include <cstdint>
#include <span>
#include <string>

#include "image/rgb_image.h"

namespace dgemma {

// PNG, JPEG or WebP, told apart by their first bytes. Throws dgemma::Error
// naming what is wrong ("image is truncated", "GIF images are not
// supported", "image is 90000x90000 = 8.1e+09 pixels, over the limit of …");
// the caller prefixes the image's name (decode_image_file does).
RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

// False in a build made without libpng, libjpeg and libwebp
// (DGEMMA_IMAGE_DECODERS): decode_image then refuses every image, saying so.
bool image_decoders_available();

// The same for a file, its errors prefixed with the path. The file's size is
// checked against limits.max_bytes before it is read.
RgbImage decode_image_file(const std::string& path, const ImageLimits& limits = {});

}  // namespace dgemma
