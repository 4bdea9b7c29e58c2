// The tokenizer of a GGUF file, built from its arrays (docs/formats.md §5.4),
// against the tokenizer.json it was converted from: the same ids, pieces and
// decodes on every golden case. The arrays are made here from tokenizer.json
// as a GGUF converter makes them (special added tokens typed control, other
// added tokens user-defined, <0xNN> pieces byte, merges as "left right").
#include <gtest/gtest.h>

#include <algorithm>

#include "dgemma/error.h"
#include "tokenizer_test_util.h"

namespace dgemma {
namespace {

using test::golden_cases;
using test::ids_of;

TokenizerArrays arrays_from_json() {
  const json::Value root = json::parse(test::gemma3_json(), {.source = "tokenizer.json"});
  const json::Value& model = *root.find("model");
  TokenizerArrays a;
  a.source = "arrays.gguf";
  a.model = "gemma4";
  const auto& vocab = model.find("vocab")->as_object();
  const auto& added = root.find("added_tokens")->as_array();
  size_t n = vocab.size();
  for (const json::Value& t : added) n = std::max(n, size_t(t.find("id")->as_int()) + 1);
  a.tokens.assign(n, "");
  a.types.assign(n, kTokenTypeNormal);
  for (const auto& [piece, id] : vocab) {
    a.tokens[size_t(id.as_int())] = piece;
    if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece.back() == '>')
      a.types[size_t(id.as_int())] = kTokenTypeByte;
  }
  for (const json::Value& t : added) {
    const size_t id = size_t(t.find("id")->as_int());
    a.tokens[id] = t.find("content")->as_string();
    a.types[id] = t.find("special")->as_bool() ? kTokenTypeControl : kTokenTypeUserDefined;
  }
  a.unknown_id =
      int32_t(std::find(a.tokens.begin(), a.tokens.end(), model.find("unk_token")->as_string()) - a.tokens.begin());
  a.types[size_t(a.unknown_id)] = kTokenTypeUnknown;
  for (const json::Value& m : model.find("merges")->as_array())
    a.merges.push_back(m.is_string() ? m.as_string() : m.as_array()[0].as_string() + " " + m.as_array()[1].as_string());
  a.bos_id = 2;
  a.eos_id = 1;
  a.add_bos = true;
  return a;
}

const TokenizerArrays& gemma3_arrays() {
  static const TokenizerArrays a = arrays_from_json();
  return a;
}

TEST(TokenizerArrays, EveryGoldenCaseAsFromTokenizerJson) {
  const Tokenizer tok = Tokenizer::from_arrays(gemma3_arrays());
  const Tokenizer& json_tok = test::gemma3();
  ASSERT_EQ(tok.vocab_size(), json_tok.vocab_size());
  EXPECT_EQ(tok.source(), "arrays.gguf");
  for (int32_t id = 0; id < int32_t(tok.vocab_size()); ++id) {
    ASSERT_EQ(tok.id_to_piece(id), json_tok.id_to_piece(id)) << id;
    ASSERT_EQ(tok.is_added(id), json_tok.is_added(id)) << id;
    // `</s>` is an end-of-generation token that the GGUF layout types as
    // user-defined; it is special here (docs/formats.md §5.4), a plain added
    // token in tokenizer.json.
    if (tok.id_to_piece(id) != "</s>") {
      ASSERT_EQ(tok.is_special(id), json_tok.is_special(id)) << id;
    }
  }
  EXPECT_TRUE(tok.is_special(tok.token_id("</s>")));
  size_t checked = 0;
  for (const auto& c : golden_cases()) {
    if (c.find("category")->as_string() == "chat_template") continue;
    const std::string& text = c.find("text")->as_string();
    SCOPED_TRACE(c.find("id")->as_string());
    const std::vector<int32_t> ids = tok.encode(text, false);
    ASSERT_EQ(ids, ids_of(*c.find("ids")));
    const std::vector<int32_t> ids_special = tok.encode(text, true);
    ASSERT_EQ(ids_special, ids_of(*c.find("ids_with_special")));
    const auto& tokens = c.find("tokens")->as_array();
    ASSERT_EQ(tokens.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(tok.id_to_piece(ids[i]), tokens[i].as_string()) << i;
    EXPECT_EQ(tok.decode(ids), c.find("decoded")->as_string());
    EXPECT_EQ(tok.decode(ids_special), c.find("decoded_with_special")->as_string());
    if (text.find("</s>") == std::string::npos) {
      EXPECT_EQ(tok.encode_plain(text, false), json_tok.encode_plain(text, false));
      EXPECT_EQ(tok.decode(ids_special, true), json_tok.decode(ids_special, true));
    }
    ++checked;
  }
  EXPECT_EQ(checked, 429u);
}

// The published files type `<|tool_response>` (an end of generation) and the
// other "visible" markers as user-defined: the first counts as control, the
// others stay plain added tokens, matched whole but decoded as text.
TEST(TokenizerArrays, EndOfGenerationTokensTypedUserDefinedAreControl) {
  TokenizerArrays a = gemma3_arrays();
  a.tokens[50] = "<|tool_response>";
  a.types[50] = kTokenTypeUserDefined;
  a.tokens[100] = "<|channel>";
  a.types[100] = kTokenTypeUserDefined;
  const Tokenizer tok = Tokenizer::from_arrays(a);
  EXPECT_TRUE(tok.is_special(50));
  EXPECT_FALSE(tok.is_special(100));
  EXPECT_TRUE(tok.is_added(100));
  const std::string text = "a<|tool_response>b<|channel>c";
  const std::vector<int32_t> ids = tok.encode(text, false);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 50), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), 100), ids.end());
  const std::vector<int32_t> plain = tok.encode_plain(text, false);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), 50), plain.end());
  EXPECT_NE(std::find(plain.begin(), plain.end(), 100), plain.end());
  EXPECT_EQ(tok.decode(ids, true), "ab<|channel>c");
}

