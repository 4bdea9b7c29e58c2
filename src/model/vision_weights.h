#pragma once
// The vision tower's weight slots (docs/model.md §7.1), bound with the text
// weights by bind_weights (model/weights.h): plain, converted to bf16 or
// quantized per tensor by the same rules as the text linears (vision linears
// are Component::kVisionLinear: read quantized when stored so, quantized at
// load when the mode covers linears).
#include <map>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "core/tensor.h"

namespace dgemma {

struct VisionLayerWeights {
  WeightRef input_layernorm, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  WeightRef post_attention_layernorm, pre_feedforward_layernorm;
  WeightRef mlp_gate, mlp_up, mlp_down, post_feedforward_layernorm;
};

struct VisionWeights {
  WeightRef input_proj;      // [Hv, 3·p²]
  WeightRef position_table;  // [2, P, Hv] as bound
  // The table's two halves as [P, Hv] views of its data: rows by column
  // (x) and by row (y) of a patch (docs/model.md §7.2).
  WeightRef position_x, position_y;
  std::vector<VisionLayerWeights> layers;
  WeightRef std_bias, std_scale;  // [Hv]; empty without standardization
  WeightRef embed_projection;     // [H_text, Hv]

  bool empty() const { return input_proj.empty(); }
};

// Fills `w` from the bound weights `refs` (by expected name); nothing
// without a tower. Throws dgemma::Error when the position table is held in
// a form that cannot be sliced into its two halves.
void take_vision_slots(const ModelConfig& config, const std::map<std::string, WeightRef>& refs, VisionWeights& w);

}  // namespace dgemma
