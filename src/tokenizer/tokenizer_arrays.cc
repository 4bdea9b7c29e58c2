// TokenizerArrays (a GGUF file's tokenizer.ggml.* keys) -> Tokenizer::Impl,
// the same tokenizer tokenizer.json describes (docs/formats.md §5.4).
#include <algorithm>

#include "core/json.h"
#include "dgemma/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace dgemma::tok {
namespace {

// The "gemma4" model's pipeline around the BPE: the components Gemma's
// tokenizer.json names (docs/formats.md §6.1).
constexpr std::string_view kGemmaNormalizer = R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})";
constexpr std::string_view kGemmaPreTokenizer =
    R"({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false})";
constexpr std::string_view kGemmaDecoder =
    R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]})";

// End-of-generation tokens that count as control tokens whatever type the
// file gives them, as llama.cpp's loader treats them (docs/formats.md §5.4).
constexpr std::string_view kEndOfGenerationPieces[] = {"</s>", "<end_of_turn>", "<turn|>", "<|tool_response>"};

json::Value component(std::string_view text, const std::string& source) {
  json::ParseOptions po;
  po.source = source;
  return json::parse(text, po);
}

int32_t checked_id(const TokenizerArrays& a, const char* what, int32_t id) {
  if (id < -1 || id >= int32_t(a.tokens.size()))
    throw Error(a.source + ": " + what + " " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(a.tokens.size()) + " tokens");
  return id;
}

void add_vocab(const TokenizerArrays& a, PieceTable& vocab) {
  size_t bytes = 0;
  for (const std::string& t : a.tokens) bytes += t.size();
  vocab.reserve(a.tokens.size() + 16, bytes + 16);
  for (size_t id = 0; id < a.tokens.size(); ++id)
    if (!vocab.insert(a.tokens[id], int32_t(id)))
      throw Error(a.source + ": tokenizer.ggml.tokens[" + std::to_string(id) + "] " + json::quoted(a.tokens[id]) +
                  " duplicates token " + std::to_string(vocab.find(a.tokens[id])));
}

void add_merges(const TokenizerArrays& a, BpeModel& model) {
  const PieceTable& vocab = model.vocab();
  MergeTable& merges = model.merges();
  merges.reserve(a.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < a.merges.size(); ++rank) {
    const std::string_view both = a.merges[rank];
    const size_t sp = both.find(' ');
    const std::string what = a.source + ": tokenizer.ggml.merges[" + std::to_string(rank) + "] " + json::quoted(both);
    if (sp == std::string_view::npos || both.find(' ', sp + 1) != std::string_view::npos)
      throw Error(what + " is not two pieces separated by one space");
    const std::string_view left = both.substr(0, sp), right = both.substr(sp + 1);
    joined.assign(left).append(right);
    const int32_t l = vocab.find(left), r = vocab.find(right), m = vocab.find(joined);
    if (l < 0 || r < 0 || m < 0)
      throw Error(what + ": piece " +
                  json::quoted(l < 0   ? left
                               : r < 0 ? right
                                       : std::string_view(joined)) +
                  " is not in the vocabulary");
    merges.insert(l, r, uint32_t(rank), m);
    model.note_merge_result(joined);
  }
}

}  // namespace

std::shared_ptr<Tokenizer::Impl> build_from_arrays(const TokenizerArrays& a) {
  if (a.model != "gemma4")
    throw Error(a.source + ": tokenizer.ggml.model \"" + a.model + "\" is not supported (expected \"gemma4\")");
  if (a.tokens.empty()) throw Error(a.source + ": tokenizer.ggml.tokens is empty");
  if (a.tokens.size() > (size_t(1) << 24))
    throw Error(a.source + ": tokenizer.ggml.tokens has " + std::to_string(a.tokens.size()) + " entries (too many)");
  if (!a.types.empty() && a.types.size() != a.tokens.size())
    throw Error(a.source + ": tokenizer.ggml.token_type has " + std::to_string(a.types.size()) +
                " entries, tokenizer.ggml.tokens " + std::to_string(a.tokens.size()));
  const int32_t unk = checked_id(a, "tokenizer.ggml.unknown_token_id", a.unknown_id);
  const int32_t bos = checked_id(a, "tokenizer.ggml.bos_token_id", a.bos_id);
  const int32_t eos = checked_id(a, "tokenizer.ggml.eos_token_id", a.eos_id);
  if (a.add_bos && bos < 0)
    throw Error(a.source + ": tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id");

  auto impl = std::make_shared<Tokenizer::Impl>();
  Tokenizer::Impl& t = *impl;
  t.source = a.source;
  t.normalizer = Normalizer::from_json(component(kGemmaNormalizer, a.source), a.source);
  t.pre_tokenizer = PreTokenizer::from_json(component(kGemmaPreTokenizer, a.source), a.source);
  t.decoder = Decoder::from_json(component(kGemmaDecoder, a.source), a.source);
  add_vocab(a, t.model.vocab());
  add_merges(a, t.model);
  BpeOptions opt;
  opt.byte_fallback = true;
  opt.fuse_unk = true;
  if (unk >= 0) {
    opt.unk_token = a.tokens[size_t(unk)];
    opt.has_unk = true;
  }
  t.model.finalize(std::move(opt), a.source);

  // Added tokens, matched whole before the BPE: control and unknown tokens
  // are special, user-defined ones are not (docs/formats.md §5.4).
  for (size_t id = 0; id < a.tokens.size(); ++id) {
    const int32_t type = a.types.empty() ? kTokenTypeNormal : a.types[id];
    if (type < kTokenTypeNormal || type > kTokenTypeByte)
      throw Error(a.source + ": tokenizer.ggml.token_type[" + std::to_string(id) + "] is " + std::to_string(type) +
                  " (expected 1 to 6)");
    const bool end_of_generation =
        int32_t(id) == eos || std::find(std::begin(kEndOfGenerationPieces), std::end(kEndOfGenerationPieces),
                                        a.tokens[id]) != std::end(kEndOfGenerationPieces);
    const bool special =
        type == kTokenTypeControl || type == kTokenTypeUnknown || (end_of_generation && type != kTokenTypeByte);
    if (!special && type != kTokenTypeUserDefined) continue;
    if (a.tokens[id].empty())
      throw Error(a.source + ": tokenizer.ggml.tokens[" + std::to_string(id) + "]: an added token may not be empty");
    AddedToken at;
    at.content = a.tokens[id];
    at.id = int32_t(id);
    at.special = special;
    t.added.push_back(std::move(at));
  }

  json::Value post_processor;  // null: nothing added
  if (a.add_bos) {
    const std::string piece = json::quoted(a.tokens[size_t(bos)]);
    post_processor = component(
        R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": )" + piece +
            R"(, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {)" + piece +
            R"(: {"id": )" + piece + R"(, "ids": [)" + std::to_string(bos) + R"(], "tokens": [)" + piece + "]}}}",
        a.source);
  }
  finish_impl(t, post_processor);
  return impl;
}

}  // namespace dgemma::tok
