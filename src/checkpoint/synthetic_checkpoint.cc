#include "checkpoint/synthetic_checkpoint.h"

#include <cstdint>

#include "checkpoint/config.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma {

json::Value synthetic_text_config(const SyntheticShape& s) {
  if (int(s.layer_types.size()) != s.layers)
    throw Error("synthetic checkpoint: " + std::to_string(s.layer_types.size()) + " layer types for " +
                std::to_string(s.layers) + " layers");
  json::Value text = json::Object{};
  text.set("model_type", "diffusion_gemma_text");
  text.set("vocab_size", s.vocab);
  text.set("hidden_size", s.hidden);
  text.set("num_hidden_layers", s.layers);
  json::Array types;
  for (const std::string& t : s.layer_types) types.emplace_back(t);
  text.set("layer_types", types);
  text.set("num_attention_heads", s.heads);
  text.set("num_key_value_heads", s.kv_heads);
  text.set("num_global_key_value_heads", s.global_kv_heads);
  text.set("head_dim", s.head_dim);
  text.set("global_head_dim", s.global_head_dim);
  text.set("sliding_window", s.window);
  text.set("intermediate_size", s.intermediate);
  text.set("moe_intermediate_size", s.moe_intermediate);
  text.set("num_experts", s.experts);
  text.set("top_k_experts", s.top_k);
  text.set("hidden_activation", "gelu_pytorch_tanh");
  text.set("rms_norm_eps", 1e-6);
  text.set("final_logit_softcapping", 30.0);
  json::Value sliding = json::Object{}, full = json::Object{}, rope = json::Object{};
  sliding.set("rope_type", "default");
  sliding.set("rope_theta", 10000.0);
  full.set("rope_type", "proportional");
  full.set("partial_rotary_factor", 0.25);
  full.set("rope_theta", 1000000.0);
  rope.set("sliding_attention", sliding);
  rope.set("full_attention", full);
  text.set("rope_parameters", rope);
  return text;
}

json::Value synthetic_vision_config(const SyntheticVision& v) {
  json::Value vc = json::Object{};
  vc.set("model_type", "gemma4_vision");
  vc.set("hidden_size", v.hidden);
  vc.set("intermediate_size", v.intermediate);
  vc.set("num_hidden_layers", v.layers);
  vc.set("num_attention_heads", v.heads);
  vc.set("num_key_value_heads", v.heads);
  vc.set("head_dim", v.head_dim);
  vc.set("patch_size", v.patch);
  vc.set("pooling_kernel_size", v.pooling);
  vc.set("position_embedding_size", v.positions);
  vc.set("standardize", v.standardize);
  vc.set("use_clipped_linears", false);
  vc.set("hidden_activation", "gelu_pytorch_tanh");
  vc.set("attention_bias", false);
  vc.set("rms_norm_eps", 1e-6);
  json::Value rope = json::Object{};
  rope.set("rope_type", "default");
  rope.set("rope_theta", 100.0);
  vc.set("rope_parameters", rope);
  return vc;
}

json::Value synthetic_config(const SyntheticShape& shape) {
  json::Value root = json::Object{};
  root.set("model_type", "diffusion_gemma");
  root.set("canvas_length", shape.canvas);
  root.set("text_config", synthetic_text_config(shape));
  if (shape.vision.hidden > 0) root.set("vision_config", synthetic_vision_config(shape.vision));
  return root;
}

void write_synthetic_weights(const std::string& dir, DType dtype, const SyntheticFill& fill,
                             const std::vector<std::pair<std::string, std::string>>& metadata) {
  if (dtype != DType::kBF16 && dtype != DType::kF32)
    throw Error("synthetic checkpoint " + dir + ": weights are BF16 or F32, not " + std::string(dtype_name(dtype)));
  const ModelConfig config = load_model_config(dir + "/config.json");
  SafetensorsWriter w;
  for (const auto& [key, value] : metadata) w.set_metadata(key, value);
  std::vector<float> values;
  std::vector<uint16_t> bf16;
  std::vector<ExpectedTensor> tensors = expected_tensors(config);
  for (ExpectedTensor& t : expected_vision_tensors(config)) tensors.push_back(std::move(t));
  for (const ExpectedTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    values.assign(size_t(n), 0.0f);
    fill(t, values);
    if (dtype == DType::kBF16) {
      bf16.resize(values.size());
      for (size_t k = 0; k < values.size(); ++k) bf16[k] = f32_to_bf16(values[k]);
      w.add(t.name, DType::kBF16, t.shape, bf16.data());
    } else {
      w.add_f32(t.name, t.shape, values.data());
    }
  }
  w.write(dir + "/model.safetensors");
}

}  // namespace dgemma
