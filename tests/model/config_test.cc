// config.json parsing and validation (docs/model.md §1.1, §1.6).
#include <gtest/gtest.h>

#include <functional>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"
#include "checkpoint/config.h"

namespace dgemma {
namespace {

const std::string kData = DGEMMA_TEST_DATA;

TEST(ModelConfig, Real26bA4bConfigParses) {
  ModelConfig c = load_model_config(kData + "/configs/diffusiongemma-26b-a4b.config.json");
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_EQ(c.hidden_size, 2816);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.canvas_length, 256);
  EXPECT_TRUE(c.has_vision_config);
  for (int i = 0; i < 30; ++i) {
    const LayerSpec& L = c.layer(i);
    const bool full = i % 6 == 5;  // layers 5, 11, 17, 23, 29 (docs/model.md §1.1)
    EXPECT_EQ(L.type == LayerType::kFull, full) << i;
    EXPECT_EQ(L.head_dim, full ? 512 : 256);
    EXPECT_EQ(L.num_kv_heads, full ? 2 : 8);
    EXPECT_EQ(L.has_v_proj, !full);
    EXPECT_EQ(L.rope->rotated_pairs(L.head_dim), full ? 64 : 128);  // docs/model.md §1.4
    EXPECT_EQ(L.rope->theta, full ? 1e6 : 1e4);
  }
}

TEST(ModelConfig, NestedAndFlatGlobalKeysAgree) {
  ModelConfig a = load_model_config(kData + "/golden_a/config.json");
  ModelConfig b = load_model_config(kData + "/golden_a/config_flat_global_keys.json");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].head_dim, b.layers[i].head_dim);
    EXPECT_EQ(a.layers[i].num_kv_heads, b.layers[i].num_kv_heads);
    EXPECT_EQ(a.layers[i].type, b.layers[i].type);
  }
  EXPECT_EQ(a.layer(3).head_dim, 32);
  EXPECT_EQ(a.layer(3).num_kv_heads, 1);
  EXPECT_EQ(a.layer(3).rope->rotated_pairs(32), 4);
}

// An absent final_logit_softcapping is the reference's default, 30 (a config
// saved with only its non-default fields omits it, as golden V's does); null
// or 0 turns the cap off.
TEST(ModelConfig, AbsentSoftcapIsTheReferenceDefault) {
  json::Value root = json::parse(read_text_file(kData + "/golden_a/config.json"));
  json::Value text = *root.find("text_config");
  json::Object without;
  for (const auto& [k, v] : text.as_object())
    if (k != "final_logit_softcapping") without.emplace_back(k, v);
  root.set("text_config", json::Value(without));
  EXPECT_EQ(parse_model_config(json::dump(root), "absent/config.json").final_logit_softcapping, 30.0);
  text.set("final_logit_softcapping", json::Value());
  root.set("text_config", text);
  EXPECT_EQ(parse_model_config(json::dump(root), "null/config.json").final_logit_softcapping, 0.0);
  text.set("final_logit_softcapping", 0.0);
  root.set("text_config", text);
  EXPECT_EQ(parse_model_config(json::dump(root), "zero/config.json").final_logit_softcapping, 0.0);
}

