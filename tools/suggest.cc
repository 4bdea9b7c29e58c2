#include "suggest.h"

#include <algorithm>

namespace dgemma::cli {

size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: a swap of two adjacent characters counts once.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Strip leading dashes so that "--" does not count towards the length.
  const size_t core = word.size() - std::min(word.find_first_not_of('-'), word.size());
  if (core < 2) return {};  // "-x": too short to guess
  if (!best.empty() && best_d <= std::max<size_t>(1, core / 3)) return best;
  std::string prefixed;
  for (const auto& c : candidates) {
    if (core >= 3 && c.size() > word.size() && c.compare(0, word.size(), word) == 0) {
      if (!prefixed.empty()) return {};  // ambiguous
      prefixed = c;
    }
  }
  return prefixed;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string m = closest_match(word, candidates);
  return m.empty() ? std::string() : " (did you mean " + m + "?)";
}

}  // namespace dgemma::cli
