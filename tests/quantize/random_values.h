#pragma once
// Normally distributed test values (a fixed seed gives fixed values).
#include <cstdint>
#include <random>
#include <vector>

namespace dgemma::testing {

inline std::vector<float> random_values(int64_t n, uint32_t seed, float std = 0.2f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, std);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace dgemma::testing
