#include "image/rgb_image.h"

#include <cstdio>

#include "dgemma/error.h"

namespace dgemma {

RgbImage RgbImage::zeros(int64_t height, int64_t width) {
  RgbImage img;
  img.height = height;
  img.width = width;
  img.pixels.assign(size_t(height * width * 3), 0);
  return img;
}

void check_image_size(int64_t width, int64_t height, const ImageLimits& limits) {
  if (width <= 0 || height <= 0) {
    throw Error("image has zero size (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  // Compared by division: the sides of a PNG header reach 2³² − 1, whose
  // product overflows 64 bits.
  if (uint64_t(width) > limits.max_pixels / uint64_t(height)) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", double(width) * double(height));
    throw Error("image is " + std::to_string(width) + "x" + std::to_string(height) + " = " + text +
                " pixels, over the limit of " + std::to_string(limits.max_pixels) + " pixels");
  }
}

}  // namespace dgemma
