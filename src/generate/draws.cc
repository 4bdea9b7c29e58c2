// RandomDraws: seeded counter-based draws (docs/model.md §3.5).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "generate/draws.h"
#include "generate/sampler.h"

namespace dgemma {
namespace {

void check_vocab(int64_t vocab, const char* who) {
  if (vocab <= 0 || vocab > std::numeric_limits<int32_t>::max())
    throw Error(std::string(who) + ": vocab size " + std::to_string(vocab) + " outside [1, 2^31)");
}

}  // namespace

int32_t RandomDraws::uniform_token(int64_t canvas, int64_t step, DrawPurpose purpose, int64_t position,
                                   int64_t vocab) const {
  PhiloxStream stream(seed_, uint32_t(canvas), uint32_t(step), purpose, uint32_t(position));
  return int32_t(stream.uniform_int(uint32_t(vocab)));
}

double DrawSource::sample_uniform(int64_t /*canvas*/, int64_t /*step*/, int64_t /*position*/) const {
  throw Error("internal: sample_uniform() called on a draw source that does not sample by inverse CDF");
}

double RandomDraws::sample_uniform(int64_t canvas, int64_t step, int64_t position) const {
  PhiloxStream stream(seed_, uint32_t(canvas), uint32_t(step), DrawPurpose::kSample, uint32_t(position));
  return stream.uniform_double();
}

int32_t RandomDraws::sample_token(int64_t canvas, int64_t step, int64_t position, const float* z, int64_t vocab) const {
  // Probabilities as softmax computes them in fp32 (exp(z - max)); their sum
  // and the running CDF are kept in double so that the 53-bit uniform is not
  // wasted on rounding.
  float max_z = -std::numeric_limits<float>::infinity();
  for (int64_t v = 0; v < vocab; ++v) max_z = std::max(max_z, z[v]);
  thread_local std::vector<float> p;
  p.resize(size_t(vocab));
  double total = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    p[size_t(v)] = std::exp(z[v] - max_z);
    total += double(p[size_t(v)]);
  }
  if (!(total > 0.0) || !std::isfinite(total))
    throw Error("RandomDraws::sample: canvas " + std::to_string(canvas) + " step " + std::to_string(step) +
                " position " + std::to_string(position) + ": logits row has no finite maximum");
  return inverse_cdf(p.data(), size_t(vocab), sample_uniform(canvas, step, position) * total);
}

void RandomDraws::canvas_init(int64_t canvas, int64_t vocab, std::span<int32_t> out) {
  check_vocab(vocab, "RandomDraws::canvas_init");
  for (size_t i = 0; i < out.size(); ++i) out[i] = uniform_token(canvas, 0, DrawPurpose::kInit, int64_t(i), vocab);
}

void RandomDraws::sample(int64_t canvas, int64_t step, const float* processed_logits, int64_t vocab,
                         std::span<int32_t> out) {
  check_vocab(vocab, "RandomDraws::sample");
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = sample_token(canvas, step, int64_t(i), processed_logits + i * size_t(vocab), vocab);
}

void RandomDraws::renoise(int64_t canvas, int64_t step, int64_t vocab, std::span<int32_t> out) {
  check_vocab(vocab, "RandomDraws::renoise");
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uniform_token(canvas, step, DrawPurpose::kRenoise, int64_t(i), vocab);
}

}  // namespace dgemma