// Applies `edit` to golden A's text_config and returns the parse error.
std::string error_after(const std::function<void(json::Value& root, json::Value& text)>& edit) {
  json::Value root = json::parse(read_text_file(kData + "/golden_a/config.json"));
  json::Value text = *root.find("text_config");
  edit(root, text);
  root.set("text_config", text);
  try {
    parse_model_config(json::dump(root), "edited/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct BadCase {
  const char* label;
  std::function<void(json::Value&, json::Value&)> edit;
  const char* message;
};

TEST(ModelConfig, RejectsInvalidFieldsNamingFieldAndValue) {
  std::vector<BadCase> cases = {
      {"model type", [](json::Value& r, json::Value&) { r.set("model_type", "gemma3"); },
       "edited/config.json: model_type: expected \"diffusion_gemma\" (or \"diffusion_gemma_text\"), got \"gemma3\""},
      {"missing hidden", [](json::Value&, json::Value& t) { t.set("hidden_size", nullptr); },
       "text_config.hidden_size: required field is missing"},
      {"negative heads", [](json::Value&, json::Value& t) { t.set("num_attention_heads", -4); },
       "text_config.num_attention_heads: must be positive, got -4"},
      {"string layers", [](json::Value&, json::Value& t) { t.set("num_hidden_layers", "4"); },
       "text_config.num_hidden_layers: expected an integer, got string"},
      {"layer count", [](json::Value&, json::Value& t) { t.set("num_hidden_layers", 5); },
       "text_config.layer_types: has 4 entries but num_hidden_layers is 5"},
      {"last sliding",
       [](json::Value&, json::Value& t) {
         json::Array a(4, json::Value("sliding_attention"));
         t.set("layer_types", a);
       },
       "the last layer must be full_attention (got sliding_attention at index 3)"},
      {"odd head dim", [](json::Value&, json::Value& t) { t.set("head_dim", 15); }, "head dim 15 must be even"},
      {"head divisibility", [](json::Value&, json::Value& t) { t.set("num_key_value_heads", 3); },
       "num_attention_heads 4 is not divisible by layer 0's 3 key/value heads"},
      {"top k", [](json::Value&, json::Value& t) { t.set("top_k_experts", 9); },
       "text_config.top_k_experts: 9 exceeds num_experts 8"},
      {"activation", [](json::Value&, json::Value& t) { t.set("hidden_activation", "silu"); },
       "text_config.hidden_activation: unsupported activation \"silu\""},
      {"rope type",
       [](json::Value&, json::Value& t) {
         json::Value rp = *t.find("rope_parameters");
         json::Value f = *rp.find("full_attention");
         f.set("rope_type", "yarn");
         rp.set("full_attention", f);
         t.set("rope_parameters", rp);
       },
       "text_config.rope_parameters.full_attention.rope_type: unsupported RoPE type \"yarn\""},
      {"rope factor",
       [](json::Value&, json::Value& t) {
         json::Value rp = *t.find("rope_parameters");
         json::Value f = *rp.find("full_attention");
         f.set("partial_rotary_factor", 1.5);
         rp.set("full_attention", f);
         t.set("rope_parameters", rp);
       },
       "partial_rotary_factor: must be in (0, 1], got 1.5"},
      {"rope theta",
       [](json::Value&, json::Value& t) {
         json::Value rp = *t.find("rope_parameters");
         json::Value f = *rp.find("sliding_attention");
         f.set("rope_theta", 0.0);
         rp.set("sliding_attention", f);
         t.set("rope_parameters", rp);
       },
       "rope_parameters.sliding_attention.rope_theta: must be > 1, got 0"},
      {"missing global dim", [](json::Value&, json::Value& t) { t.set("per_layer_config", nullptr); },
       "text_config.global_head_dim: missing: full-attention layer 3 needs global_head_dim"},
      {"eps", [](json::Value&, json::Value& t) { t.set("rms_norm_eps", -1.0); },
       "text_config.rms_norm_eps: must be in (0, 1], got -1"},
      {"bidirectional all", [](json::Value&, json::Value& t) { t.set("use_bidirectional_attention", "all"); },
       "use_bidirectional_attention: value \"all\" is not supported"},
      {"canvas", [](json::Value& r, json::Value&) { r.set("canvas_length", 0); },
       "edited/config.json: canvas_length: must be positive, got 0"},
  };
  for (const auto& c : cases) {
    const std::string err = error_after(c.edit);
    EXPECT_NE(err.find(c.message), std::string::npos) << c.label << ": got \"" << err << "\"";
  }
}

TEST(ModelConfig, MalformedJsonNamesTheFile) {
  try {
    parse_model_config("{\"model_type\": \"diffusion_gemma\",, }", "x/config.json");
    FAIL() << "accepted malformed JSON";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x/config.json: invalid JSON at line 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgemma
