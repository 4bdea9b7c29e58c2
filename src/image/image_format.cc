#include "image/image_format.h"

#include <cstring>

namespace dgemma {
namespace {

bool starts_with(std::span<const uint8_t> b, size_t at, const char* magic, size_t n) {
  return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
}

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  if (starts_with(b, 0, "\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (starts_with(b, 0, "\xff\xd8\xff", 3)) return ImageFormat::kJpeg;
  if (starts_with(b, 0, "RIFF", 4) && starts_with(b, 8, "WEBP", 4)) return ImageFormat::kWebp;
  if (starts_with(b, 0, "GIF87a", 6) || starts_with(b, 0, "GIF89a", 6)) return ImageFormat::kGif;
  if (starts_with(b, 0, "BM", 2)) return ImageFormat::kBmp;
  if (starts_with(b, 0, "II*\0", 4) || starts_with(b, 0, "MM\0*", 4) || starts_with(b, 0, "II+\0", 4) ||
      starts_with(b, 0, "MM\0+", 4)) {
    return ImageFormat::kTiff;
  }
  if (starts_with(b, 0, "\0\0\1\0", 4) || starts_with(b, 0, "\0\0\2\0", 4)) return ImageFormat::kIco;
  if (starts_with(b, 0, "8BPS", 4)) return ImageFormat::kPsd;
  if (starts_with(b, 4, "ftyp", 4)) {
    if (starts_with(b, 8, "avif", 4) || starts_with(b, 8, "avis", 4)) return ImageFormat::kAvif;
    if (starts_with(b, 8, "heic", 4) || starts_with(b, 8, "heix", 4) || starts_with(b, 8, "mif1", 4) ||
        starts_with(b, 8, "msf1", 4) || starts_with(b, 8, "hevc", 4)) {
      return ImageFormat::kHeif;
    }
  }
  if (starts_with(b, 0, "\xff\x0a", 2) || starts_with(b, 0, "\0\0\0\x0cJXL \r\n\x87\n", 12)) {
    return ImageFormat::kJpegXl;
  }
  if (starts_with(b, 0, "\0\0\0\x0cjP  \r\n\x87\n", 12) || starts_with(b, 0, "\xff\x4f\xff\x51", 4)) {
    return ImageFormat::kJpeg2000;
  }
  if (starts_with(b, 0, "qoif", 4)) return ImageFormat::kQoi;
  return ImageFormat::kUnknown;
}

std::string_view image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kIco: return "ICO";
    case ImageFormat::kPsd: return "PSD";
    case ImageFormat::kHeif: return "HEIF";
    case ImageFormat::kAvif: return "AVIF";
    case ImageFormat::kJpegXl: return "JPEG XL";
    case ImageFormat::kJpeg2000: return "JPEG 2000";
    case ImageFormat::kQoi: return "QOI";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

bool is_decodable(ImageFormat format) {
  return format == ImageFormat::kPng || format == ImageFormat::kJpeg || format == ImageFormat::kWebp;
}

}  // namespace dgemma
