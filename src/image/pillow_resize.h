#pragma once
// Pillow 9.4's BICUBIC resize of an 8-bit RGB image, bit for bit
// (docs/image.md §6): the resize the Gemma 4 image processor applies.
#include <cstdint>

#include "image/rgb_image.h"

namespace dgemma {

class ThreadPool;

// `image` resized to out_height × out_width. Rows may be spread over `pool`;
// the result is the same for any thread count (integer arithmetic, each
// output byte computed by one thread in a fixed order).
RgbImage resize_bicubic(const RgbImage& image, int64_t out_height, int64_t out_width, ThreadPool* pool = nullptr);

}  // namespace dgemma
