#pragma once
// Writes a small random DiffusionGemma checkpoint of an arbitrary shape for
// tests that need configs other than golden A (other sizes, head counts,
// layer patterns, dtypes).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/json.h"
#include "io/safetensors.h"
#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"

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
  namespace fs = std::filesystem;
  const std::string dir = dgemma_test_temp_dir("random_" + tag);
  json::Value text = json::Object{};
  text.set("model_type", "diffusion_gemma_text");
  text.set("vocab_size", s.vocab);
  text.set("hidden_size", s.hidden);
  text.set("num_hidden_layers", s.layers);
  json::Array lt;
  for (const auto& t : s.layer_types) lt.emplace_back(t);
  text.set("layer_types", lt);
  text.set("num_attention_heads", s.heads);
  text.set("num_key_value_heads", s.kv);
  text.set("num_global_key_value_heads", s.global_kv);
  text.set("head_dim", s.head_dim);
  text.set("global_head_dim", s.global_head_dim);
  text.set("sliding_window", s.window);
  text.set("intermediate_size", s.intermediate);
  text.set("moe_intermediate_size", s.moe_intermediate);
  text.set("num_experts", s.experts);
  text.set("top_k_experts", s.top_k);
  text.set("rms_norm_eps", 1e-6);
  text.set("final_logit_softcapping", 30.0);
  json::Value rs = json::Object{}, rf = json::Object{}, rp = json::Object{};
  rs.set("rope_type", "default");
  rs.set("rope_theta", 10000.0);
  rf.set("rope_type", "proportional");
  rf.set("partial_rotary_factor", 0.25);
  rf.set("rope_theta", 1000000.0);
  rp.set("sliding_attention", rs);
  rp.set("full_attention", rf);
  text.set("rope_parameters", rp);
  json::Value root = json::Object{};
  root.set("model_type", "diffusion_gemma");
  root.set("canvas_length", s.canvas);
  root.set("text_config", text);
  {
    std::ofstream f(dir + "/config.json");
    f << json::dump(root, 2);
  }
  ModelConfig c = load_model_config(dir + "/config.json");
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.6f, 1.3f);
  SafetensorsWriter w;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const bool is_vector = t.shape.size() == 1;
    const float std = t.component == Component::kEmbedding ? 0.5f : 0.15f;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = is_vector ? uni(rng) : std * normal(rng);
    if (t.name == "model.decoder.norm.weight")
      for (auto& x : v) x *= 4.0f;  // peaked logits, as golden A does
    if (s.dtype == DType::kBF16) {
      std::vector<uint16_t> b(v.size());
      for (size_t k = 0; k < v.size(); ++k) b[k] = f32_to_bf16(v[k]);
      w.add(t.name, DType::kBF16, t.shape, b.data());
    } else {
      w.add_f32(t.name, t.shape, v.data());
    }
  }
  w.write(dir + "/model.safetensors");
  return dir;
}

}  // namespace dgemma::testing
