#include "checkpoint/gguf_fixture.h"

#include <algorithm>
#include <functional>
#include <set>

#include "checkpoint/gguf_config.h"
#include "checkpoint/gguf_names.h"
#include "checkpoint/tensor_names.h"
#include "core/tensor.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

std::vector<int64_t> ne_of(const std::vector<int64_t>& shape) { return {shape.rbegin(), shape.rend()}; }

// The full layers' RoPE factors (docs/formats.md §5.3); none for a full
// RoPE that rotates every pair.
std::vector<float> rope_freqs_of(const ModelConfig& c) {
  if (c.rope_full.type != "proportional") return {};
  return gguf_rope_freq_factors(c.global_head_dim, c.rope_full.rotated_pairs(c.global_head_dim));
}

// Layer index of a GGUF per-layer name ("blk.N."), -1 for a global tensor.
int layer_of(const std::string& gguf_name) {
  if (gguf_name.rfind("blk.", 0) != 0) return -1;
  return std::stoi(gguf_name.substr(4));
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The type of each tensor in the published Q4_K_M file (docs/formats.md
// §5.3): F32 vectors and router, Q6_K embedding, attn_v Q6_K on the listed
// layers, ffn_down and ffn_down_exps Q8_0 on the listed layers and Q5_0
// elsewhere, self_cond_down Q5_0, Q4_K for the rest.
GgmlType published_q4_k_m_type(const std::string& name, const std::vector<int64_t>& ne) {
  static const std::set<int> kAttnVQ6K = {0, 1, 2, 6, 9, 13, 16, 20, 24, 25, 26, 27, 28};
  static const std::set<int> kFfnDownQ8 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29};
  if (ne.size() == 1 || ends_with(name, "ffn_gate_inp.weight")) return GgmlType::kF32;
  if (name == "token_embd.weight") return GgmlType::kQ6_K;
  if (name == "self_cond_down.weight") return GgmlType::kQ5_0;
  const int layer = layer_of(name);
  if (ends_with(name, ".attn_v.weight")) return kAttnVQ6K.count(layer) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
  if (ends_with(name, ".ffn_down.weight") || ends_with(name, ".ffn_down_exps.weight"))
    return kFfnDownQ8.count(layer) ? GgmlType::kQ8_0 : GgmlType::kQ5_0;
  return GgmlType::kQ4_K;
}

// Declares every tensor of `c` (typed by `type_of`) and rope_freqs, writes
// the file with `fill` writing each non-sparse tensor's bytes.
void write_gguf(const ModelConfig& c, uint32_t file_type, bool sparse,
                const std::function<GgmlType(const std::string&, const std::vector<int64_t>&)>& type_of,
                const std::function<void(GgufStreamWriter&, const ExpectedTensor&, const std::string&)>& fill,
                const std::string& path) {
  GgufStreamWriter w;
  add_gguf_model_keys(w, c, file_type);
  const std::vector<ExpectedTensor> expected = expected_tensors(c);
  const std::vector<float> freqs = rope_freqs_of(c);
  std::vector<std::pair<const ExpectedTensor*, std::string>> names;
  for (const ExpectedTensor& ex : expected) {
    const std::optional<std::string> g = canonical_to_gguf(ex.name);
    if (!g) throw Error(ex.name + ": no GGUF name (docs/formats.md §5.3)");
    const std::vector<int64_t> ne = ne_of(ex.shape);
    if (sparse)
      w.declare_sparse(*g, type_of(*g, ne), ne);
    else
      w.declare(*g, type_of(*g, ne), ne);
    names.emplace_back(&ex, *g);
    if (ex.name == kDecoderPrefix + "norm.weight" && !freqs.empty())
      w.declare(std::string(kGgufRopeFreqsName), GgmlType::kF32, {int64_t(freqs.size())});
  }
  w.begin(path);
  if (!freqs.empty()) w.write(std::string(kGgufRopeFreqsName), freqs.data(), freqs.size() * sizeof(float));
  if (!sparse)
    for (const auto& [ex, g] : names) fill(w, *ex, g);
  w.finish();
}

}  // namespace

