#include "checkpoint/tensor_names.h"

#include <initializer_list>

#include "dgemma/error.h"

namespace dgemma {

const char* component_name(Component c) {
  switch (c) {
    case Component::kEmbedding: return "embedding";
    case Component::kAttention: return "attention";
    case Component::kDenseMlp: return "dense_mlp";
    case Component::kRouter: return "router";
    case Component::kExperts: return "experts";
    case Component::kSelfConditioning: return "self_conditioning";
    case Component::kNormsScalars: return "norms_scalars";
    case Component::kVisionLinear: return "vision_linear";
    case Component::kVisionTable: return "vision_table";
  }
  return "?";
}

namespace {

bool starts_with_any(const std::string& name, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

bool is_vision_tensor(const std::string& name) {
  return starts_with_any(name, {"model.encoder.vision_tower.", "model.encoder.embed_vision.", "model.vision_tower.",
                                "model.embed_vision."});
}

bool is_skipped_tensor(const ModelConfig& config, const std::string& name) {
  if (starts_with_any(name, {"model.encoder.audio_tower.", "model.encoder.embed_audio.", "model.audio_tower.",
                             "model.embed_audio."}))
    return true;
  // Some exports keep an unused embedding table beside the projection.
  if (starts_with_any(name, {"model.encoder.embed_vision.embedding.", "model.embed_vision.embedding."})) return true;
  // The tower is read under model.encoder. only; the other layout is not DiffusionGemma's.
  if (starts_with_any(name, {"model.vision_tower.", "model.embed_vision."})) return true;
  return is_vision_tensor(name) && !config.vision_tower;
}

std::vector<ExpectedTensor> expected_vision_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  if (!c.vision_tower) return out;
  const VisionConfig& v = c.vision;
  if (!v.complete())
    throw Error(c.source + ": vision_config leaves out " + v.missing_keys() +
                " and no stored vision tensor gave them (docs/model.md §7.1)");
  const int64_t H = v.hidden_size, F = v.intermediate_size, d = v.head_dim;
  const int64_t q = int64_t(v.num_heads) * d, kv = int64_t(v.num_kv_heads) * d;
  const int64_t patch = 3 * int64_t(v.patch_size) * v.patch_size;
  auto add = [&](std::string name, std::vector<int64_t> shape, Component comp) {
    out.push_back({std::move(name), std::move(shape), comp, {}});
  };
  const std::string& t = kVisionTowerPrefix;
  add(t + "patch_embedder.input_proj.weight", {H, patch}, Component::kVisionLinear);
  add(t + "patch_embedder.position_embedding_table", {2, v.position_embedding_size, H}, Component::kVisionTable);
  for (int i = 0; i < v.num_layers; ++i) {
    const std::string p = t + "encoder.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {H}, Component::kVisionTable);
    add(p + "self_attn.q_proj.linear.weight", {q, H}, Component::kVisionLinear);
    add(p + "self_attn.k_proj.linear.weight", {kv, H}, Component::kVisionLinear);
    add(p + "self_attn.v_proj.linear.weight", {kv, H}, Component::kVisionLinear);
    add(p + "self_attn.o_proj.linear.weight", {H, q}, Component::kVisionLinear);
    add(p + "self_attn.q_norm.weight", {d}, Component::kVisionTable);
    add(p + "self_attn.k_norm.weight", {d}, Component::kVisionTable);
    add(p + "post_attention_layernorm.weight", {H}, Component::kVisionTable);
    add(p + "pre_feedforward_layernorm.weight", {H}, Component::kVisionTable);
    add(p + "mlp.gate_proj.linear.weight", {F, H}, Component::kVisionLinear);
    add(p + "mlp.up_proj.linear.weight", {F, H}, Component::kVisionLinear);
    add(p + "mlp.down_proj.linear.weight", {H, F}, Component::kVisionLinear);
    add(p + "post_feedforward_layernorm.weight", {H}, Component::kVisionTable);
  }
  if (*v.standardize) {
    add(t + "std_bias", {H}, Component::kVisionTable);
    add(t + "std_scale", {H}, Component::kVisionTable);
  }
  add(kEmbedVisionPrefix + "embedding_projection.weight", {c.hidden_size, H}, Component::kVisionLinear);
  return out;
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  // A decoder text parameter tied to the encoder copy of the same suffix.
  auto tied = [&](const std::string& suffix, std::vector<int64_t> shape, Component comp) {
    out.push_back({kDecoderPrefix + suffix, std::move(shape), comp, {kEncoderTextPrefix + suffix}});
  };
  auto own = [&](std::string name, std::vector<int64_t> shape, Component comp) {
    out.push_back({std::move(name), std::move(shape), comp, {}});
  };
  out.push_back({kDecoderPrefix + "embed_tokens.weight",
                 {V, H},
                 Component::kEmbedding,
                 {kEncoderTextPrefix + "embed_tokens.weight", "lm_head.weight"}});
  tied("norm.weight", {H}, Component::kNormsScalars);
  own(kDecoderPrefix + "self_conditioning.pre_norm.weight", {H}, Component::kSelfConditioning);
  own(kDecoderPrefix + "self_conditioning.gate_proj.weight", {c.intermediate_size, H}, Component::kSelfConditioning);
  own(kDecoderPrefix + "self_conditioning.up_proj.weight", {c.intermediate_size, H}, Component::kSelfConditioning);
  own(kDecoderPrefix + "self_conditioning.down_proj.weight", {H, c.intermediate_size}, Component::kSelfConditioning);
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerSpec& L = c.layer(i);
    const std::string p = "layers." + std::to_string(i) + ".";
    const int64_t d = L.head_dim, q = int64_t(c.num_heads) * d, kv = int64_t(L.num_kv_heads) * d;
    const int64_t E = c.num_experts, I = c.moe_intermediate_size, F = c.intermediate_size;
    tied(p + "input_layernorm.weight", {H}, Component::kNormsScalars);
    tied(p + "self_attn.q_proj.weight", {q, H}, Component::kAttention);
    tied(p + "self_attn.k_proj.weight", {kv, H}, Component::kAttention);
    if (L.has_v_proj) tied(p + "self_attn.v_proj.weight", {kv, H}, Component::kAttention);
    tied(p + "self_attn.o_proj.weight", {H, q}, Component::kAttention);
    tied(p + "self_attn.q_norm.weight", {d}, Component::kNormsScalars);
    tied(p + "self_attn.k_norm.weight", {d}, Component::kNormsScalars);
    tied(p + "post_attention_layernorm.weight", {H}, Component::kNormsScalars);
    tied(p + "pre_feedforward_layernorm.weight", {H}, Component::kNormsScalars);
    tied(p + "mlp.gate_proj.weight", {F, H}, Component::kDenseMlp);
    tied(p + "mlp.up_proj.weight", {F, H}, Component::kDenseMlp);
    tied(p + "mlp.down_proj.weight", {H, F}, Component::kDenseMlp);
    tied(p + "post_feedforward_layernorm_1.weight", {H}, Component::kNormsScalars);
    tied(p + "router.proj.weight", {E, H}, Component::kRouter);
    tied(p + "router.scale", {H}, Component::kRouter);
    tied(p + "router.per_expert_scale", {E}, Component::kRouter);
    tied(p + "pre_feedforward_layernorm_2.weight", {H}, Component::kNormsScalars);
    tied(p + "experts.gate_up_proj", {E, 2 * I, H}, Component::kExperts);
    tied(p + "experts.down_proj", {E, H, I}, Component::kExperts);
    tied(p + "post_feedforward_layernorm_2.weight", {H}, Component::kNormsScalars);
    tied(p + "post_feedforward_layernorm.weight", {H}, Component::kNormsScalars);
    // layer_scalar is a buffer: separate encoder and decoder copies (docs/model.md §1.3).
    own(kDecoderPrefix + p + "layer_scalar", {1}, Component::kNormsScalars);
    own(kEncoderTextPrefix + p + "layer_scalar", {1}, Component::kNormsScalars);
  }
  return out;
}

}  // namespace dgemma
