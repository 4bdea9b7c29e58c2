// The per-tensor type choice of a GGUF file type (quantize/gguf_type_rules.h)
// on the published DiffusionGemma shape: 30 layers, full attention at layers
// 5, 11, 17, 23, 29 (no attn_v there), 128 experts, rows of 2816, 2112 and
// 704. The expected Q4_K_M and Q8_0 types are the published files' types
// (docs/formats.md §5.3), written out by hand below.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "quantize/gguf_type_rules.h"

namespace dgemma::quant {
namespace {

bool full_layer(int l) { return l % 6 == 5; }

// The 692 tensors of the published files, in layer order.
std::vector<GgufTypeTensor> published_shape() {
  std::vector<GgufTypeTensor> t;
  t.push_back({"token_embd.weight", {2816, 262144}});
  t.push_back({"rope_freqs.weight", {256}});
  for (int l = 0; l < 30; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool full = full_layer(l);
    const int64_t head = full ? 512 : 256, q = 16 * head, kv = (full ? 2 : 8) * head;
    t.push_back({b + "attn_norm.weight", {2816}});
    t.push_back({b + "attn_q.weight", {2816, q}});
    t.push_back({b + "attn_k.weight", {2816, kv}});
    if (!full) t.push_back({b + "attn_v.weight", {2816, kv}});
    t.push_back({b + "attn_output.weight", {q, 2816}});
    t.push_back({b + "attn_q_norm.weight", {head}});
    t.push_back({b + "attn_k_norm.weight", {head}});
    t.push_back({b + "post_attention_norm.weight", {2816}});
    t.push_back({b + "ffn_norm.weight", {2816}});
    t.push_back({b + "ffn_gate.weight", {2816, 2112}});
    t.push_back({b + "ffn_up.weight", {2816, 2112}});
    t.push_back({b + "ffn_down.weight", {2112, 2816}});
    t.push_back({b + "post_ffw_norm_1.weight", {2816}});
    t.push_back({b + "ffn_gate_inp.weight", {2816, 128}});
    t.push_back({b + "ffn_gate_inp.scale", {2816}});
    t.push_back({b + "pre_ffw_norm_2.weight", {2816}});
    t.push_back({b + "ffn_gate_up_exps.weight", {2816, 1408, 128}});
    t.push_back({b + "ffn_down_exps.weight", {704, 2816, 128}});
    t.push_back({b + "ffn_down_exps.scale", {128}});
    t.push_back({b + "post_ffw_norm_2.weight", {2816}});
    t.push_back({b + "post_ffw_norm.weight", {2816}});
    t.push_back({b + "layer_output_scale.weight", {1}});
    t.push_back({b + "enc_layer_output_scale.weight", {1}});
  }
  t.push_back({"output_norm.weight", {2816}});
  t.push_back({"self_cond_pre_norm.weight", {2816}});
  t.push_back({"self_cond_gate.weight", {2816, 2112}});
  t.push_back({"self_cond_up.weight", {2816, 2112}});
  t.push_back({"self_cond_down.weight", {2112, 2816}});
  return t;
}

constexpr GgufTypeModel kModel{30, 128, 2};

std::map<std::string, GgmlType> types_of(GgufFtype f) {
  const std::vector<GgufTypeTensor> t = published_shape();
  const std::vector<GgmlType> types = gguf_tensor_types(f, t, kModel);
  EXPECT_EQ(types.size(), t.size());
  std::map<std::string, GgmlType> m;
  for (size_t i = 0; i < t.size(); ++i) m[t[i].name] = types[i];
  return m;
}

// The suffix after "blk.N." (or the whole name).
std::string kind_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return name;
  return name.substr(name.find('.', 4) + 1);
}
int layer_of(const std::string& name) { return std::stoi(name.substr(4)); }

TEST(GgufTypeRules, PublishedQ4KMTypes) {
  // docs/formats.md §5.3 (the published Q4_K_M file).
  const std::set<int> attn_v_q6k = {0, 1, 2, 6, 9, 13, 16, 20, 24, 25, 26, 27, 28};
  const std::set<int> down_q8 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29};
  const std::set<std::string> q4k = {"attn_q.weight",         "attn_k.weight",      "attn_output.weight",
                                     "ffn_gate.weight",       "ffn_up.weight",      "ffn_gate_up_exps.weight",
                                     "self_cond_gate.weight", "self_cond_up.weight"};
  const std::map<std::string, GgmlType> m = types_of(GgufFtype::kQ4_K_M);
  ASSERT_EQ(m.size(), 692u);
  int f32 = 0;
  for (const auto& [name, type] : m) {
    const std::string kind = kind_of(name);
    GgmlType want = GgmlType::kF32;
    if (name == "token_embd.weight")
      want = GgmlType::kQ6_K;
    else if (q4k.count(kind))
      want = GgmlType::kQ4_K;
    else if (kind == "attn_v.weight")
      want = attn_v_q6k.count(layer_of(name)) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
    else if (kind == "ffn_down.weight" || kind == "ffn_down_exps.weight")
      want = down_q8.count(layer_of(name)) ? GgmlType::kQ8_0 : GgmlType::kQ5_0;
    else if (name == "self_cond_down.weight")
      want = GgmlType::kQ5_0;
    f32 += want == GgmlType::kF32;
    EXPECT_EQ(ggml_type_name(type), ggml_type_name(want)) << name;
  }
  EXPECT_EQ(f32, 423);
}

