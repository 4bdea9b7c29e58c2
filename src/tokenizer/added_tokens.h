#pragma once
// Added tokens (tokenizer.json "added_tokens") and their matching in text.
// Semantics of HF tokenizers `AddedVocabulary::find_matches`: a
// leftmost-longest, non-overlapping scan over all patterns (aho-corasick
// MatchKind::LeftmostLongest); a match rejected by single_word still consumes
// its span; lstrip/rstrip widen the match over Unicode whitespace.
// Tokens with normalized=false are matched on the raw input before the
// normalizer runs; normalized=true ones on the normalized text.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dgemma::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// One piece of split text: [begin, end) and the added token id, or -1 for
// ordinary text.
struct Segment {
  size_t begin, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  // `patterns[i]` is the string matched for `tokens[i]` (its content, or its
  // normalized content for normalized tokens).
  void build(const std::vector<const AddedToken*>& tokens, const std::vector<std::string>& patterns);
  bool empty() const { return tokens_.empty(); }

  // Byte ranges [first, second) of a text where special tokens do not match
  // (text encoded with split_special_tokens); sorted, non-overlapping.
  using Ranges = std::span<const std::pair<size_t, size_t>>;

  // Splits `text` into ordinary text and added tokens (appends to `out`). A
  // special token whose match would overlap `plain` is not a candidate there
  // (as if it were not in the vocabulary), so a shorter or later match wins.
  void split(std::string_view text, std::vector<Segment>& out, Ranges plain = {}) const;

 private:
  // Longest allowed pattern starting at `pos`: (token index, length) or (-1, 0).
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos, Ranges plain) const;
  int32_t child(int32_t node, unsigned char byte) const;

  struct Node {
    int32_t token = -1;       // index into tokens_ when a pattern ends here
    uint32_t first_edge = 0;  // edges_[first_edge, first_edge + edge_count)
    uint32_t edge_count = 0;
  };
  struct Edge {
    unsigned char byte;
    int32_t target;
  };
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;  // sorted by byte within each node
  std::vector<const AddedToken*> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace dgemma::tok
