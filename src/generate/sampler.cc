#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "dgemma/error.h"

namespace dgemma {

float step_temperature(double t_min, double t_max, int64_t cur_step, int64_t max_denoising_steps) {
  // Each intermediate is a named float so that no contraction or excess
  // precision can merge the steps (the build is ISO C++, -ffp-contract=off).
  const float ratio = float(cur_step) / float(max_denoising_steps);
  const float span = float(t_max - t_min);
  const float scaled = span * ratio;
  return float(t_min) + scaled;
}

int64_t entropy_bound_accept(std::span<const float> entropy, double entropy_bound, std::span<uint8_t> accepted) {
  const size_t n = entropy.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entropy[a] < entropy[b]; });
  const float bound = float(entropy_bound);
  double cumulative = 0.0;
  int64_t count = 0;
  for (size_t k = 0; k < n; ++k) {
    const float h = entropy[order[k]];
    cumulative += double(h);
    const float before = float(cumulative) - h;  // "cumsum - current" in float32
    const bool accept = before <= bound;
    accepted[order[k]] = accept ? 1 : 0;
    count += accept ? 1 : 0;
  }
  return count;
}

void renoise(std::span<const uint8_t> accepted, std::span<const int32_t> sample, std::span<const int32_t> noise,
             std::span<int32_t> next) {
  for (size_t i = 0; i < next.size(); ++i) next[i] = accepted[i] ? sample[i] : noise[i];
}

float mean_entropy(std::span<const float> entropy) {
  double sum = 0.0;
  for (const float h : entropy) sum += double(h);
  return float(sum / double(entropy.size()));
}

bool is_confident(float mean, double confidence_threshold) { return mean < float(confidence_threshold); }

bool pad_after_first_eos(std::span<int32_t> canvas, std::span<const int32_t> eos_token_ids, int32_t pad_token_id) {
  const auto first = std::find_first_of(canvas.begin(), canvas.end(), eos_token_ids.begin(), eos_token_ids.end());
  if (first == canvas.end()) return false;
  std::fill(first + 1, canvas.end(), pad_token_id);
  return true;
}

StabilityTracker::StabilityTracker(int64_t threshold, int64_t canvas_length)
    : threshold_(threshold), length_(canvas_length), history_(size_t(threshold * canvas_length), -1) {}

void StabilityTracker::reset() {
  std::fill(history_.begin(), history_.end(), -1);
  oldest_ = 0;
}

bool StabilityTracker::update(std::span<const int32_t> argmax) {
  if (threshold_ == 0) return true;
  // "All history rows equal argmax" does not depend on row order, so a ring
  // buffer that overwrites the oldest row is equivalent to HF's roll.
  const bool stable = [&] {
    for (int64_t r = 0; r < threshold_; ++r)
      if (!std::equal(argmax.begin(), argmax.end(), history_.begin() + r * length_)) return false;
    return true;
  }();
  std::copy(argmax.begin(), argmax.end(), history_.begin() + oldest_ * length_);
  oldest_ = (oldest_ + 1) % threshold_;
  return stable;
}

}  // namespace dgemma
