#pragma once
// The eight EXIF orientations applied to pixels (docs/image.md §4.3).
#include "image/rgb_image.h"

namespace dgemma::image {

// The image as it is meant to be seen: `orientation` 2..8 flips or rotates it
// as Pillow's exif_transpose does; any other value returns it unchanged.
RgbImage apply_orientation(RgbImage image, int orientation);

}  // namespace dgemma::image
