#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/utf8.h"

namespace dgemma::tok {

void AddedTokenMatcher::build(const std::vector<const AddedToken*>& tokens, const std::vector<std::string>& patterns) {
  tokens_ = tokens;
  // Build with ordered child maps, then flatten to one edge array.
  std::vector<std::map<unsigned char, int32_t>> kids(1);
  std::vector<int32_t> terminal(1, -1);
  for (size_t t = 0; t < patterns.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;  // an empty pattern never matches
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (unsigned char c : p) {
      auto it = kids[size_t(node)].find(c);
      if (it == kids[size_t(node)].end()) {
        int32_t next = int32_t(kids.size());
        kids[size_t(node)][c] = next;
        kids.emplace_back();
        terminal.push_back(-1);
        node = next;
      } else {
        node = it->second;
      }
    }
    // Same pattern twice: aho-corasick reports the first-added pattern.
    if (terminal[size_t(node)] < 0) terminal[size_t(node)] = int32_t(t);
  }
  nodes_.assign(kids.size(), Node{});
  edges_.clear();
  for (size_t n = 0; n < kids.size(); ++n) {
    nodes_[n].token = terminal[n];
    nodes_[n].first_edge = uint32_t(edges_.size());
    nodes_[n].edge_count = uint32_t(kids[n].size());
    for (const auto& [byte, target] : kids[n]) edges_.push_back({byte, target});
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  const Node& n = nodes_[size_t(node)];
  const Edge* b = edges_.data() + n.first_edge;
  const Edge* e = b + n.edge_count;
  if (n.edge_count <= 8) {
    for (const Edge* x = b; x != e; ++x)
      if (x->byte == byte) return x->target;
    return -1;
  }
  const Edge* it = std::lower_bound(b, e, byte, [](const Edge& x, unsigned char v) { return x.byte < v; });
  return it != e && it->byte == byte ? it->target : -1;
}

namespace {
// True when [begin, end) overlaps one of the sorted ranges.
bool overlaps(AddedTokenMatcher::Ranges ranges, size_t begin, size_t end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t v, const std::pair<size_t, size_t>& r) { return v < r.second; });
  return it != ranges.end() && it->first < end;
}
}  // namespace

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos, Ranges plain) const {
  int32_t node = 0, best = -1;
  size_t best_len = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    const int32_t tok = nodes_[size_t(node)].token;
    if (tok >= 0 && !(tokens_[size_t(tok)]->special && !plain.empty() && overlaps(plain, pos, i + 1))) {
      best = tok;
      best_len = i + 1 - pos;
    }
  }
  return {best, best_len};
}

namespace {
bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t p = prev_code_point_start(s, s.size());
  return is_unicode_alphanumeric(next_code_point(s, p));
}
bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t p = 0;
  return is_unicode_alphanumeric(next_code_point(s, p));
}
}  // namespace

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out, Ranges plain) const {
  size_t start_offset = 0;  // end of the previous emitted piece
  size_t pos = 0;           // where the next search starts
  while (pos < text.size()) {
    // Leftmost position where some pattern matches, longest pattern there.
    int32_t tok = -1;
    size_t len = 0;
    while (pos < text.size()) {
      if (first_byte_[static_cast<unsigned char>(text[pos])]) {
        std::tie(tok, len) = longest_at(text, pos, plain);
        if (tok >= 0) break;
      }
      ++pos;
    }
    if (tok < 0) break;
    size_t start = pos, stop = pos + len;
    pos = stop;  // non-overlapping: the next search starts after this match
    const AddedToken& t = *tokens_[size_t(tok)];
    if (t.single_word) {
      bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t p = prev_code_point_start(text, s), q = p;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        s = p;
      }
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t q = stop;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        stop = q;
      }
      // The reference would emit overlapping pieces if a later match starts
      // inside the stripped whitespace; we continue after it instead.
      pos = std::max(pos, stop);
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace dgemma::tok
