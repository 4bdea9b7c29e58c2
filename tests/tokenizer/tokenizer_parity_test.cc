// Parity with the reference tokenizer (HF tokenizers / transformers.js, which
// agree on every case) on every case of golden-visible.jsonl: ids with and
// without special tokens, token strings, and decoded text with and without
// special tokens.
//
// ctest runs every TEST in its own process and each of these loads the 14 MB
// tokenizer, so the checks on the real file are grouped into few tests to keep
// the suite fast under ASan (< 60 s in a sanitizer Debug build keeps CI within its time).
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace dgemma {
namespace {

using test::golden_cases;
using test::ids_of;

void check_vocabulary_facts(const Tokenizer& tok) {
  EXPECT_EQ(tok.vocab_size(), 262145u);
  EXPECT_EQ(tok.token_id("<bos>"), 2);
  EXPECT_EQ(tok.token_id("<start_of_turn>"), 105);
  EXPECT_EQ(tok.token_id("<end_of_turn>"), 106);
  EXPECT_EQ(tok.token_id("<image_soft_token>"), 262144);
  EXPECT_EQ(tok.token_id("<0x0D>"), 238 + 0x0D);
  EXPECT_EQ(tok.token_id("no such piece"), -1);
  EXPECT_EQ(tok.id_to_piece(9259), "Hello");
  EXPECT_TRUE(tok.is_special(2));
  EXPECT_FALSE(tok.is_special(107));
  EXPECT_TRUE(tok.is_added(107));  // "\n" is a non-special added token
  // README: the longest space token is ▁×31; 32 spaces -> [▁×31, ▁].
  auto ids = tok.encode(std::string(32, ' '), false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok.id_to_piece(ids[1]), "\xE2\x96\x81");
}

TEST(TokenizerParity, EveryGoldenCase) {
  const Tokenizer& tok = test::gemma3();
  check_vocabulary_facts(tok);
  size_t checked = 0;
  for (const auto& c : golden_cases()) {
    if (c.find("category")->as_string() == "chat_template") continue;
    const std::string& id = c.find("id")->as_string();
    const std::string& text = c.find("text")->as_string();
    SCOPED_TRACE(id);
    tok.clear_cache();  // first encode with a cold cache, second with a warm one
    auto ids = tok.encode(text, false);
    ASSERT_EQ(ids, ids_of(*c.find("ids")));
    auto ids_special = tok.encode(text, true);
    ASSERT_EQ(ids_special, ids_of(*c.find("ids_with_special")));
    const auto& tokens = c.find("tokens")->as_array();
    ASSERT_EQ(tokens.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(tok.id_to_piece(ids[i]), tokens[i].as_string()) << i;
    EXPECT_EQ(tok.decode(ids), c.find("decoded")->as_string());
    EXPECT_EQ(tok.decode(ids_special), c.find("decoded_with_special")->as_string());
    // skip_special on the <bos>-prefixed ids gives back the plain decode.
    EXPECT_EQ(tok.decode(ids_special, true), tok.decode(ids, true));
    // Cutting words before "▁" (bpe_model.h) must not change any id: the
    // plain whole-word algorithm gives the same result.
    ASSERT_EQ(tok.encode_reference(text, false), ids);
    ++checked;
  }
  EXPECT_EQ(checked, 429u);
}

}  // namespace
}  // namespace dgemma
