#pragma once
// tokenizer.json "pre_tokenizer": splits each normalized chunk into the
// "words" that BPE sees. Supported: Split (String pattern, all five
// behaviours, invert), Metaspace, Sequence, null. Gemma uses
// Split(" ", MergedWithPrevious), which finds nothing once the normalizer has
// turned spaces into "▁" (docs/formats.md §6.1).
#include <string>
#include <vector>

#include "core/json.h"

namespace dgemma::tok {

struct PreToken {
  std::string text;
  bool at_start;  // starts at offset 0 of the original input (Metaspace "first")
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Rust `NormalizedString::split` with a String pattern: pieces of `text`
// (non-empty, in order) as [begin, end) offsets.
std::vector<std::pair<size_t, size_t>> split_on(std::string_view text, std::string_view pattern, SplitBehavior behavior,
                                                bool invert);

class PreTokenizer {
 public:
  static PreTokenizer from_json(const json::Value& v, const std::string& source);

  bool is_identity() const { return steps_.empty(); }
  // Splits `tokens` in place (each step applies to every current piece).
  void apply(std::vector<PreToken>& tokens) const;

 private:
  struct Step {
    enum class Kind { kSplit, kMetaspace } kind;
    std::string pattern = {};  // Split pattern / Metaspace replacement
    SplitBehavior behavior = SplitBehavior::kRemoved;
    bool invert = false;
    enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
    bool split = true;
  };
  void add(const json::Value& v, const std::string& source);
  std::vector<Step> steps_;
};

}  // namespace dgemma::tok
