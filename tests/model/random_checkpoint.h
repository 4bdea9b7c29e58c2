#pragma once
// Writes a small random DiffusionGemma checkpoint of an arbitrary shape for
// tests that need configs other than golden A (other sizes, head counts,
// layer patterns, dtypes).
#include <random>
#include <string>
#include <vector>

#include "checkpoint/synthetic_checkpoint.h"
#include "core/file_io.h"
#include "core/json.h"

namespace dgemma::testing {

struct RandomSpec {
  int vocab = 300, hidden = 144, layers = 5, heads = 6, kv = 3, head_dim = 8, global_kv = 2, global_head_dim = 24;
  std::vector<std::string> layer_types = {"sliding_attention", "full_attention", "sliding_attention",
                                          "sliding_attention", "full_attention"};
  int window = 6, intermediate = 40, experts = 6, top_k = 3, moe_intermediate = 12, canvas = 8;
  DType dtype = DType::kBF16;
  uint32_t seed = 7;
};

inline std::string write_random_checkpoint(const std::string& tag, const RandomSpec& s) {
  const std::string dir = dgemma_test_temp_dir("random_" + tag);
  SyntheticShape shape;
  shape.vocab = s.vocab;
  shape.hidden = s.hidden;
  shape.layers = s.layers;
  shape.heads = s.heads;
  shape.kv_heads = s.kv;
  shape.global_kv_heads = s.global_kv;
  shape.head_dim = s.head_dim;
  shape.global_head_dim = s.global_head_dim;
  shape.layer_types = s.layer_types;
  shape.window = s.window;
  shape.intermediate = s.intermediate;
  shape.experts = s.experts;
  shape.top_k = s.top_k;
  shape.moe_intermediate = s.moe_intermediate;
  shape.canvas = s.canvas;
  write_file_atomically(dir + "/config.json", json::dump(synthetic_config(shape), 2));
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.6f, 1.3f);
  write_synthetic_weights(dir, s.dtype, [&](const ExpectedTensor& t, std::vector<float>& v) {
    const bool is_vector = t.shape.size() == 1;
    const float std = t.component == Component::kEmbedding ? 0.5f : 0.15f;
    for (auto& x : v) x = is_vector ? uni(rng) : std * normal(rng);
    if (t.name == "model.decoder.norm.weight")
      for (auto& x : v) x *= 4.0f;  // peaked logits, as golden A does
  });
  return dir;
}

}  // namespace dgemma::testing
