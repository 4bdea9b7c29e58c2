#include "image/decode_image.h"

#include <fstream>
#include <string_view>
#include <vector>

#include "dgemma/error.h"
#include "image/decoders.h"
#include "image/image_format.h"

#ifndef DGEMMA_HAVE_IMAGE_DECODERS
#define DGEMMA_HAVE_IMAGE_DECODERS 0
#endif

namespace dgemma {

bool image_decoders_available() { return DGEMMA_HAVE_IMAGE_DECODERS; }

RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.empty()) throw Error("image is empty (0 bytes)");
  if (bytes.size() > limits.max_bytes) {
    throw Error("image is " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                std::to_string(limits.max_bytes) + " bytes");
  }
  const ImageFormat format = sniff_image_format(bytes);
  switch (format) {
#if DGEMMA_HAVE_IMAGE_DECODERS
    case ImageFormat::kPng: return image::decode_png(bytes, limits);
    case ImageFormat::kJpeg: return image::decode_jpeg(bytes, limits);
    case ImageFormat::kWebp: return image::decode_webp(bytes, limits);
#else
    case ImageFormat::kPng:
    case ImageFormat::kJpeg:
    case ImageFormat::kWebp:
      throw Error(std::string(image_format_name(format)) +
                  " image: this dgemma was built without image decoding (libpng, libjpeg and libwebp were not "
                  "found when it was built: DGEMMA_IMAGE_DECODERS)");
#endif
    case ImageFormat::kUnknown: {
      static const char* hex = "0123456789abcdef";
      std::string head;
      for (size_t i = 0; i < bytes.size() && i < 8; ++i) {
        head += i ? " " : "";
        head += hex[bytes[i] >> 4];
        head += hex[bytes[i] & 15];
      }
      throw Error("not an image in a supported format (PNG, JPEG or WebP); the data starts with " + head);
    }
    default: throw Error(std::string(image_format_name(format)) + " images are not supported (send PNG, JPEG or WebP)");
  }
}

RgbImage decode_image_file(const std::string& path, const ImageLimits& limits) {
  try {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error("cannot open the file");
    const std::streamoff size = in.tellg();
    if (size < 0) throw Error("cannot read the file");
    if (uint64_t(size) > limits.max_bytes) {
      throw Error("image is " + std::to_string(size) + " bytes, over the limit of " + std::to_string(limits.max_bytes) +
                  " bytes");
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    in.seekg(0);
    if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) throw Error("cannot read the file");
    return decode_image(bytes, limits);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace dgemma
