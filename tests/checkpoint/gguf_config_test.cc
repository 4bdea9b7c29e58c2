// ModelConfig from the keys and tensors of a DiffusionGemma GGUF file
// (docs/formats.md §5.3): the published key set gives the same configuration
// as the published config.json, and every inconsistency is refused naming
// the key or tensor.
#include <gtest/gtest.h>

#include <functional>

#include "checkpoint/config.h"
#include "checkpoint/gguf_config.h"
#include "dgemma/error.h"
#include "gguf_kv_builder.h"

namespace dgemma {
namespace {

using test::GgufKvBuilder;

constexpr int kLayers = 30;
bool is_full(int i) { return i % 6 == 5; }  // layers 5, 11, 17, 23, 29

// The keys of the published files as their dumps list them.
GgufKvBuilder published_keys() {
  GgufKvBuilder b;
  const std::string a = "diffusion-gemma.";
  std::vector<int32_t> kv_heads;
  std::vector<bool> sliding;
  for (int i = 0; i < kLayers; ++i) {
    kv_heads.push_back(is_full(i) ? 2 : 8);
    sliding.push_back(!is_full(i));
  }
  b.str("general.architecture", "diffusion-gemma")
      .u32("general.quantization_version", 2)
      .u32("general.file_type", 15)
      .u32(a + "block_count", 30)
      .u32(a + "context_length", 262144)
      .u32(a + "embedding_length", 2816)
      .u32(a + "feed_forward_length", 2112)
      .u32(a + "attention.head_count", 16)
      .i32s(a + "attention.head_count_kv", kv_heads)
      .f32(a + "rope.freq_base", 1e6f)
      .f32(a + "rope.freq_base_swa", 1e4f)
      .f32(a + "attention.layer_norm_rms_epsilon", 1e-6f)
      .u32(a + "expert_count", 128)
      .u32(a + "expert_used_count", 8)
      .u32(a + "attention.key_length", 512)
      .u32(a + "attention.value_length", 512)
      .u32(a + "attention.key_length_swa", 256)
      .u32(a + "attention.value_length_swa", 256)
      .u32(a + "expert_feed_forward_length", 704)
      .f32(a + "final_logit_softcapping", 30.0f)
      .u32(a + "attention.sliding_window", 1024)
      .bools(a + "attention.sliding_window_pattern", sliding)
      .u32(a + "rope.dimension_count", 512)
      .u32(a + "rope.dimension_count_swa", 256)
      .boolean(a + "attention.causal", false)
      .u32(a + "attention.shared_kv_layers", 0)
      .u32(a + "embedding_length_per_layer_input", 0)
      .u32("diffusion.canvas_length", 256)
      .str("tokenizer.ggml.model", "gemma4")
      .strs("tokenizer.ggml.tokens", std::vector<std::string>(262144, "t"))
      .u32("tokenizer.ggml.bos_token_id", 2)
      .u32("tokenizer.ggml.eos_token_id", 1)
      .u32("tokenizer.ggml.unknown_token_id", 3)
      .u32("tokenizer.ggml.padding_token_id", 0)
      .u32("tokenizer.ggml.mask_token_id", 4);
  return b;
}

// The published tensor list (ne innermost first), written from the files'
// dumps; types and offsets do not matter to the config.
std::vector<GgufTensorInfo> published_tensors() {
  std::vector<GgufTensorInfo> t;
  auto add = [&](std::string name, std::vector<int64_t> ne) { t.push_back({std::move(name), std::move(ne)}); };
  add("token_embd.weight", {2816, 262144});
  add("output_norm.weight", {2816});
  add("rope_freqs.weight", {256});
  add("self_cond_pre_norm.weight", {2816});
  add("self_cond_gate.weight", {2816, 2112});
  add("self_cond_up.weight", {2816, 2112});
  add("self_cond_down.weight", {2112, 2816});
  for (int i = 0; i < kLayers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const int64_t d = is_full(i) ? 512 : 256, kv = is_full(i) ? 2 : 8;
    add(p + "attn_norm.weight", {2816});
    add(p + "attn_q.weight", {2816, 16 * d});
    add(p + "attn_k.weight", {2816, kv * d});
    if (!is_full(i)) add(p + "attn_v.weight", {2816, kv * d});
    add(p + "attn_output.weight", {16 * d, 2816});
    add(p + "attn_q_norm.weight", {d});
    add(p + "attn_k_norm.weight", {d});
    add(p + "post_attention_norm.weight", {2816});
    add(p + "ffn_norm.weight", {2816});
    add(p + "ffn_gate.weight", {2816, 2112});
    add(p + "ffn_up.weight", {2816, 2112});
    add(p + "ffn_down.weight", {2112, 2816});
    add(p + "post_ffw_norm_1.weight", {2816});
    add(p + "ffn_gate_inp.weight", {2816, 128});
    add(p + "ffn_gate_inp.scale", {2816});
    add(p + "pre_ffw_norm_2.weight", {2816});
    add(p + "ffn_gate_up_exps.weight", {2816, 1408, 128});
    add(p + "ffn_down_exps.weight", {704, 2816, 128});
    add(p + "ffn_down_exps.scale", {128});
    add(p + "post_ffw_norm_2.weight", {2816});
    add(p + "post_ffw_norm.weight", {2816});
    add(p + "layer_output_scale.weight", {1});
    add(p + "enc_layer_output_scale.weight", {1});
  }
  return t;
}

// The converter's rope_freqs: 64 rotated pairs, then 192 unrotated.
std::vector<float> published_rope_freqs() {
  std::vector<float> f(256, 1e30f);
  for (int i = 0; i < 64; ++i) f[size_t(i)] = 1.0f;
  return f;
}

ModelConfig config_of(const GgufKvBuilder& b, const std::vector<GgufTensorInfo>& tensors,
                      const std::vector<float>* freqs) {
  const GgufKeys keys(&b.kvs(), "model.gguf");
  return gguf_model_config(keys, tensors, freqs);
}

TEST(GgufConfig, PublishedKeysGiveThePublishedConfig) {
  const ModelConfig json = load_model_config(DGEMMA_TEST_DATA + "/configs/diffusiongemma-26b-a4b.config.json");
  const std::vector<float> freqs = published_rope_freqs();
  const ModelConfig g = config_of(published_keys(), published_tensors(), &freqs);
  EXPECT_EQ(g.source, "model.gguf");
  EXPECT_EQ(g.model_type, json.model_type);
  EXPECT_EQ(g.vocab_size, json.vocab_size);
  EXPECT_EQ(g.hidden_size, json.hidden_size);
  EXPECT_EQ(g.num_layers, json.num_layers);
  EXPECT_EQ(g.num_heads, json.num_heads);
  EXPECT_EQ(g.num_kv_heads, json.num_kv_heads);
  EXPECT_EQ(g.num_global_kv_heads, json.num_global_kv_heads);
  EXPECT_EQ(g.head_dim, json.head_dim);
  EXPECT_EQ(g.global_head_dim, json.global_head_dim);
  EXPECT_EQ(g.sliding_window, json.sliding_window);
  EXPECT_EQ(g.intermediate_size, json.intermediate_size);
  EXPECT_EQ(g.moe_intermediate_size, json.moe_intermediate_size);
  EXPECT_EQ(g.num_experts, json.num_experts);
  EXPECT_EQ(g.top_k_experts, json.top_k_experts);
  EXPECT_FLOAT_EQ(float(g.rms_norm_eps), float(json.rms_norm_eps));  // the key is an f32
  EXPECT_EQ(g.final_logit_softcapping, json.final_logit_softcapping);
  EXPECT_EQ(g.canvas_length, json.canvas_length);
  EXPECT_EQ(g.max_position_embeddings, json.max_position_embeddings);
  EXPECT_EQ(g.pad_token_id, json.pad_token_id);
  EXPECT_EQ(g.bos_token_id, json.bos_token_id);
  EXPECT_EQ(g.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(g.dtype, "gguf Q4_K_M");
  EXPECT_FALSE(g.has_vision_config);
  for (const auto& [gr, jr] : {std::pair{&g.rope_sliding, &json.rope_sliding}, {&g.rope_full, &json.rope_full}}) {
    EXPECT_EQ(gr->type, jr->type);
    EXPECT_EQ(gr->theta, jr->theta);
    EXPECT_EQ(gr->partial_rotary_factor, jr->partial_rotary_factor);
  }
  ASSERT_EQ(g.layers.size(), json.layers.size());
  for (int i = 0; i < g.num_layers; ++i) {
    const LayerSpec &a = g.layer(i), &b = json.layer(i);
    EXPECT_EQ(a.type, b.type) << i;
    EXPECT_EQ(a.head_dim, b.head_dim) << i;
    EXPECT_EQ(a.num_kv_heads, b.num_kv_heads) << i;
    EXPECT_EQ(a.has_v_proj, b.has_v_proj) << i;
    EXPECT_EQ(a.rope, a.type == LayerType::kFull ? &g.rope_full : &g.rope_sliding) << i;
    EXPECT_EQ(a.rope->rotated_pairs(a.head_dim), b.rope->rotated_pairs(b.head_dim)) << i;
  }
}

TEST(GgufConfig, WithoutRopeFreqsTheFullLayersRotateEveryPair) {
  const ModelConfig g = config_of(published_keys(), published_tensors(), nullptr);
  EXPECT_EQ(g.rope_full.rotated_pairs(512), 256);
}

TEST(GgufConfig, TheWritersFreqFactorsReadBackAsTheSameFactor) {
  EXPECT_EQ(gguf_rope_freq_factors(512, 64), published_rope_freqs());
}

// Runs the config reader on the published set after `edit` and expects an
// error mentioning each of `needles`.
void expect_refused(const std::function<void(GgufKvBuilder&, std::vector<GgufTensorInfo>&, std::vector<float>&)>& edit,
                    std::vector<std::string> needles) {
  GgufKvBuilder b = published_keys();
  std::vector<GgufTensorInfo> tensors = published_tensors();
  std::vector<float> freqs = published_rope_freqs();
  edit(b, tensors, freqs);
  try {
    config_of(b, tensors, &freqs);
    ADD_FAILURE() << "accepted; expected an error naming " << needles[0];
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model.gguf"), std::string::npos) << what;
    for (const std::string& n : needles) EXPECT_NE(what.find(n), std::string::npos) << "'" << n << "' not in: " << what;
  }
}

void erase_tensor(std::vector<GgufTensorInfo>& t, const std::string& name) {
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].name == name) t.erase(t.begin() + std::ptrdiff_t(i));
}

const std::string kA = "diffusion-gemma.";

TEST(GgufConfig, RefusesOtherArchitecturesAndVariants) {
  expect_refused([](auto& b, auto&, auto&) { b.str("general.architecture", "gemma3"); },
                 {"general.architecture", "gemma3"});
  expect_refused([](auto& b, auto&, auto&) { b.boolean(kA + "attention.causal", true); }, {"attention.causal"});
  expect_refused([](auto& b, auto&, auto&) { b.u32(kA + "attention.shared_kv_layers", 4); },
                 {"attention.shared_kv_layers"});
  expect_refused([](auto& b, auto&, auto&) { b.u32(kA + "embedding_length_per_layer_input", 256); },
                 {"embedding_length_per_layer_input"});
  expect_refused([](auto& b, auto&, auto&) { b.boolean("diffusion.shift_logits", true); }, {"diffusion.shift_logits"});
}

TEST(GgufConfig, RefusesMissingAndOutOfRangeKeys) {
  expect_refused([](auto& b, auto&, auto&) { b.erase("diffusion.canvas_length"); }, {"diffusion.canvas_length"});
  expect_refused([](auto& b, auto&, auto&) { b.u32("diffusion.canvas_length", 0); }, {"diffusion.canvas_length"});
  expect_refused([](auto& b, auto&, auto&) { b.erase(kA + "block_count"); }, {"block_count"});
  expect_refused([](auto& b, auto&, auto&) { b.u32(kA + "expert_used_count", 129); }, {"expert_used_count", "129"});
  expect_refused([](auto& b, auto&, auto&) { b.f32(kA + "attention.layer_norm_rms_epsilon", 0.0f); },
                 {"layer_norm_rms_epsilon"});
  expect_refused([](auto& b, auto&, auto&) { b.erase("tokenizer.ggml.tokens"); }, {"tokenizer.ggml.tokens"});
  expect_refused([](auto& b, auto&, auto&) { b.u32("tokenizer.ggml.bos_token_id", 262144); },
                 {"tokenizer.ggml.bos_token_id", "262144"});
}

TEST(GgufConfig, RefusesInconsistentLayerKeys) {
  expect_refused([](auto& b, auto&, auto&) { b.i32s(kA + "attention.head_count_kv", std::vector<int32_t>(29, 8)); },
                 {"attention.head_count_kv", "29"});
  expect_refused(
      [](auto& b, auto&, auto&) {
        b.bools(kA + "attention.sliding_window_pattern", {true, false});
      },
      {"sliding_window_pattern", "2 entries"});
  expect_refused(
      [](auto& b, auto&, auto&) {
        std::vector<int32_t> kv(30, 8);
        for (int i = 5; i < 30; i += 6) kv[size_t(i)] = 2;
        kv[7] = 4;
        b.i32s(kA + "attention.head_count_kv", kv);
      },
      {"attention.head_count_kv", "layer 7"});
  expect_refused([](auto& b, auto&, auto&) { b.u32(kA + "attention.value_length", 256); },
                 {"attention.value_length", "512"});
  expect_refused([](auto& b, auto&, auto&) { b.u32(kA + "rope.dimension_count", 128); }, {"rope.dimension_count"});
  expect_refused(
      [](auto& b, auto&, auto&) {
        std::vector<bool> pattern(30, true);
        b.bools(kA + "attention.sliding_window_pattern", pattern);
      },
      {"sliding_window_pattern", "last layer"});
}

TEST(GgufConfig, RefusesTensorsThatContradictTheKeys) {
  // A full layer with its own V, a sliding layer without one.
  expect_refused(
      [](auto&, auto& t, auto&) {
        t.push_back({"blk.5.attn_v.weight", {2816, 1024}});
      },
      {"blk.5.attn_v.weight", "full layer 5"});
  expect_refused([](auto&, auto& t, auto&) { erase_tensor(t, "blk.4.attn_v.weight"); },
                 {"blk.4.attn_v.weight", "missing"});
  expect_refused(
      [](auto&, auto& t, auto&) {
        erase_tensor(t, "blk.4.attn_q_norm.weight");
        t.push_back({"blk.4.attn_q_norm.weight", {512}});
      },
      {"blk.4.attn_q_norm.weight", "256"});
  expect_refused(
      [](auto&, auto& t, auto&) {
        t.push_back({"blk.30.attn_norm.weight", {2816}});
      },
      {"blk.30.attn_norm.weight", "block_count"});
  expect_refused([](auto&, auto& t, auto&) { t.push_back({"output.weight", {2816, 262144}}); }, {"output.weight"});
  expect_refused(
      [](auto&, auto& t, auto&) {
        erase_tensor(t, "token_embd.weight");
        t.push_back({"token_embd.weight", {2816, 1000}});
      },
      {"token_embd.weight", "262144"});
}

TEST(GgufConfig, RefusesRopeFreqsOtherThanRotatedThenUnrotated) {
  expect_refused([](auto&, auto&, auto& f) { f.resize(128); }, {"rope_freqs.weight", "128"});
  expect_refused([](auto&, auto&, auto& f) { f[100] = 1.0f; }, {"rope_freqs.weight", "factor 100"});
  expect_refused([](auto&, auto&, auto& f) { f[64] = 2.0f; }, {"rope_freqs.weight", "factor 64"});
  expect_refused([](auto&, auto&, auto& f) { f.assign(256, 1e30f); }, {"rope_freqs.weight", "no pair"});
}

TEST(GgufConfig, SamplerDefaultsComeFromTheDiffusionKeys) {
  GgufKvBuilder b = published_keys();
  EXPECT_FALSE(gguf_sampler_defaults(GgufKeys(&b.kvs(), "m.gguf")).any());
  b.u32("diffusion.eb_max_steps", 32)
      .f32("diffusion.eb_t_min", 0.25f)
      .f32("diffusion.eb_t_max", 0.75f)
      .f32("diffusion.eb_entropy_bound", 0.5f)
      .u32("diffusion.eb_stability_threshold", 3)
      .f32("diffusion.eb_confidence_threshold", 0.125f);
  const GgufSamplerDefaults s = gguf_sampler_defaults(GgufKeys(&b.kvs(), "m.gguf"));
  EXPECT_EQ(s.max_denoising_steps, 32);
  EXPECT_EQ(s.t_min, 0.25);
  EXPECT_EQ(s.t_max, 0.75);
  EXPECT_EQ(s.entropy_bound, 0.5);
  EXPECT_EQ(s.stability_threshold, 3);
  EXPECT_EQ(s.confidence_threshold, 0.125);
  b.u32("diffusion.eb_max_steps", 0);
  try {
    gguf_sampler_defaults(GgufKeys(&b.kvs(), "m.gguf"));
    ADD_FAILURE() << "eb_max_steps 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diffusion.eb_max_steps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgemma
