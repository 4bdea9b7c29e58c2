#include "model/vision_weights.h"

#include "checkpoint/tensor_names.h"
#include "dgemma/error.h"
#include "quantize/quantized_weight.h"

namespace dgemma {
namespace {

// Half `half` (0: x, 1: y) of the position table [2, P, Hv] as a [P, Hv] weight.
WeightRef table_half(const WeightRef& table, int half) {
  if (table.quant && !table.quant->bound_dense)
    throw Error(table.name + ": a quantized position table cannot be split into its x and y halves");
  WeightRef r;
  r.name = table.name + (half == 0 ? "[x]" : "[y]");
  r.dtype = table.dtype;
  r.shape = {table.shape[1], table.shape[2]};
  const size_t half_bytes = size_t(table.shape[1] * table.shape[2]) * size_t(dtype_bits(table.dtype)) / 8;
  r.data = static_cast<const uint8_t*>(table.data) + size_t(half) * half_bytes;
  return r;
}

}  // namespace

void take_vision_slots(const ModelConfig& config, const std::map<std::string, WeightRef>& refs, VisionWeights& w) {
  w = VisionWeights{};
  if (!config.vision_tower) return;
  auto take = [&](const std::string& name) { return refs.at(name); };
  const std::string& t = kVisionTowerPrefix;
  w.input_proj = take(t + "patch_embedder.input_proj.weight");
  w.position_table = take(t + "patch_embedder.position_embedding_table");
  w.position_x = table_half(w.position_table, 0);
  w.position_y = table_half(w.position_table, 1);
  w.layers.resize(size_t(config.vision.num_layers));
  for (int i = 0; i < config.vision.num_layers; ++i) {
    VisionLayerWeights& L = w.layers[size_t(i)];
    const std::string p = t + "encoder.layers." + std::to_string(i) + ".";
    L.input_layernorm = take(p + "input_layernorm.weight");
    L.q_proj = take(p + "self_attn.q_proj.linear.weight");
    L.k_proj = take(p + "self_attn.k_proj.linear.weight");
    L.v_proj = take(p + "self_attn.v_proj.linear.weight");
    L.o_proj = take(p + "self_attn.o_proj.linear.weight");
    L.q_norm = take(p + "self_attn.q_norm.weight");
    L.k_norm = take(p + "self_attn.k_norm.weight");
    L.post_attention_layernorm = take(p + "post_attention_layernorm.weight");
    L.pre_feedforward_layernorm = take(p + "pre_feedforward_layernorm.weight");
    L.mlp_gate = take(p + "mlp.gate_proj.linear.weight");
    L.mlp_up = take(p + "mlp.up_proj.linear.weight");
    L.mlp_down = take(p + "mlp.down_proj.linear.weight");
    L.post_feedforward_layernorm = take(p + "post_feedforward_layernorm.weight");
  }
  if (config.vision.standardize.value_or(false)) {
    w.std_bias = take(t + "std_bias");
    w.std_scale = take(t + "std_scale");
  }
  w.embed_projection = take(kEmbedVisionPrefix + "embedding_projection.weight");
}

}  // namespace dgemma
