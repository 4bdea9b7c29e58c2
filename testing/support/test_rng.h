#pragma once
// Seeded random values for tests and benchmarks, and the random cases they
// build from them: one std::mt19937 and the standard distributions, so that a
// seed gives the same values on every run (with one standard library: the
// distributions' algorithms are libstdc++'s). The values are those of the
// plain <random> loop: a std::normal_distribution declared once and drawn per
// value, a uniform distribution made per draw (it keeps no state).
#include <cstdint>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace dgemma {

class Rng {
 public:
  using result_type = std::mt19937::result_type;

  explicit Rng(uint32_t seed) : engine_(seed) {}

  // The engine's next 32 bits. With min() and max() this makes an Rng a
  // uniform random bit generator: std::shuffle and the <random>
  // distributions take it and draw what they would draw from the engine.
  result_type operator()() { return engine_(); }
  static constexpr result_type min() { return std::mt19937::min(); }
  static constexpr result_type max() { return std::mt19937::max(); }

  // N(0, std²). The normal distribution lives as long as the Rng: it makes
  // values in pairs and hands out the second of a pair at the next call.
  float normal(float std = 1.0f) { return std * normal_(engine_); }
  // Uniform in [lo, hi) (float or double bounds, not integers: 0.0f, 1.0f).
  float uniform_real(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine_); }
  double uniform_real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }
  // Uniform in [lo, hi], both ends included.
  int64_t uniform_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }

 private:
  std::mt19937 engine_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
};

// n values N(0, std²): from `rng`, or from a fresh Rng(seed).
std::vector<float> normal_values(int64_t n, Rng& rng, float std);
std::vector<float> normal_values(int64_t n, uint32_t seed, float std);

// n values uniform in [lo, hi).
std::vector<float> uniform_values(int64_t n, Rng& rng, float lo, float hi);

// An f32 tensor of `shape`: values N(0, std²), or uniform in [lo, hi).
Tensor normal_tensor(std::vector<int64_t> shape, Rng& rng, float std = 1.0f);
Tensor uniform_tensor(std::vector<int64_t> shape, Rng& rng, float lo, float hi);

// n integers uniform in [lo, hi] (token ids: lo 0, hi vocab - 1).
std::vector<int32_t> uniform_ints(int64_t n, int64_t lo, int64_t hi, Rng& rng);

// The routing of `rows` tokens to k distinct experts of E each (row-major
// rows x k): per row, the first k of a shuffled 0..E-1.
std::vector<int32_t> distinct_expert_ids(int64_t rows, int64_t E, int64_t k, Rng& rng);

}  // namespace dgemma
