// EXIF and XMP orientation readers and the eight transforms (docs/image.md §4).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "image/exif_orientation.h"
#include "image/orient.h"

namespace dgemma::image {
namespace {

// A TIFF block whose IFD0 holds the given 12-byte entries.
std::vector<uint8_t> tiff(bool big_endian, const std::vector<std::vector<uint8_t>>& entries) {
  auto u16 = [&](std::vector<uint8_t>& b, uint32_t v) {
    if (big_endian) {
      b.push_back(uint8_t(v >> 8)), b.push_back(uint8_t(v));
    } else {
      b.push_back(uint8_t(v)), b.push_back(uint8_t(v >> 8));
    }
  };
  std::vector<uint8_t> b = big_endian ? std::vector<uint8_t>{'M', 'M', 0, 42, 0, 0, 0, 8}
                                      : std::vector<uint8_t>{'I', 'I', 42, 0, 8, 0, 0, 0};
  u16(b, uint32_t(entries.size()));
  for (const auto& e : entries) b.insert(b.end(), e.begin(), e.end());
  b.insert(b.end(), {0, 0, 0, 0});
  return b;
}

std::vector<uint8_t> short_entry(bool be, uint16_t tag, uint16_t value) {
  if (be) return {uint8_t(tag >> 8), uint8_t(tag), 0, 3, 0, 0, 0, 1, uint8_t(value >> 8), uint8_t(value), 0, 0};
  return {uint8_t(tag), uint8_t(tag >> 8), 3, 0, 1, 0, 0, 0, uint8_t(value), uint8_t(value >> 8), 0, 0};
}

TEST(ExifOrientation, ReadsTheTagInBothByteOrders) {
  for (bool be : {false, true}) {
    for (int o = 0; o <= 9; ++o) {
      const std::vector<uint8_t> t = tiff(be, {short_entry(be, 0x0100, 640), short_entry(be, 0x0112, uint16_t(o))});
      EXPECT_EQ(exif_orientation(t), o >= 2 && o <= 8 ? o : 1) << o;
      EXPECT_TRUE(exif_has_orientation(t));
      std::vector<uint8_t> with_prefix = {'E', 'x', 'i', 'f', 0, 0};
      with_prefix.insert(with_prefix.end(), t.begin(), t.end());
      EXPECT_EQ(exif_orientation(with_prefix), exif_orientation(t));
    }
  }
}

TEST(ExifOrientation, MalformedBlocksMeanNoTransform) {
  EXPECT_EQ(exif_orientation({}), 1);
  const std::vector<uint8_t> good = tiff(false, {short_entry(false, 0x0112, 6)});
  ASSERT_EQ(exif_orientation(good), 6);
  for (size_t cut = 0; cut < good.size() - 4; ++cut) {  // entries cut short are not read
    EXPECT_EQ(exif_orientation(std::vector<uint8_t>(good.begin(), good.begin() + long(cut))), 1) << cut;
  }
  std::vector<uint8_t> bad_magic = good;
  bad_magic[2] = 43;  // BigTIFF, which Pillow cannot read in EXIF
  EXPECT_EQ(exif_orientation(bad_magic), 1);
  std::vector<uint8_t> far_ifd = good;
  far_ifd[4] = 200;  // IFD0 outside the block
  EXPECT_EQ(exif_orientation(far_ifd), 1);
  std::vector<uint8_t> unknown_type = good;
  unknown_type[12] = 99;
  EXPECT_EQ(exif_orientation(unknown_type), 1);
  EXPECT_FALSE(exif_has_orientation(unknown_type));
  // The last entry for the tag wins, as in Pillow's tag dictionary.
  EXPECT_EQ(exif_orientation(tiff(false, {short_entry(false, 0x0112, 3), short_entry(false, 0x0112, 8)})), 8);
}

TEST(XmpOrientation, FirstDigitAfterTheKey) {
  EXPECT_EQ(xmp_orientation(R"(<rdf:Description tiff:Orientation="6"/>)"), 6);
  EXPECT_EQ(xmp_orientation("<tiff:Orientation>3</tiff:Orientation>"), 3);
  EXPECT_EQ(xmp_orientation(R"(tiff:Orientation='6' tiff:Orientation="8")"), 8);
  EXPECT_EQ(xmp_orientation("tiff:Orientation=\"x\""), 0);
  EXPECT_EQ(xmp_orientation(""), 0);
  EXPECT_EQ(xmp_orientation("tiff:Orientation"), 0);
}

TEST(Orient, EightTransformsOfATwoByThreeImage) {
  // Pixel values name their source position: 10·row + column.
  RgbImage img = RgbImage::zeros(2, 3);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) img.row(r)[3 * c] = uint8_t(10 * r + c);
  }
  auto layout = [](const RgbImage& m) {
    std::vector<int> v;
    for (int64_t r = 0; r < m.height; ++r) {
      for (int64_t c = 0; c < m.width; ++c) v.push_back(m.row(r)[3 * c]);
    }
    return v;
  };
  // Source 0 1 2 / 10 11 12.
  EXPECT_EQ(layout(apply_orientation(img, 1)), (std::vector<int>{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(layout(apply_orientation(img, 2)), (std::vector<int>{2, 1, 0, 12, 11, 10}));
  EXPECT_EQ(layout(apply_orientation(img, 3)), (std::vector<int>{12, 11, 10, 2, 1, 0}));
  EXPECT_EQ(layout(apply_orientation(img, 4)), (std::vector<int>{10, 11, 12, 0, 1, 2}));
  EXPECT_EQ(layout(apply_orientation(img, 5)), (std::vector<int>{0, 10, 1, 11, 2, 12}));
  EXPECT_EQ(layout(apply_orientation(img, 6)), (std::vector<int>{10, 0, 11, 1, 12, 2}));
  EXPECT_EQ(layout(apply_orientation(img, 7)), (std::vector<int>{12, 2, 11, 1, 10, 0}));
  EXPECT_EQ(layout(apply_orientation(img, 8)), (std::vector<int>{2, 12, 1, 11, 0, 10}));
  EXPECT_EQ(apply_orientation(img, 6).height, 3);
  EXPECT_EQ(apply_orientation(img, 9).pixels, img.pixels);
}

}  // namespace
}  // namespace dgemma::image
