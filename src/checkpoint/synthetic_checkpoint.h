#pragma once
// Synthetic DiffusionGemma checkpoints: the one config.json builder and the
// one writer of random weights, for the built-in default model, the test
// checkpoints and anything else that needs a model no one trained. The
// config holds the fields a shape needs (docs/model.md §1.6); callers add the
// rest (token ids, notes). The weights are every tensor the config implies
// (checkpoint/tensor_names.h), filled by the caller.
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/tensor_names.h"
#include "core/dtype.h"
#include "core/json.h"

namespace dgemma {

// A vision tower (docs/model.md §7.1); hidden 0: none.
struct SyntheticVision {
  int hidden = 0, intermediate = 0, layers = 0, heads = 0, head_dim = 0;
  int patch = 0, pooling = 0, positions = 0;  // patch size, pooling kernel, position table rows
  bool standardize = true;
};

struct SyntheticShape {
  int vocab = 300, hidden = 144, layers = 5, heads = 6, kv_heads = 3, global_kv_heads = 2;
  int head_dim = 8, global_head_dim = 24;
  std::vector<std::string> layer_types;  // one per layer: "sliding_attention" or "full_attention"
  int window = 6, intermediate = 40, experts = 6, top_k = 3, moe_intermediate = 12, canvas = 8;
  SyntheticVision vision;
};

// The text_config of `shape`: sizes, layer types, heads, window, experts,
// gelu_pytorch_tanh, rms_norm_eps 1e-6, soft-cap 30 and the two RoPE kinds
// (sliding: default, theta 1e4; full: proportional, factor 0.25, theta 1e6).
json::Value synthetic_text_config(const SyntheticShape& shape);
// The vision_config of `vision`: every key the tower reads, with
// gelu_pytorch_tanh, default RoPE at theta 100, rms_norm_eps 1e-6 and no
// clipped linears (docs/model.md §7.1).
json::Value synthetic_vision_config(const SyntheticVision& vision);
// {"model_type": "diffusion_gemma", "canvas_length", "text_config"} and,
// with a tower, "vision_config".
json::Value synthetic_config(const SyntheticShape& shape);

// Writes DIR/model.safetensors for the config.json already in DIR: each
// expected tensor's values (the text model's, then the vision tower's when
// the config has one) come from fill(tensor, values) (values is sized to
// the tensor's element count) and are stored as `dtype` (BF16 or F32).
// `metadata` is added to the header.
using SyntheticFill = std::function<void(const ExpectedTensor& tensor, std::vector<float>& values)>;
void write_synthetic_weights(const std::string& dir, DType dtype, const SyntheticFill& fill,
                             const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace dgemma
