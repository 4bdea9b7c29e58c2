#pragma once
// The DiffusionGemma text-model configuration (docs/model.md §1.1,
// §1.6) read from config.json, validated once so the rest of the engine can
// trust it.
#include <cstdint>
#include <string>
#include <vector>

namespace dgemma {

enum class LayerType { kSliding, kFull };

struct RopeSpec {
  std::string type;  // "default" or "proportional"
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  // Number of rotated (i, i+d/2) pairs for head dim d (docs/model.md §1.4):
  // d/2 for "default", floor(factor*d/2) for "proportional".
  int rotated_pairs(int head_dim) const;
};

struct LayerSpec {
  LayerType type = LayerType::kSliding;
  int head_dim = 0;
  int num_kv_heads = 0;
  bool has_v_proj = true;  // false on full layers: V comes from k_proj (docs/model.md §2.1)
  const RopeSpec* rope = nullptr;
};

struct ModelConfig {
  std::string source;  // path of config.json, for messages
  std::string model_type;
  int64_t vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;         // sliding layers
  int num_global_kv_heads = 0;  // full layers
  int head_dim = 0;             // sliding layers
  int global_head_dim = 0;      // full layers
  int sliding_window = 0;
  int intermediate_size = 0;
  int moe_intermediate_size = 0;
  int num_experts = 0;
  int top_k_experts = 0;
  double rms_norm_eps = 1e-6;
  double final_logit_softcapping = 0.0;  // 0: no soft-cap
  int canvas_length = 256;
  // Positions the model was trained for (text config; class default 131072,
  // the published checkpoint 262144). The math does not use it (docs/model.md §1.1);
  // it is the default context size of run/chat/generate/serve (-c).
  int64_t max_position_embeddings = 131072;
  int64_t pad_token_id = 0, bos_token_id = 2;
  std::vector<int64_t> eos_token_ids;
  int64_t image_token_id = -1;  // -1: none
  std::string dtype;            // informational ("bfloat16", "float32")
  bool has_vision_config = false;
  RopeSpec rope_sliding, rope_full;
  std::vector<LayerSpec> layers;

  const LayerSpec& layer(int i) const { return layers[size_t(i)]; }
};

// Parses and validates config.json in `path` (a file) — both the nested
// (`text_config`) and flat text-config layouts, with full-layer overrides
// given either as `per_layer_config` or as flat `global_head_dim` /
// `num_global_key_value_heads`. Errors name the file, field and value.
ModelConfig load_model_config(const std::string& path);
// Points every LayerSpec::rope at `c`'s own rope_sliding / rope_full (after
// a copy or move of the config, whose pointers still name the source).
void point_layer_ropes(ModelConfig& c);
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);

}  // namespace dgemma
