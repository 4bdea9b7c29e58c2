#pragma once
// Which format a file is, from its first bytes (docs/image.md §2): never from
// a file name or a MIME type.
#include <cstdint>
#include <span>
#include <string_view>

namespace dgemma {

enum class ImageFormat {
  kUnknown,
  // Decoded:
  kPng,
  kJpeg,
  kWebp,
  // Recognized only to name them in the refusal:
  kGif,
  kBmp,
  kTiff,
  kIco,
  kPsd,
  kHeif,
  kAvif,
  kJpegXl,
  kJpeg2000,
  kQoi,
};

ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
// "PNG", "JPEG", "GIF", … ("unknown" for kUnknown).
std::string_view image_format_name(ImageFormat format);
bool is_decodable(ImageFormat format);

}  // namespace dgemma
