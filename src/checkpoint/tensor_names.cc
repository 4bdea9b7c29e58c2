#include "checkpoint/tensor_names.h"

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
  }
  return "?";
}

bool is_skipped_tensor(const std::string& name) {
  static const char* kPrefixes[] = {"model.encoder.vision_tower.", "model.encoder.embed_vision.",
                                    "model.encoder.audio_tower.",  "model.encoder.embed_audio.",
                                    "model.vision_tower.",         "model.embed_vision.",
                                    "model.audio_tower.",          "model.embed_audio."};
  for (const char* p : kPrefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
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
