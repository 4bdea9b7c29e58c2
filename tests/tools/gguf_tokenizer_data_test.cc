// The GGUF tokenizer keys `dgemma quantize … OUT.gguf` builds from a
// checkpoint's tokenizer files (tools/gguf_tokenizer_data.h,
// docs/formats.md §5.4), on the test tokenizer.json (262,144 pieces, 514,906
// merges): pieces by id, merges in rank order as "left right", the token
// types llama.cpp's converter gives, the special ids and the chat template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "dgemma/error.h"
#include "gguf_tokenizer_data.h"

namespace dgemma::cli {
namespace {

ModelConfig config_of(int64_t vocab) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.bos_token_id = 2;
  c.pad_token_id = 0;
  c.eos_token_ids = {1, 106};
  return c;
}

std::string folder_with_tokenizer(const std::string& tag) {
  const std::string dir = dgemma_test_temp_dir(tag);
  std::filesystem::create_symlink(DGEMMA_TEST_DATA + "/tokenizer/tokenizer.json", dir + "/tokenizer.json");
  return dir;
}

TEST(GgufTokenizerData, FromTokenizerJson) {
  const std::string dir = folder_with_tokenizer("gguf_tok");
  std::ofstream(dir + "/chat_template.jinja") << "{% for m in messages %}{{ m.content }}{% endfor %}";
  const GgufTokenizerData t = gguf_tokenizer_data(dir, config_of(262144));
  ASSERT_EQ(t.tokens.size(), 262144u);
  ASSERT_EQ(t.token_types.size(), 262144u);
  EXPECT_EQ(t.merges.size(), 514906u);
  EXPECT_EQ(t.tokens[2], "<bos>");
  EXPECT_EQ(t.tokens[212], "</s>");
  // Special added tokens are control, the unknown token unknown, other added
  // tokens user-defined (`</s>` among them, not control), byte pieces byte.
  EXPECT_EQ(t.token_types[0], 3);
  EXPECT_EQ(t.token_types[1], 3);
  EXPECT_EQ(t.token_types[106], 3);
  EXPECT_EQ(t.token_types[3], 2);
  EXPECT_EQ(t.token_types[4], 4);
  EXPECT_EQ(t.token_types[212], 4);
  int bytes = 0, normal = 0;
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    if (t.token_types[i] == 6) {
      ++bytes;
      EXPECT_EQ(t.tokens[i].substr(0, 3), "<0x") << i;
    }
    normal += t.token_types[i] == 1;
  }
  EXPECT_EQ(bytes, 256);
  EXPECT_GT(normal, 250000);
  // Merges keep the file's order, joined by one space.
  std::string run;
  for (int i = 0; i < 30; ++i) run += "\xe2\x96\x81";  // U+2581, the space marker
  EXPECT_EQ(t.merges[1], run + " \xe2\x96\x81");
  EXPECT_EQ(t.bos_id, 2);
  EXPECT_EQ(t.eos_id, 1);
  EXPECT_EQ(t.unknown_id, 3);
  EXPECT_EQ(t.padding_id, 0);
  EXPECT_EQ(t.mask_id, 4);
  EXPECT_EQ(t.chat_template, "{% for m in messages %}{{ m.content }}{% endfor %}");
}

TEST(GgufTokenizerData, ErrorsNameTheProblem) {
  const std::string empty = dgemma_test_temp_dir("gguf_tok_none");
  try {
    gguf_tokenizer_data(empty, config_of(262144));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
  // A vocabulary smaller than the tokenizer's ids.
  const std::string dir = folder_with_tokenizer("gguf_tok_small");
  try {
    gguf_tokenizer_data(dir, config_of(1000));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary of 1000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgemma::cli
