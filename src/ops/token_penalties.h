#pragma once
// Repetition penalties (docs/model.md §3.7): per token of the committed
// context, a change of its raw logit before the temperature divides it. They
// change z itself, so the argmax, the entropy, the draw and the next step's
// self-conditioning input all see the penalized logits.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dgemma {

struct TokenCount {
  int32_t token = 0;
  int64_t count = 0;  // > 0
};

struct TokenPenalties {
  double presence = 0.0;           // OpenAI presence_penalty: subtracted once from a token that occurs
  double frequency = 0.0;          // OpenAI frequency_penalty: subtracted per occurrence
  double repeat = 1.0;             // llama.cpp repeat_penalty: a positive logit / r, a negative one x r
  std::vector<TokenCount> counts;  // the context's distinct tokens, each once
  bool active() const { return presence != 0.0 || frequency != 0.0 || repeat != 1.0; }
};

// The penalized logit of a token that occurs `count` (> 0) times, in float32:
// first x / r when x > 0, else x * r (r = float(repeat)); then
// x - float(frequency * count + presence), the subtrahend computed in double
// and rounded once. -inf stays -inf.
float penalize_logit(float logit, int64_t count, const TokenPenalties& penalties);

// Applies penalize_logit to the row's entries of every token in
// penalties.counts (tokens outside [0, vocab) are skipped); the rest of the
// row is untouched.
void apply_penalties(float* row, size_t vocab, const TokenPenalties& penalties);

}  // namespace dgemma
