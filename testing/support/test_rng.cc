#include "support/test_rng.h"

#include <algorithm>
#include <numeric>

namespace dgemma {

std::vector<float> normal_values(int64_t n, Rng& rng, float std) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.normal(std);
  return v;
}

std::vector<float> normal_values(int64_t n, uint32_t seed, float std) {
  Rng rng(seed);
  return normal_values(n, rng, std);
}

std::vector<float> uniform_values(int64_t n, Rng& rng, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform_real(lo, hi);
  return v;
}

Tensor normal_tensor(std::vector<int64_t> shape, Rng& rng, float std) {
  Tensor t = Tensor::f32(std::move(shape));
  for (float& x : t.f) x = rng.normal(std);
  return t;
}

Tensor uniform_tensor(std::vector<int64_t> shape, Rng& rng, float lo, float hi) {
  Tensor t = Tensor::f32(std::move(shape));
  for (float& x : t.f) x = rng.uniform_real(lo, hi);
  return t;
}

std::vector<int32_t> uniform_ints(int64_t n, int64_t lo, int64_t hi, Rng& rng) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = static_cast<int32_t>(rng.uniform_int(lo, hi));
  return v;
}

std::vector<int32_t> distinct_expert_ids(int64_t rows, int64_t E, int64_t k, Rng& rng) {
  std::vector<int32_t> ids, experts(static_cast<size_t>(E));
  ids.reserve(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    ids.insert(ids.end(), experts.begin(), experts.begin() + k);
  }
  return ids;
}

}  // namespace dgemma
