#pragma once
// The EXIF orientation of an image (docs/image.md §4), read the way Pillow
// 9.4's ImageOps.exif_transpose reads it.
#include <cstdint>
#include <span>
#include <string_view>

namespace dgemma::image {

// The orientation tag (0x0112) of IFD0 in an EXIF block (a TIFF header and
// its IFDs, optionally behind "Exif\0\0"): 2..8 when the image must be
// transformed, 1 otherwise — no tag, another value, or a block that cannot be
// read (docs/image.md §4.1). Never throws.
int exif_orientation(std::span<const uint8_t> exif);
// Whether the block holds an orientation tag at all (of any value), which
// decides whether the PNG XMP fallback applies (docs/image.md §4.2).
bool exif_has_orientation(std::span<const uint8_t> exif);

// The orientation written in XMP text: the first `tiff:Orientation="N` or
// `tiff:Orientation>N` with N a digit (docs/image.md §4.2); 0 when none.
int xmp_orientation(std::string_view xmp);

}  // namespace dgemma::image