void expect_error(const TokenizerArrays& a, const std::string& needle) {
  try {
    Tokenizer::from_arrays(a);
    ADD_FAILURE() << "accepted; expected an error naming " << needle;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("arrays.gguf"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << "'" << needle << "' not in: " << what;
  }
}

TEST(TokenizerArrays, BadArraysAreRefusedNamingTheEntry) {
  TokenizerArrays a;
  a.source = "arrays.gguf";
  a.model = "gemma4";
  a.tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "a", "b", "ab"};
  a.types = {3, 3, 3, 2, 1, 1, 1};
  a.merges = {"a b"};
  a.unknown_id = 3;
  a.bos_id = 2;
  a.add_bos = true;
  const Tokenizer ok = Tokenizer::from_arrays(a);
  EXPECT_EQ(ok.encode("ab", true), (std::vector<int32_t>{2, 6}));
  EXPECT_EQ(ok.encode("ba", false), (std::vector<int32_t>{5, 4}));

  TokenizerArrays b = a;
  b.model = "llama";
  expect_error(b, "tokenizer.ggml.model");
  b = a;
  b.types[4] = 7;
  expect_error(b, "token_type[4]");
  b = a;
  b.types.pop_back();
  expect_error(b, "token_type has 6 entries");
  b = a;
  b.merges = {"a c"};
  expect_error(b, "merges[0]");
  b = a;
  b.merges = {"a  b"};
  expect_error(b, "merges[0]");
  b = a;
  b.tokens[5] = "a";
  expect_error(b, "tokens[5]");
  b = a;
  b.bos_id = 7;
  expect_error(b, "bos_token_id 7");
  b = a;
  b.bos_id = -1;
  expect_error(b, "add_bos_token");
}

}  // namespace
}  // namespace dgemma
