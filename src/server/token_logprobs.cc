#include "server/token_logprobs.h"

#include <algorithm>
#include <cmath>

namespace dgemma::server {

PositionLogprobs position_logprobs(std::span<const float> z, int32_t id, int64_t top) {
  float max = z[0];
  for (const float v : z) max = std::max(max, v);
  double sum = 0;
  for (const float v : z) sum += std::exp(double(v) - double(max));
  const double log_normalizer = double(max) + std::log(sum);
  PositionLogprobs p;
  p.id = id;
  p.logprob = double(z[size_t(id)]) - log_normalizer;
  if (top <= 0) return p;
  // The `top` largest by a running sorted list: most values are below its
  // last entry and cost one comparison.
  const size_t k = size_t(std::min<int64_t>(top, int64_t(z.size())));
  std::vector<int32_t> best;
  best.reserve(k + 1);
  const auto before = [&](int32_t a, int32_t b) {
    return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
  };
  for (int32_t i = 0; i < int32_t(z.size()); ++i) {
    if (best.size() == k && !before(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, before), i);
    if (best.size() > k) best.pop_back();
  }
  for (const int32_t t : best) p.top.push_back({t, double(z[size_t(t)]) - log_normalizer});
  return p;
}

TokenText token_text(const Tokenizer& tokenizer, int32_t id) {
  TokenText t;
  const std::string_view piece = tokenizer.id_to_piece(id);
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const std::vector<int32_t> one = {id};
  t.text = tokenizer.decode(one);
  if (piece.size() == 6 && piece.substr(0, 3) == "<0x" && piece[5] == '>' && hex(piece[3]) >= 0 && hex(piece[4]) >= 0) {
    t.bytes = {uint8_t(hex(piece[3]) * 16 + hex(piece[4]))};
  } else {
    t.bytes.assign(t.text.begin(), t.text.end());
  }
  return t;
}

AnswerToken answer_token(const Tokenizer& tokenizer, const PositionLogprobs& position) {
  AnswerToken a;
  a.token = token_text(tokenizer, position.id);
  a.logprob = position.logprob;
  for (const TokenAlternative& alt : position.top) a.top.emplace_back(token_text(tokenizer, alt.id), alt.logprob);
  return a;
}

}  // namespace dgemma::server
