#pragma once
// The DiffusionGemma text-model configuration (docs/model.md §1.1,
// §1.6) read from config.json, validated once so the rest of the engine can
// trust it.
#include <cstdint>
#include <optional>
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

// The Gemma 4 vision tower (`vision_config`, docs/model.md §7.1). A size of 0
// (and an unset `standardize`) is one the config left out: the published
// 26B config abbreviates the block, so those are read off the stored tensors
// (resolve_vision_config, checkpoint/vision_shapes.h), never filled with a
// class default.
struct VisionConfig {
  int hidden_size = 0;        // Hv
  int intermediate_size = 0;  // gated MLP width (0: from mlp.gate_proj)
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;                 // 0: from k_proj's rows / head_dim
  int head_dim = 0;                     // d, a multiple of 4 (2-D RoPE, docs/model.md §7.3)
  int patch_size = 0;                   // p: a patch is 3·p² values
  int pooling_kernel_size = 0;          // k: k×k patches pool into one soft token
  int64_t position_embedding_size = 0;  // P rows per position table (0: from the table)
  std::optional<bool> standardize;      // unset: whether std_bias is stored
  double rope_theta = 100.0;
  double rms_norm_eps = 1e-6;
  int64_t default_output_length = 0;  // informational (not used by the computation)

  // Whether every size is known (the tensor list can be derived).
  bool complete() const {
    return intermediate_size > 0 && num_kv_heads > 0 && position_embedding_size > 0 && standardize.has_value();
  }
  // The keys still unknown, for messages: "intermediate_size, standardize".
  std::string missing_keys() const;
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
  int64_t image_token_id = -1;                   // -1: none
  int64_t boi_token_id = -1, eoi_token_id = -1;  // begin / end of an image (-1: none)
  int64_t vision_soft_tokens_per_image = 0;      // informational (the count is per image)
  std::string dtype;                             // informational ("bfloat16", "float32")
  bool has_vision_config = false;
  // The tower (docs/model.md §7.1): parsed when has_vision_config.
  // vision_tower says whether it is part of the model: true with a
  // vision_config, cleared by resolve_vision_config when the checkpoint
  // stores none of its tensors (a text-only export).
  VisionConfig vision;
  bool vision_tower = false;
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
