#pragma once
// Internal state of a loaded Tokenizer (built by tokenizer_json.cc and
// tokenizer_arrays.cc, used by tokenizer.cc).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dgemma {

struct Tokenizer::Impl {
  std::string source;
  tok::BpeModel model;
  std::vector<tok::AddedToken> added;         // never resized after load (views below)
  tok::PieceTable added_index;                // content -> id of the added tokens
  tok::AddedTokenMatcher raw_matcher;         // normalized == false
  tok::AddedTokenMatcher normalized_matcher;  // normalized == true
  // normalized_matcher without the special tokens (Tokenizer::encode_plain).
  tok::AddedTokenMatcher normalized_plain_matcher;
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  tok::Decoder decoder;
  tok::PostProcessor post_processor;

  enum : uint8_t { kPresent = 1, kAdded = 2, kSpecial = 4 };
  std::vector<std::string_view> pieces;  // id -> token string (added content wins)
  std::vector<uint8_t> flags;            // id -> kPresent | kAdded | kSpecial
};

namespace tok {
// Parses tokenizer.json text into a ready Impl (tokenizer_json.cc).
std::shared_ptr<Tokenizer::Impl> parse_tokenizer_json(std::string_view text, const std::string& source);
// Completes an Impl whose source, model, normalizer, pre-tokenizer, decoder
// and added tokens are set: the added-token index (a token listed twice is
// an error), the id -> piece/flags tables, the added-token matchers and the
// post-processor (tokenizer_json.cc).
void finish_impl(Tokenizer::Impl& t, const json::Value& post_processor);
// Builds an Impl from token arrays (tokenizer_arrays.cc).
std::shared_ptr<Tokenizer::Impl> build_from_arrays(const TokenizerArrays& arrays);
}  // namespace tok

}  // namespace dgemma
