#pragma once
// A decoded image as the vision preprocessing takes it (docs/image.md §1):
// 8-bit RGB, interleaved, rows top to bottom, and the limits a caller puts on
// what it is willing to decode.
#include <cstdint>
#include <vector>

namespace dgemma {

struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;  // [height][width][3], R G B

  const uint8_t* row(int64_t y) const { return pixels.data() + y * width * 3; }
  uint8_t* row(int64_t y) { return pixels.data() + y * width * 3; }
  // An image of the given size with every byte 0.
  static RgbImage zeros(int64_t height, int64_t width);
};

// What a decoder refuses before allocating anything for pixels (docs/image.md
// §3): the file's size in bytes and width·height from its header.
struct ImageLimits {
  // Pillow's MAX_IMAGE_PIXELS, the size above which it warns of a
  // decompression bomb.
  static constexpr uint64_t kDefaultMaxPixels = 89'478'485;
  static constexpr uint64_t kDefaultMaxBytes = uint64_t(64) << 20;
  uint64_t max_bytes = kDefaultMaxBytes;
  uint64_t max_pixels = kDefaultMaxPixels;
};

// Throws dgemma::Error when width × height is zero or over limits.max_pixels
// (docs/image.md §3). Decoders call it with the header's size, before any
// pixel buffer exists.
void check_image_size(int64_t width, int64_t height, const ImageLimits& limits);

}  // namespace dgemma
