#include "image/orient.h"

#include <cstring>

namespace dgemma::image {

RgbImage apply_orientation(RgbImage image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int64_t h = image.height, w = image.width;
  const bool swaps = orientation >= 5;  // 5..8 exchange the sides
  RgbImage out = RgbImage::zeros(swaps ? w : h, swaps ? h : w);
  // Output pixel (r, c) takes source pixel (sr, sc) (docs/image.md §4.3).
  for (int64_t r = 0; r < out.height; ++r) {
    uint8_t* dst = out.row(r);
    for (int64_t c = 0; c < out.width; ++c) {
      int64_t sr = 0, sc = 0;
      switch (orientation) {
        case 2: sr = r, sc = w - 1 - c; break;
        case 3: sr = h - 1 - r, sc = w - 1 - c; break;
        case 4: sr = h - 1 - r, sc = c; break;
        case 5: sr = c, sc = r; break;
        case 6: sr = h - 1 - c, sc = r; break;
        case 7: sr = h - 1 - c, sc = w - 1 - r; break;
        default: sr = c, sc = w - 1 - r; break;  // 8
      }
      std::memcpy(dst + c * 3, image.row(sr) + sc * 3, 3);
    }
  }
  return out;
}

}  // namespace dgemma::image
