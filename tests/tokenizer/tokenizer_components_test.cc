// Component semantics on small synthetic tokenizer.json files and on the
// Gemma 3 file: byte-fallback decoding, unk/fuse_unk, merge formats, added
// token flags, Metaspace/Strip/Prepend, post-processing, and the errors for
// unsupported components and bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "dgemma/error.h"
#include <cstdio>

#include "tokenizer_test_util.h"

namespace dgemma {
namespace {

using json::Array;
using json::Object;
using json::Value;

// Expects `fn` to throw dgemma::Error whose message contains `needle`.
template <typename Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Value added(int id, const std::string& content, bool special, bool lstrip = false, bool rstrip = false,
            bool single_word = false, bool normalized = false) {
  return Object{{"id", id},         {"content", content},       {"single_word", single_word}, {"lstrip", lstrip},
                {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

// A small BPE tokenizer: pieces <unk> a b c ab abc ▁ ▁a, merges a+b, ab+c, ▁+a.
Value small_tokenizer() {
  Object vocab = {{"<unk>", 0},
                  {"a", 1},
                  {"b", 2},
                  {"c", 3},
                  {"ab", 4},
                  {"abc", 5},
                  {"\xE2\x96\x81", 6},
                  {"\xE2\x96\x81"
                   "a",
                   7},
                  {"<s>", 8},
                  {"</s>", 9},
                  {"<0x7A>", 10}};
  Value model = Object{{"type", "BPE"},
                       {"dropout", nullptr},
                       {"unk_token", "<unk>"},
                       {"continuing_subword_prefix", nullptr},
                       {"end_of_word_suffix", nullptr},
                       {"fuse_unk", true},
                       {"byte_fallback", false},
                       {"ignore_merges", false},
                       {"vocab", vocab},
                       {"merges", Array{Array{"a", "b"}, "ab c", Array{"\xE2\x96\x81", "a"}}}};
  return Object{{"version", "1.0"},
                {"truncation", nullptr},
                {"padding", nullptr},
                {"added_tokens", Array{added(0, "<unk>", true), added(8, "<s>", true), added(9, "</s>", true)}},
                {"normalizer", nullptr},
                {"pre_tokenizer", nullptr},
                {"post_processor", nullptr},
                {"decoder", nullptr},
                {"model", model}};
}

Tokenizer load(const Value& v) { return Tokenizer::from_json(json::dump(v), "tokenizer.json"); }

std::vector<int32_t> enc(const Tokenizer& t, std::string_view s) { return t.encode(s, false); }

TEST(TokenizerBpe, MergesInBothFormatsAndRankOrder) {
  Tokenizer t = load(small_tokenizer());
  EXPECT_EQ(enc(t, "abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(enc(t, "abab"), (std::vector<int32_t>{4, 4}));
  EXPECT_EQ(enc(t, "cab"), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(enc(t, ""), (std::vector<int32_t>{}));
  // No decoder: tokens are joined with spaces (Rust behaviour).
  EXPECT_EQ(t.decode(std::vector<int32_t>{4, 3}), "ab c");
}

TEST(TokenizerBpe, UnknownCharactersFuse) {
  Value v = small_tokenizer();
  Tokenizer fused = load(v);
  EXPECT_EQ(enc(fused, "xyab"), (std::vector<int32_t>{0, 4}));
  v.as_object_mut()[8].second.set("fuse_unk", false);
  Tokenizer unfused = load(v);
  EXPECT_EQ(enc(unfused, "xyab"), (std::vector<int32_t>{0, 0, 4}));
  // byte_fallback with only <0x7A> present: "z" -> bytes, "y" -> unk.
  v.as_object_mut()[8].second.set("byte_fallback", true);
  Tokenizer fb = load(v);
  EXPECT_EQ(enc(fb, "zya"), (std::vector<int32_t>{10, 0, 1}));
  // Rust order: bytes are emitted while an <unk> is still pending.
  EXPECT_EQ(enc(fb, "yza"), (std::vector<int32_t>{10, 0, 1}));
}

TEST(TokenizerBpe, MissingMergePieceIsAnError) {
  Value v = small_tokenizer();
  v.as_object_mut()[8].second.set("merges", Array{Array{"a", "c"}});
  expect_error([&] { load(v); }, "piece \"ac\" is not in the vocabulary");
}

TEST(TokenizerAddedTokens, LongestMatchAndFlags) {
  Value v = small_tokenizer();
  Array at = {added(0, "<unk>", true), added(8, "<s>", true), added(9, "</s>", true),
              added(11, "<s>x", false, /*lstrip=*/true, /*rstrip=*/true), added(12, "cc", false, false, false, true)};
  v.set("added_tokens", at);
  Tokenizer t = load(v);
  EXPECT_EQ(enc(t, "a<s>b"), (std::vector<int32_t>{1, 8, 2}));
  // Longest match wins; lstrip/rstrip swallow surrounding whitespace.
  EXPECT_EQ(enc(t, "a  <s>x  b"), (std::vector<int32_t>{1, 11, 2}));
  // single_word: only matched when not inside a word.
  EXPECT_EQ(enc(t, "cc"), (std::vector<int32_t>{12}));
  EXPECT_EQ(enc(t, "acc"), (std::vector<int32_t>{1, 3, 3}));
  EXPECT_EQ(t.vocab_size(), 13u);
  EXPECT_TRUE(t.is_special(8));
  EXPECT_EQ(t.decode(std::vector<int32_t>{1, 8, 2}, true), "a b");
}

TEST(TokenizerAddedTokens, IdMustMatchTheReferenceAssignment) {
  Value v = small_tokenizer();
  v.set("added_tokens", Array{added(3, "<s>", true)});
  expect_error([&] { load(v); }, "has id 3, but the reference implementation would give it id 8");
}

TEST(TokenizerComponents, MetaspaceAndPrependStrip) {
  Value v = small_tokenizer();
  v.set("pre_tokenizer",
        Object{{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}});
  v.set("decoder",
        Object{{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}});
  Tokenizer t = load(v);
  EXPECT_EQ(enc(t, "a a"), (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(t.decode(enc(t, "a a")), "a a");

  Value n = small_tokenizer();
  n.set("normalizer",
        Object{{"type", "Sequence"},
               {"normalizers", Array{Object{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                                     Object{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}}}});
  n.set("decoder",
        Object{
            {"type", "Sequence"},
            {"decoders",
             Array{Object{{"type", "Replace"}, {"pattern", Object{{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                   Object{{"type", "Fuse"}}, Object{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}});
  Tokenizer p = load(n);
  EXPECT_EQ(enc(p, "  ab "), (std::vector<int32_t>{6, 4}));
  EXPECT_EQ(p.decode(enc(p, "  ab ")), "ab");
}

TEST(TokenizerComponents, SplitBehaviours) {
  Value v = small_tokenizer();
  v.set("pre_tokenizer",
        Object{{"type", "Split"}, {"pattern", Object{{"String", "b"}}}, {"behavior", "Isolated"}, {"invert", false}});
  // "abc" split into a | b | c, so no merge applies.
  EXPECT_EQ(enc(load(v), "abc"), (std::vector<int32_t>{1, 2, 3}));
  v.set("pre_tokenizer", Object{{"type", "Split"},
                                {"pattern", Object{{"String", "c"}}},
                                {"behavior", "MergedWithPrevious"},
                                {"invert", false}});
  EXPECT_EQ(enc(load(v), "abcab"), (std::vector<int32_t>{5, 4}));
  v.set("pre_tokenizer",
        Object{{"type", "Split"}, {"pattern", Object{{"String", "a"}}}, {"behavior", "Removed"}, {"invert", false}});
  EXPECT_EQ(enc(load(v), "abca"), (std::vector<int32_t>{2, 3}));
}

TEST(TokenizerComponents, TemplateProcessing) {
  Value v = small_tokenizer();
  v.set("post_processor",
        Object{{"type", "TemplateProcessing"},
               {"single", Array{Object{{"SpecialToken", Object{{"id", "<s>"}, {"type_id", 0}}}},
                                Object{{"Sequence", Object{{"id", "A"}, {"type_id", 0}}}},
                                Object{{"SpecialToken", Object{{"id", "</s>"}, {"type_id", 0}}}}}},
               {"pair", Array{}},
               {"special_tokens",
                Object{{"<s>", Object{{"id", "<s>"}, {"ids", Array{8}}, {"tokens", Array{"<s>"}}}},
                       {"</s>", Object{{"id", "</s>"}, {"ids", Array{9}}, {"tokens", Array{"</s>"}}}}}}});
  Tokenizer t = load(v);
  EXPECT_EQ(t.encode("ab", true), (std::vector<int32_t>{8, 4, 9}));
  EXPECT_EQ(t.encode("ab", false), (std::vector<int32_t>{4}));
}

TEST(TokenizerComponents, UnsupportedComponentsAreNamed) {
  auto with = [](const char* key, Value comp) {
    Value v = small_tokenizer();
    v.set(key, std::move(comp));
    return v;
  };
  expect_error(
      [&] {
        load(with("normalizer", Object{{"type", "NFKC"}}));
      },
      "tokenizer.json: normalizer type \"NFKC\" is not supported");
  expect_error(
      [&] {
        load(with("pre_tokenizer", Object{{"type", "ByteLevel"}}));
      },
      "tokenizer.json: pre_tokenizer type \"ByteLevel\" is not supported");
  expect_error(
      [&] {
        load(with("decoder", Object{{"type", "WordPiece"}}));
      },
      "tokenizer.json: decoder type \"WordPiece\" is not supported");
  expect_error(
      [&] {
        load(with("post_processor", Object{{"type", "RobertaProcessing"}}));
      },
      "tokenizer.json: post_processor type \"RobertaProcessing\" is not supported");
  expect_error(
      [&] {
        load(with("normalizer",
                  Object{{"type", "Replace"}, {"pattern", Object{{"Regex", " +"}}}, {"content", "\xE2\x96\x81"}}));
      },
      "Regex patterns are not supported");
  expect_error([&] { load(with("truncation", Object{{"max_length", 8}})); }, "truncation is not supported");
  expect_error([&] { load(with("padding", Object{{"strategy", Object{{"Fixed", 8}}}})); }, "padding is not supported");
  EXPECT_NO_THROW(load(with("padding", Object{{"strategy", "BatchLongest"}, {"direction", "Left"}})));
  Value u = small_tokenizer();
  u.as_object_mut()[8].second.set("type", "Unigram");
  expect_error([&] { load(u); }, "model type \"Unigram\" is not supported");
  Value d = small_tokenizer();
  d.as_object_mut()[8].second.set("dropout", 0.1);
  expect_error([&] { load(d); }, "dropout");
  expect_error([&] { Tokenizer::from_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}}}"); },
               "invalid JSON");
  expect_error([&] { Tokenizer::load("/nonexistent/tokenizer.json"); }, "cannot open");
}

// ------------------------------------------ byte fallback, decode, encode --

// Gemma-like: byte pieces <0x00>..<0xFF> at ids 1..256, a few ordinary
// pieces, and Gemma's decoder chain (docs/formats.md §6.1).
Tokenizer byte_tokenizer() {
  Object vocab = {{"<unk>", 0}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab.emplace_back(name, b + 1);
  }
  for (auto [piece, id] : {std::pair<const char*, int>{"a", 257}, {"b", 258}, {"ab", 259}, {"\xE2\x96\x81", 260}})
    vocab.emplace_back(piece, id);
  Value v = small_tokenizer();
  Value& model = v.as_object_mut()[8].second;
  model.set("vocab", vocab);
  model.set("merges", Array{Array{"a", "b"}});
  model.set("byte_fallback", true);
  v.set("added_tokens", Array{added(0, "<unk>", true)});
  v.set("normalizer", Object{{"type", "Replace"}, {"pattern", Object{{"String", " "}}}, {"content", "\xE2\x96\x81"}});
  v.set("decoder",
        Object{{"type", "Sequence"},
               {"decoders",
                Array{Object{{"type", "Replace"}, {"pattern", Object{{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                      Object{{"type", "ByteFallback"}}, Object{{"type", "Fuse"}}}}});
  return load(v);
}

int32_t byte_id(int b) { return 1 + b; }

TEST(TokenizerDecode, ByteFallbackRuns) {
  Tokenizer t = byte_tokenizer();
  const std::string kFffd = "\xEF\xBF\xBD";
  // Bytes of one character spread over three tokens form UTF-8 together.
  EXPECT_EQ(t.decode(std::vector<int32_t>{byte_id(0xE4), byte_id(0xBD), byte_id(0xA0)}), "\xE4\xBD\xA0");
  // HF rule: a run that is not valid UTF-8 as a whole becomes one U+FFFD per
  // byte, even when a prefix of it would be valid.
  EXPECT_EQ(t.decode(std::vector<int32_t>{byte_id(0xE4), byte_id(0xBD), byte_id(0xA0), byte_id(0xFF)}),
            kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(t.decode(std::vector<int32_t>{byte_id(0xE4), 259, byte_id(0xBD)}), kFffd + "ab" + kFffd);
  EXPECT_EQ(t.decode(std::vector<int32_t>{byte_id(0x41), byte_id(0x0D), 260, 257}), "A\r a");
  EXPECT_EQ(t.decode(std::vector<int32_t>{}), "");
  // Encode: characters without a piece become their UTF-8 bytes.
  EXPECT_EQ(t.encode("\xE4\xBD\xA0 ab", false),
            (std::vector<int32_t>{byte_id(0xE4), byte_id(0xBD), byte_id(0xA0), 260, 259}));
}

TEST(TokenizerDecode, OutOfRangeIdsAreErrors) {
  Tokenizer t = byte_tokenizer();
  EXPECT_EQ(t.vocab_size(), 261u);
  expect_error([&] { t.decode(std::vector<int32_t>{261}); }, "cannot decode token id 261: out of range");
  expect_error([&] { t.decode(std::vector<int32_t>{-1}); }, "cannot decode token id -1");
  expect_error([&] { t.id_to_piece(1 << 30); }, "not in the vocabulary");
}

TEST(TokenizerEncode, InvalidUtf8IsAnError) {
  Tokenizer t = byte_tokenizer();
  expect_error([&] { t.encode("ab\xFF", false); }, "not valid UTF-8 (invalid byte 0xFF at offset 2)");
  expect_error([&] { t.encode("\xED\xA0\x80", false); }, "offset 0");  // a surrogate
  expect_error([&] { t.encode("\xC0\xAF", false); }, "offset 0");      // an overlong
}

TEST(TokenizerEncode, ThreadsShareOneTokenizer) {
  Tokenizer t = byte_tokenizer();
  const std::string text = "ab ab \xE4\xBD\xA0 aab abb ab";
  const auto want = t.encode(text, false);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (i % 10 == 0) t.clear_cache();
        if (t.encode(text, false) != want) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace dgemma
