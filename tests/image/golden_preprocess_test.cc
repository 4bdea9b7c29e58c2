// The golden V preprocess cases (docs/image.md §10): the image layer against
// the reference processor's tensors, all bit-exact.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/file_io.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "dgemma/error.h"
#include "image/decode_image.h"
#include "image/image_preprocess.h"
#include "image/image_processor_config.h"
#include "image_test_files.h"
#include "io/safetensors.h"

namespace dgemma {
namespace {

class GoldenPreprocess : public ::testing::TestWithParam<const char*> {};

const TensorView view_of(const SafetensorsFile& f, const char* name) {
  const TensorInfo* info = f.find(name);
  if (!info) throw Error(std::string("golden case has no tensor ") + name);
  return f.view(*info);
}

void expect_image_equals(const TensorView& want, const RgbImage& got) {
  ASSERT_EQ(want.dtype(), DType::kU8) << want.name();
  ASSERT_EQ(want.shape(), (std::vector<int64_t>{got.height, got.width, 3})) << want.name();
  ASSERT_EQ(size_t(want.nbytes()), got.pixels.size());
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < got.pixels.size(); ++i) {
    if (want.data[i] != got.pixels[i] && differing++ == 0) first = i;
  }
  EXPECT_EQ(differing, 0u) << want.name() << ": first difference at byte " << first << " (want "
                           << int(want.data[first]) << ", got " << int(got.pixels[first]) << ")";
}

TEST_P(GoldenPreprocess, MatchesTheReferenceProcessor) {
  if (!image_decoders_available()) GTEST_SKIP() << "built without libpng, libjpeg and libwebp (DGEMMA_IMAGE_DECODERS)";
  const std::string dir = golden_v_dir();
  const std::string name = GetParam();
  const auto file = SafetensorsFile::open(dir + "/cases/preprocess_" + name + ".safetensors");
  const json::Value meta = json::parse(read_text_file(dir + "/cases/preprocess_" + name + ".json"));
  const ImageProcessorConfig config = read_image_processor_config(dir);
  ASSERT_EQ(config.patch_size, 4);
  ASSERT_EQ(config.max_soft_tokens, 70);
  ASSERT_EQ(config.pooling_kernel_size, 3);

  const std::vector<uint8_t> bytes = read_test_bytes(dir + "/" + meta.find("image")->find("file")->as_string());
  ThreadPool pool(2);
  const PreprocessedImage got = preprocess_image(bytes, config, ImageLimits{}, &pool);

  expect_image_equals(view_of(*file, "image.decoded"), got.decoded);
  expect_image_equals(view_of(*file, "image.resized"), got.resized);
  const json::Array& target = meta.find("target_hw")->as_array();
  const TargetSize size = target_size(got.decoded.height, got.decoded.width, config);
  EXPECT_EQ(size.height, target[0].as_int());
  EXPECT_EQ(size.width, target[1].as_int());

  const VisionInput& in = got.input;
  const int64_t n_real = meta.find("n_real_patches")->as_int();
  ASSERT_EQ(in.pixel_values.shape, (std::vector<int64_t>{n_real, 48}));
  ASSERT_EQ(in.positions.shape, (std::vector<int64_t>{n_real, 2}));
  EXPECT_EQ(in.grid_h, meta.find("patch_grid_hw")->as_array()[0].as_int());
  EXPECT_EQ(in.grid_w, meta.find("patch_grid_hw")->as_array()[1].as_int());

  // pixel_values: the real rows bit for bit; the golden's padding rows are 0.
  const TensorView pv = view_of(*file, "pixel_values");
  ASSERT_EQ(pv.dtype(), DType::kF32);
  ASSERT_EQ(pv.shape(), (std::vector<int64_t>{1, 630, 48}));
  std::vector<float> want(size_t(pv.numel()));
  std::memcpy(want.data(), pv.data, pv.nbytes());
  for (int64_t i = 0; i < n_real * 48; ++i) {
    ASSERT_EQ(std::memcmp(&want[size_t(i)], &in.pixel_values.f[size_t(i)], 4), 0)
        << "pixel_values element " << i << ": want " << want[size_t(i)] << ", got " << in.pixel_values.f[size_t(i)];
  }
  // positions (I64 in the golden).
  const TensorView pos = view_of(*file, "image_position_ids");
  ASSERT_EQ(pos.dtype(), DType::kI64);
  std::vector<int64_t> want_pos(size_t(pos.numel()));
  std::memcpy(want_pos.data(), pos.data, pos.nbytes());
  for (int64_t i = 0; i < n_real * 2; ++i) {
    ASSERT_EQ(want_pos[size_t(i)], in.positions.i[size_t(i)]) << "image_position_ids element " << i;
  }
  const TensorView soft = view_of(*file, "num_soft_tokens");
  int64_t want_soft = 0;
  std::memcpy(&want_soft, soft.data, 8);
  EXPECT_EQ(in.n_soft, want_soft);

  // The padded writer reproduces the golden tensors whole.
  const PaddedVisionInput padded = pad_to_max_patches(in, config);
  ASSERT_EQ(padded.pixel_values.shape, (std::vector<int64_t>{1, 630, 48}));
  EXPECT_EQ(std::memcmp(padded.pixel_values.f.data(), want.data(), want.size() * 4), 0);
  ASSERT_EQ(padded.positions.shape, (std::vector<int64_t>{1, 630, 2}));
  for (size_t i = 0; i < want_pos.size(); ++i) {
    ASSERT_EQ(want_pos[i], padded.positions.i[i]) << "padded image_position_ids element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(GoldenV, GoldenPreprocess, ::testing::Values("png_up", "jpeg_exif", "wide"));

}  // namespace
}  // namespace dgemma
