// The GGUF tensor-name table (docs/formats.md §5.3) both ways: the published
// files' names map onto the canonical names of checkpoint/tensor_names.h,
// and back.
#include <gtest/gtest.h>

#include <set>

#include "checkpoint/config.h"
#include "checkpoint/gguf_names.h"
#include "checkpoint/tensor_names.h"

namespace dgemma {
namespace {

// Pairs written out by hand from the published layout (not derived from the
// table under test).
TEST(GgufNames, PublishedNamesMapToCanonical) {
  const std::pair<const char*, const char*> cases[] = {
      {"token_embd.weight", "model.decoder.embed_tokens.weight"},
      {"output_norm.weight", "model.decoder.norm.weight"},
      {"self_cond_pre_norm.weight", "model.decoder.self_conditioning.pre_norm.weight"},
      {"self_cond_gate.weight", "model.decoder.self_conditioning.gate_proj.weight"},
      {"self_cond_up.weight", "model.decoder.self_conditioning.up_proj.weight"},
      {"self_cond_down.weight", "model.decoder.self_conditioning.down_proj.weight"},
      {"blk.0.attn_norm.weight", "model.decoder.layers.0.input_layernorm.weight"},
      {"blk.7.attn_q.weight", "model.decoder.layers.7.self_attn.q_proj.weight"},
      {"blk.7.attn_k.weight", "model.decoder.layers.7.self_attn.k_proj.weight"},
      {"blk.7.attn_v.weight", "model.decoder.layers.7.self_attn.v_proj.weight"},
      {"blk.29.attn_output.weight", "model.decoder.layers.29.self_attn.o_proj.weight"},
      {"blk.3.attn_q_norm.weight", "model.decoder.layers.3.self_attn.q_norm.weight"},
      {"blk.3.attn_k_norm.weight", "model.decoder.layers.3.self_attn.k_norm.weight"},
      {"blk.3.post_attention_norm.weight", "model.decoder.layers.3.post_attention_layernorm.weight"},
      {"blk.3.ffn_norm.weight", "model.decoder.layers.3.pre_feedforward_layernorm.weight"},
      {"blk.3.ffn_gate.weight", "model.decoder.layers.3.mlp.gate_proj.weight"},
      {"blk.3.ffn_up.weight", "model.decoder.layers.3.mlp.up_proj.weight"},
      {"blk.3.ffn_down.weight", "model.decoder.layers.3.mlp.down_proj.weight"},
      {"blk.3.post_ffw_norm_1.weight", "model.decoder.layers.3.post_feedforward_layernorm_1.weight"},
      {"blk.3.ffn_gate_inp.weight", "model.decoder.layers.3.router.proj.weight"},
      {"blk.3.ffn_gate_inp.scale", "model.decoder.layers.3.router.scale"},
      {"blk.3.ffn_down_exps.scale", "model.decoder.layers.3.router.per_expert_scale"},
      {"blk.3.pre_ffw_norm_2.weight", "model.decoder.layers.3.pre_feedforward_layernorm_2.weight"},
      {"blk.3.ffn_gate_up_exps.weight", "model.decoder.layers.3.experts.gate_up_proj"},
      {"blk.3.ffn_down_exps.weight", "model.decoder.layers.3.experts.down_proj"},
      {"blk.3.post_ffw_norm_2.weight", "model.decoder.layers.3.post_feedforward_layernorm_2.weight"},
      {"blk.3.post_ffw_norm.weight", "model.decoder.layers.3.post_feedforward_layernorm.weight"},
      {"blk.12.layer_output_scale.weight", "model.decoder.layers.12.layer_scalar"},
      {"blk.12.enc_layer_output_scale.weight", "model.encoder.language_model.layers.12.layer_scalar"},
  };
  for (const auto& [gguf, canonical] : cases) {
    EXPECT_EQ(gguf_to_canonical(gguf).value_or("<none>"), canonical) << gguf;
    EXPECT_EQ(canonical_to_gguf(canonical).value_or("<none>"), gguf) << canonical;
  }
}

TEST(GgufNames, NamesOutsideTheLayoutHaveNoCounterpart) {
  for (const char* name :
       {"rope_freqs.weight", "output.weight", "blk.3.attn_qkv.weight", "blk..attn_q.weight", "blk.03.attn_q.weight",
        "blk.x.attn_q.weight", "blk.3", "blk.3.", "blk.1234567.attn_q.weight", "token_embd.weight.extra", ""})
    EXPECT_FALSE(gguf_to_canonical(name).has_value()) << name;
  // Tied copies are not stored under a name of their own; neither are
  // vision tensors or names of other models.
  for (const char* name :
       {"lm_head.weight", "model.encoder.language_model.embed_tokens.weight",
        "model.encoder.language_model.layers.2.self_attn.q_proj.weight", "model.encoder.language_model.norm.weight",
        "model.encoder.vision_tower.x.weight", "model.decoder.layers.2.self_attn.qkv_proj.weight",
        "model.decoder.layers.2", "model.decoder.", "layers.2.self_attn.q_proj.weight"})
    EXPECT_FALSE(canonical_to_gguf(name).has_value()) << name;
}

// Every tensor dgemma expects of the real model's shape has one GGUF name,
// the names are distinct, and with rope_freqs they make the 692 tensors of
// the published files (docs/formats.md §5.3).
TEST(GgufNames, TheRealModelHas692DistinctGgufTensors) {
  ModelConfig c;
  c.hidden_size = 2816;
  c.vocab_size = 262144;
  c.num_layers = 30;
  c.num_heads = 16;
  c.intermediate_size = 2112;
  c.moe_intermediate_size = 704;
  c.num_experts = 128;
  c.layers.resize(30);
  for (int i = 0; i < 30; ++i) {
    const bool full = i % 6 == 5;
    c.layers[size_t(i)].type = full ? LayerType::kFull : LayerType::kSliding;
    c.layers[size_t(i)].head_dim = full ? 512 : 256;
    c.layers[size_t(i)].num_kv_heads = full ? 2 : 8;
    c.layers[size_t(i)].has_v_proj = !full;
  }
  std::set<std::string> gguf_names = {"rope_freqs.weight"};
  for (const ExpectedTensor& t : expected_tensors(c)) {
    std::optional<std::string> g = canonical_to_gguf(t.name);
    ASSERT_TRUE(g.has_value()) << t.name;
    EXPECT_TRUE(gguf_names.insert(*g).second) << "two tensors named " << *g;
    EXPECT_EQ(gguf_to_canonical(*g).value_or("<none>"), t.name);
  }
  EXPECT_EQ(gguf_names.size(), 692u);
}

}  // namespace
}  // namespace dgemma
