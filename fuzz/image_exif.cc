// libFuzzer target: the input is an EXIF block (a TIFF header and IFDs) and,
// read as text, XMP; fed to the orientation readers (docs/image.md §4.1,
// §4.2), which never throw and always answer 1..8 (0..9 for XMP's digit).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "image/exif_orientation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  const int o = dgemma::image::exif_orientation(bytes);
  if (o < 1 || o > 8) __builtin_trap();
  if (o != 1 && !dgemma::image::exif_has_orientation(bytes)) __builtin_trap();
  const int x = dgemma::image::xmp_orientation(std::string_view(reinterpret_cast<const char*>(data), size));
  if (x < 0 || x > 9) __builtin_trap();
  return 0;
}
