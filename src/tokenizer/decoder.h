#pragma once
// tokenizer.json "decoder": turns token strings back into text. Supported:
// Replace (String pattern), ByteFallback, Fuse, Strip, Metaspace, Sequence,
// null (Rust then joins the tokens with " "). Semantics follow the Rust
// crate's `decode_chain` of each decoder (decoders/*.rs); Gemma uses
// Sequence[Replace("▁"->" "), ByteFallback, Fuse] (docs/formats.md §6.1).
#include <string>
#include <vector>

#include "core/json.h"

namespace dgemma::tok {

class Decoder {
 public:
  static Decoder from_json(const json::Value& v, const std::string& source);

  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::string from = {}, to = {};  // Replace pattern/content; Strip content; Metaspace replacement
    size_t start = 0, stop = 0;      // Strip
    bool prepend = true;             // Metaspace: prepend_scheme != never
  };
  void add(const json::Value& v, const std::string& source);
  bool present_ = false;
  std::vector<Step> steps_;
};

// HF ByteFallback rule for one run of consecutive <0xXX> tokens: the run's
// bytes if they form valid UTF-8 as a whole, otherwise one U+FFFD per byte
// (decoders/byte_fallback.rs). Appends to `out`.
void flush_byte_run(const std::string& bytes, std::vector<std::string>& out);
// The byte of a "<0xXX>" token (Rust: 6 bytes, "<0x" prefix, ">" suffix and
// u8::from_str_radix(token[3..5], 16)), or -1.
int byte_token_value(std::string_view token);

}  // namespace dgemma::tok
