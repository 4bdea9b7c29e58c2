#pragma once
// Public tokenizer API: loads a Hugging Face tokenizer.json (the file Gemma 3
// and Gemma 4 / DiffusionGemma ship, docs/formats.md §6) and encodes/decodes with
// the semantics of the Rust `tokenizers` crate, verified id-for-id against
// goldens (tests/tokenizer/). Supported components: BPE (byte_fallback,
// fuse_unk, unk, merges as pairs or "a b" strings), added tokens (special,
// lstrip, rstrip, normalized, single_word), normalizers Replace/Prepend/Strip/
// Sequence, pre-tokenizers Split/Metaspace/Sequence, decoders Replace/
// ByteFallback/Fuse/Strip/Metaspace/Sequence, post-processor
// TemplateProcessing. Anything else is rejected at load with a dgemma::Error
// naming the component, never silently mis-encoded.
//
// A Tokenizer is immutable after load and safe to use from several threads;
// copies share the loaded data.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dgemma {

// A tokenizer given as arrays, the way a GGUF file stores it
// (docs/formats.md §5.4): the pieces by id, their llama.cpp token types, the
// BPE merges in rank order, and the special ids. Plain data, so the layer
// that reads the file fills it without this layer knowing the file.
struct TokenizerArrays {
  std::string source;               // names the file in errors
  std::string model;                // tokenizer.ggml.model; "gemma4" is supported
  std::vector<std::string> tokens;  // id -> piece
  std::vector<int32_t> types;       // id -> type (kTokenType*); empty: every piece normal
  std::vector<std::string> merges;  // "left right", rank = index
  int32_t unknown_id = -1;          // -1: none
  int32_t bos_id = -1;              // -1: none
  int32_t eos_id = -1;              // -1: none
  bool add_bos = false;             // encode(add_special = true) prepends bos_id
};
// llama.cpp's token types as GGUF files store them (docs/formats.md §5.4).
inline constexpr int32_t kTokenTypeNormal = 1, kTokenTypeUnknown = 2, kTokenTypeControl = 3, kTokenTypeUserDefined = 4,
                         kTokenTypeUnused = 5, kTokenTypeByte = 6;

class Tokenizer {
 public:
  // Reads and parses `path` (a tokenizer.json). Throws dgemma::Error.
  static Tokenizer load(const std::string& path);
  // Parses tokenizer.json text; `source` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& source = "tokenizer.json");
  // Builds the tokenizer of a GGUF file from its arrays (docs/formats.md
  // §5.4): the Gemma BPE pipeline over `tokens` and `merges`; control and
  // unknown tokens are special added tokens, user-defined ones non-special
  // added tokens; an end-of-generation token typed otherwise counts as
  // control. Throws dgemma::Error naming `arrays.source` and the entry.
  static Tokenizer from_arrays(const TokenizerArrays& arrays);

  // Text -> ids. `add_special` applies the post-processor (Gemma 3: a leading
  // <bos>). Special-token text inside `text` is always recognized, as in the
  // reference. `text` must be valid UTF-8 (the reference only accepts
  // strings); invalid input throws dgemma::Error naming the byte offset.
  std::vector<int32_t> encode(std::string_view text, bool add_special) const;

  // As encode, but special-token text inside `text` is ordinary text (HF
  // tokenizers `split_special_tokens=True`): "<bos>" or "<|turn>" in `text`
  // never becomes the control id; it is pre-tokenized and run through BPE like
  // any other text. Non-special added tokens (e.g. Gemma's newline runs) still
  // match, as in the reference. Use it for untrusted text such as chat content.
  std::vector<int32_t> encode_plain(std::string_view text, bool add_special) const;

  // One part of a text to encode: `special_tokens` = true matches special-token
  // text in it as control tokens (encode), false encodes it as ordinary text
  // (encode_plain).
  struct TextPiece {
    std::string_view text;
    bool special_tokens = true;
  };
  // Encodes the concatenation of `pieces` as one text, except that a special
  // token never matches over bytes of a piece with special_tokens == false
  // (there it is not a candidate at all, as in encode_plain). So the ids equal
  // those of encode(concatenation) whenever the plain pieces hold no
  // special-token text; other matches (non-special added tokens such as
  // newline runs, BPE words) span piece boundaries as in the joined text. For
  // chat prompts: template markup with special tokens, message content without.
  std::vector<int32_t> encode_pieces(std::span<const TextPiece> pieces, bool add_special) const;

  // Ids -> text through the tokenizer.json decoder. With `skip_special`,
  // special added tokens (<bos>, <eos>, turn markers, ...) are left out. A
  // run of byte tokens (<0xE4><0xBD><0xA0>) that is not valid UTF-8 as a
  // whole decodes to one U+FFFD per byte (HF ByteFallback). Ids outside the
  // vocabulary throw dgemma::Error (the Rust crate silently drops them).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Id of a token by its exact content (added tokens first, then the BPE
  // vocabulary), or -1. Used to find control tokens such as "<|turn>".
  int32_t token_id(std::string_view content) const;
  // Token string of `id` (e.g. "▁world", "<0x0D>", "<bos>"); throws when out of range.
  std::string_view id_to_piece(int32_t id) const;
  // Number of ids, including added tokens outside the BPE vocabulary
  // (Gemma 3: 262,145 because <image_soft_token> is 262144).
  size_t vocab_size() const;
  bool is_special(int32_t id) const;  // a special added token
  bool is_added(int32_t id) const;    // any added token (matched before normalization)

  // Drops the BPE word cache (benchmarks measure cold encodes with it).
  void clear_cache() const;
  // The file name or source given at load.
  const std::string& source() const;

  // Same as encode but without cutting words before "▁" and without the word
  // cache: the plain reference algorithm (tests compare the two).
  std::vector<int32_t> encode_reference(std::string_view text, bool add_special) const;

  struct Impl;  // opaque; defined in tokenizer_impl.h

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::vector<int32_t> encode_impl(std::span<const TextPiece> pieces, bool add_special, bool reference) const;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace dgemma
