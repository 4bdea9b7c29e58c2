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
  // Both sides fit in 31 bits for every format read here, so the product
  // cannot overflow.
  const uint64_t pixels = uint64_t(width) * uint64_t(height);
  if (pixels > limits.max_pixels) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", double(pixels));
    throw Error("image is " + std::to_string(width) + "x" + std::to_string(height) + " = " + text +
                " pixels, over the limit of " + std::to_string(limits.max_pixels) + " pixels");
  }
}

}  // namespace dgemma
