#pragma once
// The body the image-format fuzz targets share (fuzz/image_png.cc,
// image_jpeg.cc, image_webp.cc): the input is a whole file, fed to
// decode_image with small limits (docs/image.md §2–§4). Any exception other
// than dgemma::Error, and any sanitizer report, is a bug; a decoded image
// must have the size its pixels say. Each target keeps its own corpus of
// seeds of its format, which is what steers libFuzzer into that decoder.
#include <cstddef>
#include <cstdint>
#include <span>

#include "dgemma/error.h"
#include "image/decode_image.h"

inline int fuzz_decode_image(const uint8_t* data, size_t size) {
  dgemma::ImageLimits limits;
  limits.max_pixels = 1 << 20;  // a decompression bomb is a refusal, not an OOM
  try {
    const dgemma::RgbImage img = dgemma::decode_image(std::span<const uint8_t>(data, size), limits);
    if (img.height <= 0 || img.width <= 0) __builtin_trap();
    if (uint64_t(img.height) * uint64_t(img.width) > limits.max_pixels) __builtin_trap();
    if (img.pixels.size() != size_t(img.height * img.width * 3)) __builtin_trap();
  } catch (const dgemma::Error&) {
  }
  return 0;
}
