#pragma once
// The EXIF orientation a PNG file carries in its chunks (docs/image.md §4.2),
// found the way Pillow 9.4 finds it: an eXIf chunk, a text chunk holding
// "Raw profile type exif", or XMP text.
#include <cstdint>
#include <span>

namespace dgemma::image {

// 2..8 when the image must be transformed, else 1. Never throws; a chunk
// that cannot be read is ignored.
int png_orientation(std::span<const uint8_t> png_file);

}  // namespace dgemma::image
