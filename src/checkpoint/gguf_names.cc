#include "checkpoint/gguf_names.h"

#include "checkpoint/tensor_names.h"

namespace dgemma {
namespace {

struct NamePair {
  std::string_view gguf;
  std::string_view canonical;  // under model.decoder. (per layer: under model.decoder.layers.N.)
};

// docs/formats.md §5.3, the global tensors.
constexpr NamePair kGlobalNames[] = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"output_norm.weight", "norm.weight"},
    {"self_cond_pre_norm.weight", "self_conditioning.pre_norm.weight"},
    {"self_cond_gate.weight", "self_conditioning.gate_proj.weight"},
    {"self_cond_up.weight", "self_conditioning.up_proj.weight"},
    {"self_cond_down.weight", "self_conditioning.down_proj.weight"},
};

// docs/formats.md §5.3, the tensors of layer N (after `blk.N.` and after
// `model.decoder.layers.N.`).
constexpr NamePair kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
    {"ffn_down_exps.weight", "experts.down_proj"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
};
// The encoder's own layer scalar (the one encoder tensor not tied to the
// decoder's, docs/model.md §1.3).
constexpr std::string_view kGgufEncoderScalar = "enc_layer_output_scale.weight";
constexpr std::string_view kLayerScalar = "layer_scalar";

// Splits "<prefix>N.<rest>" into N and rest; false unless N is a decimal
// layer index without leading zeros.
bool split_layer(std::string_view name, std::string_view prefix, std::string& index, std::string_view& rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0 || digits > 6 || digits + 1 >= name.size() || name[digits] != '.') return false;
  if (digits > 1 && name[0] == '0') return false;
  index = std::string(name.substr(0, digits));
  rest = name.substr(digits + 1);
  return true;
}

}  // namespace

std::optional<std::string> gguf_to_canonical(std::string_view gguf_name) {
  for (const NamePair& p : kGlobalNames)
    if (gguf_name == p.gguf) return kDecoderPrefix + std::string(p.canonical);
  std::string index;
  std::string_view rest;
  if (!split_layer(gguf_name, "blk.", index, rest)) return std::nullopt;
  if (rest == kGgufEncoderScalar) return kEncoderTextPrefix + "layers." + index + "." + std::string(kLayerScalar);
  for (const NamePair& p : kLayerNames)
    if (rest == p.gguf) return kDecoderPrefix + "layers." + index + "." + std::string(p.canonical);
  return std::nullopt;
}

std::optional<std::string> canonical_to_gguf(std::string_view canonical_name) {
  std::string index;
  std::string_view rest;
  if (split_layer(canonical_name, kEncoderTextPrefix + "layers.", index, rest))
    return rest == kLayerScalar ? std::optional<std::string>("blk." + index + "." + std::string(kGgufEncoderScalar))
                                : std::nullopt;
  if (canonical_name.substr(0, kDecoderPrefix.size()) != kDecoderPrefix) return std::nullopt;
  const std::string_view decoder_rest = canonical_name.substr(kDecoderPrefix.size());
  for (const NamePair& p : kGlobalNames)
    if (decoder_rest == p.canonical) return std::string(p.gguf);
  if (!split_layer(canonical_name, kDecoderPrefix + "layers.", index, rest)) return std::nullopt;
  for (const NamePair& p : kLayerNames)
    if (rest == p.canonical) return "blk." + index + "." + std::string(p.gguf);
  return std::nullopt;
}

}  // namespace dgemma
