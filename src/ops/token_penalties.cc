#include "ops/token_penalties.h"

namespace dgemma {

float penalize_logit(float logit, int64_t count, const TokenPenalties& p) {
  float x = logit;
  if (p.repeat != 1.0) {
    const float r = float(p.repeat);
    x = x > 0.0f ? x / r : x * r;
  }
  const float subtrahend = float(p.frequency * double(count) + p.presence);
  return x - subtrahend;
}

void apply_penalties(float* row, size_t vocab, const TokenPenalties& penalties) {
  for (const TokenCount& tc : penalties.counts)
    if (tc.token >= 0 && size_t(tc.token) < vocab && tc.count > 0)
      row[tc.token] = penalize_logit(row[tc.token], tc.count, penalties);
}

}  // namespace dgemma
