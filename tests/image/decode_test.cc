// Decoding against Pillow 9.4 (tests/data/golden_v/decode, made by
// make_decode_refs.py): every kind of pixel data, EXIF, and the refusals
// (docs/image.md §2–§4).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "image/decode_image.h"
#include "image/image_format.h"
#include "image_test_files.h"

namespace dgemma {
namespace {

std::string error_of(const std::vector<uint8_t>& bytes, const ImageLimits& limits = {}) {
  try {
    decode_image(bytes, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ImageDecode, EveryReferenceFileMatchesPillow) {
  if (!image_decoders_available()) GTEST_SKIP() << "built without libpng, libjpeg and libwebp (DGEMMA_IMAGE_DECODERS)";
  const std::string dir = golden_v_dir() + "/decode";
  const json::Value manifest = json::parse(read_text_file(dir + "/manifest.json"));
  int checked = 0;
  for (const json::Value& c : manifest.find("cases")->as_array()) {
    const std::string file = c.find("file")->as_string();
    SCOPED_TRACE(file + ": " + c.find("note")->as_string());
    const std::vector<uint8_t> bytes = read_test_bytes(dir + "/" + file);
    if (file == "cmyk.jpg") {  // Pillow converts it; dgemma refuses (docs/image.md §2.2)
      EXPECT_NE(error_of(bytes).find("CMYK images are not supported"), std::string::npos) << error_of(bytes);
      continue;
    }
    ASSERT_TRUE(c.find("rgb")) << "Pillow refused " << file;
    const RgbImage got = decode_image(bytes);
    ASSERT_EQ(got.height, c.find("height")->as_int());
    ASSERT_EQ(got.width, c.find("width")->as_int());
    const std::vector<uint8_t> want = read_test_bytes(dir + "/" + c.find("rgb")->as_string());
    ASSERT_EQ(want.size(), got.pixels.size());
    size_t differing = 0, first = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i] != got.pixels[i] && differing++ == 0) first = i;
    }
    EXPECT_EQ(differing, 0u) << "first difference at byte " << first << ": want " << int(want[first]) << ", got "
                             << int(got.pixels[first]);
    ++checked;
  }
  EXPECT_EQ(checked, 44);
}

TEST(ImageDecode, SixteenBitGrayIsClampedNotShifted) {
  // The reference file holds values above 255 (to 255) and below (kept).
  const std::string dir = golden_v_dir() + "/decode";
  const std::vector<uint8_t> want = read_test_bytes(dir + "/gray16.png.rgb");
  int saturated = 0, small = 0;
  for (size_t i = 0; i < want.size(); i += 3) (want[i] == 255 ? saturated : small) += 1;
  EXPECT_GT(saturated, 0);
  EXPECT_GT(small, 0);
}

TEST(ImageDecode, TruncatedFilesAreErrors) {
  if (!image_decoders_available()) GTEST_SKIP() << "built without libpng, libjpeg and libwebp (DGEMMA_IMAGE_DECODERS)";
  for (const char* name : {"images/png_up.png", "images/wide.jpg", "decode/progressive.jpg", "decode/lossy.webp",
                           "decode/animated.webp"}) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes = read_test_bytes(golden_v_dir() + "/" + name);
    bytes.resize(bytes.size() * 2 / 3);
    EXPECT_NE(error_of(bytes).find("truncated"), std::string::npos) << error_of(bytes);
  }
  // A JPEG missing only its end marker: Pillow refuses it too.
  std::vector<uint8_t> jpeg = read_test_bytes(golden_v_dir() + "/images/wide.jpg");
  ASSERT_EQ(jpeg[jpeg.size() - 2], 0xff);
  ASSERT_EQ(jpeg[jpeg.size() - 1], 0xd9);
  jpeg.resize(jpeg.size() - 2);
  EXPECT_EQ(error_of(jpeg), "JPEG: image is truncated");
}

