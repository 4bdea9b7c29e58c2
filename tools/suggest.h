#pragma once
// "did you mean ...?" for mistyped options and commands.
#include <string>
#include <vector>

namespace dgemma::cli {

// Levenshtein distance (insertions, deletions, substitutions; bytes).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word` when it is close enough to be a plausible
// typo (distance <= max(1, |word| / 3), or `word` is a prefix of exactly one
// candidate); "" otherwise.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean X?)" for closest_match, or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace dgemma::cli
