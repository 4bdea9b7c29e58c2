#pragma once
// Writes a small random DiffusionGemma checkpoint of an arbitrary shape for
// tests that need configs other than golden A (other sizes, head counts,
// layer patterns, dtypes).
#include <string>
#include <vector>

#include "checkpoint/synthetic_checkpoint.h"
#include "core/file_io.h"
#include "core/json.h"
#include "support/test_rng.h"

namespace dgemma::testing {

// A synthetic shape (checkpoint/synthetic_checkpoint.h; its defaults: 5
// layers, head dims 8 and 24, 6 experts top-3, window 6) with its layer
// pattern, dtype and seed.
struct RandomSpec : SyntheticShape {
  RandomSpec() {
    layer_types = {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  }
  DType dtype = DType::kBF16;
  uint32_t seed = 7;
};

inline std::string write_random_checkpoint(const std::string& tag, const RandomSpec& s) {
  const std::string dir = dgemma_test_temp_dir("random_" + tag);
  write_file_atomically(dir + "/config.json", json::dump(synthetic_config(s), 2));
  Rng rng(s.seed);
  write_synthetic_weights(dir, s.dtype, [&](const ExpectedTensor& t, std::vector<float>& v) {
    const bool is_vector = t.shape.size() == 1;
    const float std = t.component == Component::kEmbedding ? 0.5f : 0.15f;
    for (auto& x : v) x = is_vector ? rng.uniform_real(0.6f, 1.3f) : rng.normal(std);
    if (t.name == "model.decoder.norm.weight")
      for (auto& x : v) x *= 4.0f;  // peaked logits, as golden A does
  });
  return dir;
}

}  // namespace dgemma::testing