void add_gguf_model_keys(GgufStreamWriter& w, const ModelConfig& c, uint32_t file_type, bool with_tokenizer) {
  const std::string a = "diffusion-gemma.";
  std::vector<int32_t> kv_heads;
  std::vector<bool> sliding;
  for (const LayerSpec& L : c.layers) {
    kv_heads.push_back(L.num_kv_heads);
    sliding.push_back(L.type == LayerType::kSliding);
  }
  w.add_string("general.architecture", "diffusion-gemma");
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.file_type", file_type);
  w.add_u32(a + "block_count", uint32_t(c.num_layers));
  w.add_u32(a + "context_length", uint32_t(c.max_position_embeddings));
  w.add_u32(a + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(a + "attention.head_count", uint32_t(c.num_heads));
  w.add_array(a + "attention.head_count_kv", kv_heads);
  w.add_f32(a + "rope.freq_base", float(c.rope_full.theta));
  w.add_f32(a + "rope.freq_base_swa", float(c.rope_sliding.theta));
  w.add_f32(a + "attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
  w.add_u32(a + "expert_count", uint32_t(c.num_experts));
  w.add_u32(a + "expert_used_count", uint32_t(c.top_k_experts));
  w.add_u32(a + "attention.key_length", uint32_t(c.global_head_dim));
  w.add_u32(a + "attention.value_length", uint32_t(c.global_head_dim));
  w.add_u32(a + "attention.key_length_swa", uint32_t(c.head_dim));
  w.add_u32(a + "attention.value_length_swa", uint32_t(c.head_dim));
  w.add_u32(a + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
  w.add_f32(a + "final_logit_softcapping", float(c.final_logit_softcapping));
  w.add_u32(a + "attention.sliding_window", uint32_t(c.sliding_window));
  w.add_array(a + "attention.sliding_window_pattern", sliding);
  w.add_u32(a + "rope.dimension_count", uint32_t(c.global_head_dim));
  w.add_u32(a + "rope.dimension_count_swa", uint32_t(c.head_dim));
  w.add_bool(a + "attention.causal", false);
  w.add_u32(a + "attention.shared_kv_layers", 0);
  w.add_u32(a + "embedding_length_per_layer_input", 0);
  w.add_u32("diffusion.canvas_length", uint32_t(c.canvas_length));
  if (!with_tokenizer) return;
  std::vector<std::string> tokens;
  tokens.reserve(size_t(c.vocab_size));
  for (int64_t i = 0; i < c.vocab_size; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  w.add_string("tokenizer.ggml.model", "gemma4");
  w.add_array("tokenizer.ggml.tokens", tokens);
  w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(c.bos_token_id));
  w.add_u32("tokenizer.ggml.eos_token_id", uint32_t(c.eos_token_ids.empty() ? 1 : c.eos_token_ids.front()));
  w.add_u32("tokenizer.ggml.padding_token_id", uint32_t(c.pad_token_id));
}

void write_gguf_f32(const ModelConfig& c, const TensorStore& source, const std::string& path) {
  std::vector<float> buf;
  auto fill = [&](GgufStreamWriter& w, const ExpectedTensor& ex, const std::string& gguf_name) {
    const TensorView* v = source.find(ex.name);
    for (size_t i = 0; !v && i < ex.aliases.size(); ++i) v = source.find(ex.aliases[i]);
    if (!v) throw Error(source.dir() + ": tensor " + ex.name + " is missing");
    if (v->shape() != ex.shape)
      throw Error(source.dir() + ": tensor " + v->name() + " has shape " + shape_string(v->shape()) + ", expected " +
                  shape_string(ex.shape));
    buf.resize(size_t(v->numel()));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = v->at_f32(i);
    w.write(gguf_name, buf.data(), buf.size() * sizeof(float));
  };
  write_gguf(
      c, 0, false, [](const std::string&, const std::vector<int64_t>&) { return GgmlType::kF32; }, fill, path);
}

void write_sparse_gguf_q4_k_m(const ModelConfig& c, const std::string& path) {
  write_gguf(c, 15, true, published_q4_k_m_type, {}, path);
}

}  // namespace dgemma
