// preprocessor_config.json (docs/image.md §5.1) and data: URLs (§9).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dgemma/error.h"
#include "image/data_url.h"
#include "image/image_processor_config.h"
#include "image_test_files.h"

namespace dgemma {
namespace {

std::string config_error(const std::string& text) {
  try {
    parse_image_processor_config(text, "pc.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ImageProcessorConfig, ReadsGoldenVAndDefaults) {
  const ImageProcessorConfig v = read_image_processor_config(golden_v_dir());
  EXPECT_EQ(v.patch_size, 4);
  EXPECT_EQ(v.max_soft_tokens, 70);
  EXPECT_EQ(v.pooling_kernel_size, 3);
  EXPECT_EQ(v.max_patches(), 630);
  const ImageProcessorConfig none = read_image_processor_config(golden_v_dir() + "/images");  // no file there
  EXPECT_EQ(none.patch_size, 16);
  EXPECT_EQ(none.max_soft_tokens, 280);
  EXPECT_EQ(none.pooling_kernel_size, 3);
  const ImageProcessorConfig partial = parse_image_processor_config(R"({"max_soft_tokens": 1120})", "x");
  EXPECT_EQ(partial.max_soft_tokens, 1120);
  EXPECT_EQ(partial.patch_size, 16);
  EXPECT_EQ(config_error(R"({"do_normalize": true, "image_mean": [0,0,0], "image_std": [1,1,1]})"), "");
}

TEST(ImageProcessorConfig, RefusesWhatThePipelineDoesNotDo) {
  EXPECT_NE(config_error(R"({"max_soft_tokens": 100})").find("max_soft_tokens 100 is not one of 70, 140"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"resample": 2})").find("resample 2 is not 3"), std::string::npos);
  EXPECT_NE(config_error(R"({"do_rescale": false})").find("do_rescale is false"), std::string::npos);
  EXPECT_NE(config_error(R"({"rescale_factor": 0.5})").find("rescale_factor 0.5 is not 1/255"), std::string::npos);
  EXPECT_NE(config_error(R"({"do_normalize": true, "image_mean": [0.5,0.5,0.5], "image_std": [1,1,1]})")
                .find("do_normalize is true"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"patch_size": 0})").find("patch_size 0"), std::string::npos);
  EXPECT_NE(config_error(R"({"patch_size": "16"})").find("pc.json"), std::string::npos);
  EXPECT_NE(config_error("[1]").find("pc.json"), std::string::npos);
  EXPECT_EQ(config_error(R"({"max_soft_tokens": 100})").rfind("pc.json: ", 0), 0u);
}

std::string url_error(const std::string& url, uint64_t max_bytes = 1 << 20) {
  try {
    parse_image_data_url(url, max_bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DataUrl, DecodesStandardBase64) {
  const DataUrl a = parse_image_data_url("data:image/png;base64,iVBORw0KGgo=", 100);
  EXPECT_EQ(a.media_type, "image/png");
  EXPECT_EQ(a.bytes, (std::vector<uint8_t>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}));
  const DataUrl b = parse_image_data_url("DATA:Image/JPEG;name=x.jpg;BASE64,/9j/", 100);
  EXPECT_EQ(b.media_type, "image/jpeg");
  EXPECT_EQ(b.bytes, (std::vector<uint8_t>{0xff, 0xd8, 0xff}));
  EXPECT_EQ(parse_image_data_url("data:image/webp;base64,YQ==", 1).bytes, (std::vector<uint8_t>{'a'}));
  EXPECT_TRUE(is_data_url("data:x"));
  EXPECT_FALSE(is_data_url("https://example.com/a.png"));
}

TEST(DataUrl, RefusesAnythingLoose) {
  EXPECT_EQ(url_error("http://x/a.png"), "not a data: URL");
  EXPECT_EQ(url_error("data:image/png;base64"), "data: URL has no ',' before its data");
  EXPECT_EQ(url_error("data:text/plain;base64,YQ=="), "data: URL media type 'text/plain' is not an image type");
  EXPECT_EQ(url_error("data:png;base64,YQ=="), "data: URL media type 'png' is not of the form image/<type>");
  EXPECT_EQ(url_error("data:image/png,YQ=="), "data: URL is not base64 (';base64,' expected before the data)");
  EXPECT_EQ(url_error("data:image/png;base64;x=y,YQ=="), "data: URL has parameters after ';base64'");
  EXPECT_EQ(url_error("data:image/png;base64,"), "data: URL has no data");
  EXPECT_EQ(url_error("data:image/png;base64,YQ="), "data: URL base64 length 3 is not a multiple of 4");
  EXPECT_EQ(url_error("data:image/png;base64,Y Q="), "data: URL base64 has an invalid character byte 0x20 at offset 1");
  EXPECT_EQ(url_error("data:image/png;base64,YQ-_"), "data: URL base64 has an invalid character '-' at offset 2");
  EXPECT_EQ(url_error("data:image/png;base64,Y==="), "data: URL base64 has an invalid character '=' at offset 1");
  EXPECT_EQ(url_error("data:image/png;base64,YR=="),
            "data: URL base64 does not end cleanly (non-zero bits before the padding)");
  // The cap is checked from the length, before decoding.
  EXPECT_EQ(url_error("data:image/png;base64,AAAAAAAA", 5), "image is 6 bytes, over the limit of 5 bytes");
  EXPECT_EQ(url_error("data:image/png;base64,AAAAAAAA", 6), "");
}

}  // namespace
}  // namespace dgemma