TEST(GgufTypeRules, PublishedQ8_0Types) {
  const std::map<std::string, GgmlType> m = types_of(GgufFtype::kQ8_0);
  int q8 = 0, f32 = 0;
  for (const auto& [name, type] : m) {
    q8 += type == GgmlType::kQ8_0;
    f32 += type == GgmlType::kF32;
    if (kind_of(name) == "ffn_gate_inp.weight") {
      EXPECT_EQ(type, GgmlType::kF32) << name;
    }
  }
  EXPECT_EQ(q8, 269);
  EXPECT_EQ(f32, 423);
}

TEST(GgufTypeRules, OtherFileTypes) {
  // Q4_0: the tied embedding gets Q6_K, everything else Q4_0 (rows are
  // multiples of 32); F16: every 2-D tensor but the router.
  std::map<std::string, GgmlType> m = types_of(GgufFtype::kQ4_0);
  EXPECT_EQ(m["token_embd.weight"], GgmlType::kQ6_K);
  EXPECT_EQ(m["blk.3.ffn_down_exps.weight"], GgmlType::kQ4_0);
  EXPECT_EQ(m["blk.3.attn_v.weight"], GgmlType::kQ4_0);
  m = types_of(GgufFtype::kF16);
  EXPECT_EQ(m["token_embd.weight"], GgmlType::kF16);
  EXPECT_EQ(m["blk.0.ffn_gate_inp.weight"], GgmlType::kF32);
  EXPECT_EQ(m["blk.0.attn_norm.weight"], GgmlType::kF32);
  // Q4_K_S: the first four attn_v and ffn_down of layers < 30/8 get Q5_K,
  // which falls back to Q5_1 on 2112/704-long rows.
  m = types_of(GgufFtype::kQ4_K_S);
  EXPECT_EQ(m["blk.3.attn_v.weight"], GgmlType::kQ5_K);
  EXPECT_EQ(m["blk.4.attn_v.weight"], GgmlType::kQ4_K);  // the fifth attn_v
  EXPECT_EQ(m["blk.2.ffn_down.weight"], GgmlType::kQ5_1);
  EXPECT_EQ(m["blk.3.ffn_down.weight"], GgmlType::kQ5_0);
  // Q2_K: Q3_K attn_v, ffn_down (falling back to IQ4_NL) and attn_output.
  m = types_of(GgufFtype::kQ2_K);
  EXPECT_EQ(m["blk.0.attn_v.weight"], GgmlType::kQ3_K);
  EXPECT_EQ(m["blk.0.ffn_down_exps.weight"], GgmlType::kIQ4_NL);
  EXPECT_EQ(m["blk.0.attn_output.weight"], GgmlType::kQ3_K);
  EXPECT_EQ(m["blk.0.attn_q.weight"], GgmlType::kQ2_K);
  EXPECT_EQ(m["self_cond_down.weight"], GgmlType::kIQ4_NL);
}

TEST(GgufTypeRules, RowsFittingNoBlockGoToF16OrFail) {
  // A row of 48 fits no K-quant and no 32-element fallback: F16.
  std::vector<GgmlType> t = gguf_tensor_types(GgufFtype::kQ4_K_M, {{"blk.0.ffn_gate.weight", {48, 8}}}, {1, 0, 1});
  EXPECT_EQ(t[0], GgmlType::kF16);
  // Q8_0 has no fallback: an error naming the tensor.
  try {
    gguf_tensor_types(GgufFtype::kQ8_0, {{"blk.0.ffn_gate.weight", {48, 8}}}, {1, 0, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_gate.weight"), std::string::npos) << e.what();
  }
  // An expert ffn_down without a layer in its name.
  EXPECT_THROW(gguf_tensor_types(GgufFtype::kQ4_K_M, {{"ffn_down_exps.weight", {256, 8, 4}}}, {2, 4, 1}), Error);
}

TEST(GgufTypeRules, FileTypeNames) {
  EXPECT_EQ(gguf_ftype_from_name("Q4_K_M"), GgufFtype::kQ4_K_M);
  EXPECT_EQ(gguf_ftype_from_name("q8_0"), GgufFtype::kQ8_0);
  EXPECT_FALSE(gguf_ftype_from_name("q4_k").has_value());
  EXPECT_EQ(uint32_t(GgufFtype::kQ4_K_M), 15u);  // the published general.file_type values
  EXPECT_EQ(uint32_t(GgufFtype::kQ8_0), 7u);
  EXPECT_NE(gguf_ftype_names().find("q4_k_m"), std::string::npos);
}

}  // namespace
}  // namespace dgemma::quant