TEST(ImageDecode, GarbageAndEmptyInputs) {
  if (!image_decoders_available()) GTEST_SKIP() << "built without libpng, libjpeg and libwebp (DGEMMA_IMAGE_DECODERS)";
  EXPECT_EQ(error_of({}), "image is empty (0 bytes)");
  const std::vector<uint8_t> text = {'<', 'h', 't', 'm', 'l', '>', ' ', 'x', 'y'};
  EXPECT_EQ(error_of(text),
            "not an image in a supported format (PNG, JPEG or WebP); the data starts with 3c 68 74 6d 6c 3e 20 78");
  // The right magic, nonsense after it.
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_NE(error_of(png).find("PNG: "), std::string::npos);
  std::vector<uint8_t> jpeg = {0xff, 0xd8, 0xff, 0x00, 0x13, 0x37, 0x00, 0x00};
  EXPECT_NE(error_of(jpeg).find("JPEG: "), std::string::npos);
  std::vector<uint8_t> webp = {'R', 'I', 'F', 'F', 4, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', ' ', 0, 0};
  EXPECT_NE(error_of(webp).find("WebP: "), std::string::npos);
}

TEST(ImageDecode, OtherFormatsAreRefusedByName) {
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0};
  EXPECT_EQ(error_of(gif), "GIF images are not supported (send PNG, JPEG or WebP)");
  const std::vector<uint8_t> bmp = {'B', 'M', 0x36, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(error_of(bmp), "BMP images are not supported (send PNG, JPEG or WebP)");
  const std::vector<uint8_t> tiff = {'I', 'I', 42, 0, 8, 0, 0, 0};
  EXPECT_EQ(error_of(tiff), "TIFF images are not supported (send PNG, JPEG or WebP)");
  const std::vector<uint8_t> avif = {0, 0, 0, 0x1c, 'f', 't', 'y', 'p', 'a', 'v', 'i', 'f'};
  EXPECT_EQ(error_of(avif), "AVIF images are not supported (send PNG, JPEG or WebP)");
  EXPECT_EQ(sniff_image_format(gif), ImageFormat::kGif);
}

// A PNG header claiming 90000 × 90000 pixels and nothing else: the limit is
// checked from the header, so the refusal names the size, not a failed read
// or allocation of 24 GB.
std::vector<uint8_t> huge_png_header(uint32_t side = 90000) {
  std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (int k = 0; k < 2; ++k) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(side >> s));
  }
  for (uint8_t v : {8, 2, 0, 0, 0}) b.push_back(v);
  // CRC of "IHDR" + data.
  uint32_t crc = 0xffffffffu;
  for (size_t i = 12; i < b.size(); ++i) {
    crc ^= b[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(crc >> s));
  return b;
}

TEST(ImageDecode, PixelLimitIsCheckedFromTheHeader) {
  if (!image_decoders_available()) GTEST_SKIP() << "built without libpng, libjpeg and libwebp (DGEMMA_IMAGE_DECODERS)";
  EXPECT_EQ(error_of(huge_png_header()), "image is 90000x90000 = 8.1e+09 pixels, over the limit of 89478485 pixels");
  // Sides whose product overflows 64 bits.
  EXPECT_EQ(error_of(huge_png_header(0xffffffffu)),
            "image is 4294967295x4294967295 = 1.84e+19 pixels, over the limit of 89478485 pixels");
  // The golden PNG (40x30) under a 1000-pixel limit, JPEG and WebP alike.
  ImageLimits small;
  small.max_pixels = 1000;
  EXPECT_EQ(error_of(read_test_bytes(golden_v_dir() + "/images/png_up.png"), small),
            "image is 40x30 = 1.2e+03 pixels, over the limit of 1000 pixels");
  EXPECT_EQ(error_of(read_test_bytes(golden_v_dir() + "/images/wide.jpg"), small),
            "image is 300x40 = 1.2e+04 pixels, over the limit of 1000 pixels");
  EXPECT_EQ(error_of(read_test_bytes(golden_v_dir() + "/decode/lossy.webp"), small),
            "image is 39x27 = 1.05e+03 pixels, over the limit of 1000 pixels");
}

TEST(ImageDecode, ZeroSizeIsAnError) {
  if (!image_decoders_available()) GTEST_SKIP() << "built without libpng, libjpeg and libwebp (DGEMMA_IMAGE_DECODERS)";
  // IHDR with width 0: libpng refuses it itself; the message says why.
  std::vector<uint8_t> b = huge_png_header();
  for (int i = 16; i < 20; ++i) b[size_t(i)] = 0;
  EXPECT_NE(error_of(b).find("PNG: "), std::string::npos) << error_of(b);
  EXPECT_THROW(check_image_size(0, 5, ImageLimits{}), Error);
  try {
    check_image_size(7, 0, ImageLimits{});
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "image has zero size (7x0)");
  }
}

TEST(ImageDecode, ByteLimit) {
  const std::vector<uint8_t> bytes = read_test_bytes(golden_v_dir() + "/images/wide.jpg");
  ImageLimits limits;
  limits.max_bytes = 1000;
  EXPECT_EQ(error_of(bytes, limits), "image is 5384 bytes, over the limit of 1000 bytes");
  // A file is refused before it is read, its path in front.
  const std::string path = golden_v_dir() + "/images/wide.jpg";
  try {
    decode_image_file(path, limits);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": image is 5384 bytes, over the limit of 1000 bytes");
  }
}

}  // namespace
}  // namespace dgemma
