// The JSON of the utility routes (src/server/utility_api.h): /tokenize and
// /detokenize requests are parsed with the completion routes' errors, and
// the answers of /tokenize, /detokenize, /v1/models and /props carry what
// llama.cpp- and vLLM-style clients read.
#include "server/utility_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/json.h"
#include "server/api_error.h"

namespace dgemma::server {
namespace {

// The Gemma 3 tokenizer of the test data: <bos> is id 2, and it has the byte
// tokens <0x00>..<0xFF> for text its vocabulary lacks (docs/formats.md §6).
const Tokenizer& gemma() {
  static const Tokenizer tok = Tokenizer::load(DGEMMA_TEST_DATA + "/tokenizer/tokenizer.json");
  return tok;
}

// The ApiError `fn` throws (status 0 when it throws none).
template <class Fn>
ApiError error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "no error", "");
}

std::vector<int64_t> ids_of(const json::Value& answer) {
  std::vector<int64_t> ids;
  for (const auto& t : answer.find("tokens")->as_array())
    ids.push_back(t.is_object() ? t.find("id")->as_int() : t.as_int());
  return ids;
}

TEST(TokenizeRequest, DefaultsAndFields) {
  TokenizeRequest r = parse_tokenize_request(R"({"content": "Hello"})");
  EXPECT_EQ(r.content, "Hello");
  EXPECT_FALSE(r.add_special);  // llama.cpp's defaults
  EXPECT_TRUE(r.parse_special);
  EXPECT_FALSE(r.with_pieces);
  r = parse_tokenize_request(R"({"content": "", "add_special": true, "parse_special": false, "with_pieces": true})");
  EXPECT_EQ(r.content, "");
  EXPECT_TRUE(r.add_special);
  EXPECT_FALSE(r.parse_special);
  EXPECT_TRUE(r.with_pieces);
  r = parse_tokenize_request(R"({"content": "x", "add_special": null})");  // null: not given
  EXPECT_FALSE(r.add_special);
}

TEST(TokenizeRequest, BadBodiesAreErrorsNamingTheField) {
  struct Case {
    const char* body;
    int status;
    const char* param;
    const char* code;
  };
  for (const Case& c : {Case{R"({})", 400, "content", "missing_required_parameter"},
                        Case{R"({"content": 5})", 400, "content", "invalid_type"},
                        Case{R"({"content": "x", "with_pieces": "yes"})", 400, "with_pieces", "invalid_type"},
                        Case{R"({"content": "x", "add_bos": true})", 400, "add_bos", "unsupported_parameter"},
                        Case{R"({"content": "x")", 400, "", "invalid_json"}, Case{R"(["x"])", 400, "", "invalid_json"},
                        Case{"{\"content\": \"\xff\"}", 400, "", "invalid_json"}}) {
    const ApiError e = error_of([&] { parse_tokenize_request(c.body); });
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.code, c.code) << c.body;
  }
}

TEST(TokenizeBody, IdsAndPieces) {
  const Tokenizer& tok = gemma();
  TokenizeRequest r;
  r.content = "Hello world";
  const json::Value plain = json::parse(tokenize_body(tok, r));
  const std::vector<int32_t> want = tok.encode("Hello world", false);
  EXPECT_EQ(ids_of(plain), std::vector<int64_t>(want.begin(), want.end()));

  r.add_special = true;
  EXPECT_EQ(ids_of(json::parse(tokenize_body(tok, r))).front(), 2);  // <bos>

  // Special-token text is a control token unless parse_special is false.
  r.add_special = false;
  r.content = "<bos>";
  EXPECT_EQ(ids_of(json::parse(tokenize_body(tok, r))), std::vector<int64_t>{2});
  r.parse_special = false;
  const std::vector<int64_t> as_text = ids_of(json::parse(tokenize_body(tok, r)));
  EXPECT_GT(as_text.size(), 1u);
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), 2), 0);

  // Pieces: the pieces' bytes, in order, are the text again.
  r = TokenizeRequest{};
  r.content = "Hello world";
  r.with_pieces = true;
  const json::Value pieces = json::parse(tokenize_body(tok, r));
  std::string joined;
  for (const auto& t : pieces.find("tokens")->as_array()) joined += t.find("piece")->as_string();
  EXPECT_EQ(joined, "Hello world");
  EXPECT_EQ(ids_of(pieces), ids_of(plain));

  // U+0F8C (UTF-8 E0 BE 8C) is not in the vocabulary: three byte tokens,
  // whose pieces are not text on their own, so they are lists of bytes.
  r.content = "\xE0\xBE\x8C";
  const json::Array bytes = json::parse(tokenize_body(tok, r)).find("tokens")->as_array();
  ASSERT_EQ(bytes.size(), 3u);
  const int64_t want_bytes[] = {0xE0, 0xBE, 0x8C};
  for (size_t i = 0; i < 3; ++i) {
    const json::Array& piece = bytes[i].find("piece")->as_array();
    ASSERT_EQ(piece.size(), 1u);
    EXPECT_EQ(piece[0].as_int(), want_bytes[i]);
  }
}

