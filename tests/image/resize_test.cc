// Pillow's BICUBIC resize and the target size (docs/image.md §5.2, §6).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "dgemma/error.h"
#include "image/image_preprocess.h"
#include "image/pillow_resize.h"
#include "image_test_files.h"

namespace dgemma {
namespace {

RgbImage reference_source() {
  const std::string dir = golden_v_dir() + "/resize";
  const json::Value m = json::parse(read_text_file(dir + "/manifest.json"));
  RgbImage img;
  img.height = m.find("source_height")->as_int();
  img.width = m.find("source_width")->as_int();
  img.pixels = read_test_bytes(dir + "/" + m.find("source")->as_string());
  return img;
}

TEST(PillowResize, MatchesPillowAtEverySize) {
  const std::string dir = golden_v_dir() + "/resize";
  const json::Value m = json::parse(read_text_file(dir + "/manifest.json"));
  const RgbImage src = reference_source();
  ASSERT_EQ(src.pixels.size(), size_t(src.height * src.width * 3));
  int checked = 0;
  for (const json::Value& c : m.find("cases")->as_array()) {
    const int64_t h = c.find("height")->as_int(), w = c.find("width")->as_int();
    SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w));
    const RgbImage got = resize_bicubic(src, h, w);
    const std::vector<uint8_t> want = read_test_bytes(dir + "/" + c.find("rgb")->as_string());
    ASSERT_EQ(got.height, h);
    ASSERT_EQ(got.width, w);
    EXPECT_EQ(got.pixels, want);
    ++checked;
  }
  // Among them: one side unchanged (23x60, 50x37), the identity (23x37),
  // 1x1, and extreme aspects both ways.
  EXPECT_EQ(checked, 9);
}

TEST(PillowResize, ResultDoesNotDependOnThreads) {
  RgbImage src = RgbImage::zeros(301, 203);
  uint32_t s = 7;
  for (uint8_t& v : src.pixels) {
    s = s * 1664525u + 1013904223u;
    v = uint8_t(s >> 24);
  }
  const RgbImage one = resize_bicubic(src, 517, 96);
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(resize_bicubic(src, 517, 96, &pool).pixels, one.pixels) << threads << " threads";
  }
}

TEST(PillowResize, IdentityIsACopy) {
  const RgbImage src = reference_source();
  EXPECT_EQ(resize_bicubic(src, src.height, src.width).pixels, src.pixels);
}

TEST(TargetSize, GoldenVSizes) {
  ImageProcessorConfig v;
  v.patch_size = 4;
  v.max_soft_tokens = 70;
  v.pooling_kernel_size = 3;
  auto hw = [&](int64_t h, int64_t w) {
    const TargetSize t = target_size(h, w, v);
    return std::vector<int64_t>{t.height, t.width};
  };
  EXPECT_EQ(hw(30, 40), (std::vector<int64_t>{84, 108}));    // upscaled
  EXPECT_EQ(hw(200, 120), (std::vector<int64_t>{120, 72}));  // downscaled
  EXPECT_EQ(hw(40, 300), (std::vector<int64_t>{36, 264}));   // extreme aspect
  // A side that rounds to zero: one unit, the other side by the aspect ratio,
  // capped at max_soft_tokens units.
  EXPECT_EQ(hw(1, 2000), (std::vector<int64_t>{12, 840}));
  EXPECT_EQ(hw(2000, 1), (std::vector<int64_t>{840, 12}));
  EXPECT_EQ(hw(2, 200), (std::vector<int64_t>{12, 840}));
  // Just thick enough for one unit: the ordinary formula.
  EXPECT_EQ(hw(3, 200), (std::vector<int64_t>{12, 816}));
  EXPECT_EQ(hw(1, 69), (std::vector<int64_t>{12, 828}));
  EXPECT_THROW(target_size(0, 10, v), Error);
}

TEST(TargetSize, PublishedModelDefaults) {
  const ImageProcessorConfig c;  // 16 / 280 / 3
  const TargetSize t = target_size(480, 640, c);
  EXPECT_EQ(t.height, 672);
  EXPECT_EQ(t.width, 912);
  RgbImage img = RgbImage::zeros(480, 640);
  const PreprocessedImage p = preprocess_image(img, c);
  EXPECT_EQ(p.input.n_soft, 266);
  EXPECT_EQ(p.input.grid_h, 42);
  EXPECT_EQ(p.input.grid_w, 57);
  EXPECT_EQ(p.input.pixel_values.shape, (std::vector<int64_t>{42 * 57, 768}));
}

TEST(TargetSize, NoResizeWhenTheSizeIsAlreadyRight) {
  ImageProcessorConfig v;
  v.patch_size = 4;
  v.max_soft_tokens = 70;
  RgbImage img = RgbImage::zeros(84, 108);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = uint8_t(i * 31);
  const TargetSize t = target_size(84, 108, v);
  ASSERT_EQ(t.height, 84);
  ASSERT_EQ(t.width, 108);
  const PreprocessedImage p = preprocess_image(img, v);
  EXPECT_EQ(p.resized.pixels, img.pixels);
}

TEST(Patchify, OrderAndRescale) {
  ImageProcessorConfig c;
  c.patch_size = 2;
  c.max_soft_tokens = 70;
  c.pooling_kernel_size = 1;
  RgbImage img = RgbImage::zeros(2, 4);  // two patches side by side
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = uint8_t(i);
  const VisionInput in = patchify(img, c);
  ASSERT_EQ(in.pixel_values.shape, (std::vector<int64_t>{2, 12}));
  // Patch 1 (px 1): rows 0 and 1, columns 2..3, channel fastest.
  const std::vector<int> want_bytes = {6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23};
  for (size_t j = 0; j < want_bytes.size(); ++j) {
    EXPECT_EQ(in.pixel_values.f[12 + j], float(double(want_bytes[j]) * (1.0 / 255.0)));
  }
  EXPECT_EQ(in.positions.i, (std::vector<int32_t>{0, 0, 1, 0}));
  EXPECT_EQ(in.n_soft, 2);
  // The table is float(v · (1/255 as double)), not v · (1/255 as float).
  int differs_from_float_product = 0;
  for (int v = 0; v < 256; ++v) {
    EXPECT_EQ(rescale_u8(uint8_t(v)), float(double(v) / 255.0));
    differs_from_float_product += rescale_u8(uint8_t(v)) != float(v) * (1.0f / 255.0f);
  }
  EXPECT_GT(differs_from_float_product, 0);
}

}  // namespace
}  // namespace dgemma
