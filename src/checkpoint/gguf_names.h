#pragma once
// The tensor names of a DiffusionGemma GGUF file and dgemma's canonical
// names, both ways (docs/formats.md §5.3). GGUF names are llama.cpp's
// (`blk.N.attn_q.weight`); canonical names are the decoder-side names of
// checkpoint/tensor_names.h (`model.decoder.layers.N.self_attn.q_proj.weight`).
//
// Only names change, never data: GGUF lists dimensions innermost first, so a
// GGUF tensor [ne0, ne1, ne2] is dgemma's row-major [ne2, ne1, ne0] over the
// same bytes (io/gguf.h). The tied tensors are stored once: `token_embd` is
// the decoder embedding and also the LM head and the encoder's embedding; the
// encoder's other weights are the decoder's, except each layer's scalar,
// which has its own GGUF name (`blk.N.enc_layer_output_scale.weight`).
#include <optional>
#include <string>
#include <string_view>

namespace dgemma {

// The full layers' RoPE frequency factors: no dgemma tensor, read by the
// GGUF config (checkpoint/gguf_config.h) for the proportional RoPE factor.
inline constexpr std::string_view kGgufRopeFreqsName = "rope_freqs.weight";

// The canonical name of a GGUF tensor; nullopt for rope_freqs.weight and for
// any name the layout does not have.
std::optional<std::string> gguf_to_canonical(std::string_view gguf_name);

// The GGUF name under which a canonical tensor is stored; nullopt for names
// the layout does not store (the tied aliases `lm_head.weight` and the
// encoder copies other than `layer_scalar`, vision tensors, unknown names).
std::optional<std::string> canonical_to_gguf(std::string_view canonical_name);

}  // namespace dgemma