TEST(Detokenize, ParsesIdsAndNamesTheOneOutOfRange) {
  EXPECT_EQ(parse_detokenize_request(R"({"tokens": [2, 9259]})", 262144), (std::vector<int32_t>{2, 9259}));
  EXPECT_TRUE(parse_detokenize_request(R"({"tokens": []})", 262144).empty());
  ApiError e = error_of([] { parse_detokenize_request(R"({"tokens": [2, 262144]})", 262144); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "tokens");
  EXPECT_NE(std::string(e.what()).find("'tokens[1]': token id 262144 is outside the vocabulary [0, 262144)"),
            std::string::npos)
      << e.what();
  e = error_of([] { parse_detokenize_request(R"({"tokens": [-1]})", 10); });
  EXPECT_NE(std::string(e.what()).find("token id -1"), std::string::npos) << e.what();
  e = error_of([] { parse_detokenize_request(R"({"tokens": [1.5]})", 10); });
  EXPECT_EQ(e.param, "tokens[0]");
  EXPECT_EQ(e.code, "invalid_type");
  EXPECT_EQ(error_of([] { parse_detokenize_request(R"({"tokens": "2 3"})", 10); }).code, "invalid_type");
  EXPECT_EQ(error_of([] { parse_detokenize_request(R"({})", 10); }).code, "missing_required_parameter");
  EXPECT_EQ(error_of([] { parse_detokenize_request(R"({"tokens": [], "x": 1})", 10); }).code, "unsupported_parameter");
}

TEST(Detokenize, TextOfTheIds) {
  const Tokenizer& tok = gemma();
  const std::vector<int32_t> ids = tok.encode("Hello world", true);
  EXPECT_EQ(json::parse(detokenize_body(tok, ids)).find("content")->as_string(), "<bos>Hello world");
}

ServedModel tiny_model() {
  ServedModel m;
  m.id = "tiny";
  m.created = 1700000000;
  m.context_size = 4096;
  m.trained_context_length = 131072;
  m.vocab_size = 262144;
  m.canvas_length = 256;
  m.chat_template = "gemma4";
  return m;
}

TEST(ModelCard, ReportsTheContextLength) {
  ServedModel m = tiny_model();
  const json::Value card = json::parse(model_card_body(m));
  EXPECT_EQ(card.find("id")->as_string(), "tiny");
  EXPECT_EQ(card.find("object")->as_string(), "model");
  EXPECT_EQ(card.find("created")->as_int(), 1700000000);
  EXPECT_EQ(card.find("max_model_len")->as_int(), 4096);  // the -c in force
  EXPECT_EQ(card.find("meta")->find("n_ctx_train")->as_int(), 131072);
  EXPECT_EQ(card.find("meta")->find("n_ctx")->as_int(), 4096);
  EXPECT_EQ(card.find("meta")->find("n_vocab")->as_int(), 262144);
  m.context_size = 0;  // no limit: the trained length
  EXPECT_EQ(json::parse(model_card_body(m)).find("max_model_len")->as_int(), 131072);
  const json::Value list = json::parse(model_list_body(tiny_model()));
  EXPECT_EQ(list.find("object")->as_string(), "list");
  ASSERT_EQ(list.find("data")->as_array().size(), 1u);
  EXPECT_EQ(list.find("data")->as_array()[0].find("max_model_len")->as_int(), 4096);
}

TEST(Props, DefaultsARequestGets) {
  ServiceOptions o;
  o.slots = 3;
  o.max_queue = 7;
  o.default_max_tokens = 100;
  o.defaults.t_min = 0.3;
  o.defaults.t_max = 0.6;
  o.defaults.max_denoising_steps = 12;
  const json::Value p = json::parse(props_body(tiny_model(), o));
  EXPECT_EQ(p.find("model")->as_string(), "tiny");
  EXPECT_EQ(p.find("total_slots")->as_int(), 3);
  EXPECT_EQ(p.find("max_queue")->as_int(), 7);
  EXPECT_EQ(p.find("n_ctx")->as_int(), 4096);
  EXPECT_EQ(p.find("n_ctx_train")->as_int(), 131072);
  EXPECT_EQ(p.find("chat_template")->as_string(), "gemma4");
  const json::Value& settings = *p.find("default_generation_settings");
  EXPECT_EQ(settings.find("n_ctx")->as_int(), 4096);
  const json::Value& params = *settings.find("params");
  EXPECT_EQ(params.find("max_tokens")->as_int(), 100);
  EXPECT_EQ(params.find("n_predict")->as_int(), 100);
  EXPECT_EQ(params.find("temperature")->as_double(), 0.6);  // the first step's: t_max
  EXPECT_EQ(params.find("t_min")->as_double(), 0.3);
  EXPECT_EQ(params.find("max_denoising_steps")->as_int(), 12);
  EXPECT_EQ(params.find("seed")->as_int(), -1);
  o.defaults.greedy = true;
  EXPECT_EQ(json::parse(props_body(tiny_model(), o))
                .find("default_generation_settings")
                ->find("params")
                ->find("temperature")
                ->as_double(),
            0.0);
}

}  // namespace
}  // namespace dgemma::server
