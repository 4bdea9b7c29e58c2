#pragma once
// tokenizer.json "normalizer": applied to each added-token-free chunk of the
// input (HF tokenizers `AddedVocabulary::extract_and_normalize`). Supported:
// Replace (String pattern), Prepend, Strip, Sequence, null. Gemma uses
// Replace(" " -> "▁") (docs/formats.md §6.1). Anything else is an Error naming
// the type.
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace dgemma::tok {

class Normalizer {
 public:
  // `v` may be null (no normalizer). `source` names the file in errors.
  static Normalizer from_json(const json::Value& v, const std::string& source);

  bool is_identity() const { return steps_.empty(); }
  // Normalizes `s` in place.
  void apply(std::string& s) const;

 private:
  struct Step {
    enum class Kind { kReplace, kPrepend, kStrip } kind;
    std::string from = {}, to = {};    // Replace: pattern and content; Prepend: `to`
    bool left = false, right = false;  // Strip
  };
  void add(const json::Value& v, const std::string& source);
  std::vector<Step> steps_;
};

// Replaces every non-overlapping occurrence of `from` (left to right) with
// `to`, like Rust `NormalizedString::replace` with a String pattern. An empty
// pattern matches nothing.
void replace_all(std::string& s, std::string_view from, std::string_view to);

}  // namespace dgemma::tok
