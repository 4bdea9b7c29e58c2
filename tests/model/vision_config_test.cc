// The vision_config block and the tower's tensor list (docs/model.md §7.1):
// every key of golden V, the abbreviated copy of the published 26B config
// (sizes left out, never filled with another model's class defaults), golden
// A's small tower, and the features the engine refuses.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"
#include "checkpoint/vision_shapes.h"
#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma {
namespace {

const std::string kData = DGEMMA_TEST_DATA;

TEST(VisionConfig, GoldenVEveryKey) {
  const ModelConfig c = load_model_config(kData + "/golden_v/config.json");
  ASSERT_TRUE(c.has_vision_config);
  EXPECT_TRUE(c.vision_tower);
  EXPECT_EQ(c.image_token_id, 511);
  EXPECT_EQ(c.boi_token_id, 509);
  EXPECT_EQ(c.eoi_token_id, 510);
  const VisionConfig& v = c.vision;
  EXPECT_EQ(v.hidden_size, 32);
  EXPECT_EQ(v.intermediate_size, 64);
  EXPECT_EQ(v.num_layers, 2);
  EXPECT_EQ(v.num_heads, 4);
  EXPECT_EQ(v.num_kv_heads, 4);
  EXPECT_EQ(v.head_dim, 8);
  EXPECT_EQ(v.patch_size, 4);
  EXPECT_EQ(v.pooling_kernel_size, 3);
  EXPECT_EQ(v.position_embedding_size, 256);
  EXPECT_EQ(v.standardize, std::optional<bool>(true));
  EXPECT_EQ(v.rope_theta, 100.0);
  EXPECT_EQ(v.rms_norm_eps, 1e-6);
  EXPECT_EQ(v.default_output_length, 70);
  EXPECT_TRUE(v.complete());

  // 13 tensors per layer, the patch projection and position table, the two
  // standardization vectors and embed_vision: 31, as stored.
  const std::vector<ExpectedTensor> t = expected_vision_tensors(c);
  EXPECT_EQ(t.size(), 31u);
  const TensorStore store = TensorStore::open_dir(kData + "/golden_v");
  std::set<std::string> stored_vision;
  for (const std::string& n : store.names())
    if (is_vision_tensor(n)) stored_vision.insert(n);
  std::set<std::string> expected;
  for (const ExpectedTensor& e : t) {
    expected.insert(e.name);
    const TensorView* v2 = store.find(e.name);
    ASSERT_NE(v2, nullptr) << e.name;
    EXPECT_EQ(v2->shape(), e.shape) << e.name;
  }
  EXPECT_EQ(expected, stored_vision);
}

TEST(VisionConfig, Abbreviated26bConfigLeavesSizesOpen) {
  const ModelConfig c = load_model_config(kData + "/configs/diffusiongemma-26b-a4b.config.json");
  EXPECT_EQ(c.image_token_id, 258880);
  EXPECT_EQ(c.boi_token_id, 255999);
  EXPECT_EQ(c.eoi_token_id, 258882);
  EXPECT_EQ(c.vision_soft_tokens_per_image, 280);
  const VisionConfig& v = c.vision;
  EXPECT_EQ(v.hidden_size, 1152);
  EXPECT_EQ(v.num_layers, 27);
  EXPECT_EQ(v.num_heads, 16);
  EXPECT_EQ(v.head_dim, 72);
  EXPECT_EQ(v.patch_size, 16);
  EXPECT_EQ(v.pooling_kernel_size, 3);
  // Not the E2B class defaults (3072, 12 kv heads, standardize false): unknown.
  EXPECT_EQ(v.intermediate_size, 0);
  EXPECT_EQ(v.num_kv_heads, 0);
  EXPECT_EQ(v.position_embedding_size, 0);
  EXPECT_FALSE(v.standardize.has_value());
  EXPECT_FALSE(v.complete());
  try {
    expected_vision_tensors(c);
    ADD_FAILURE() << "a tensor list from an incomplete vision_config";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("intermediate_size, num_key_value_heads, position_embedding_size, standardize"),
        std::string::npos)
        << e.what();
  }
}

TEST(VisionConfig, SizesComeFromTheStoredTensors) {
  // Golden V's tensors with a config that leaves the four inferable keys out.
  json::Value root = json::parse(read_text_file(kData + "/golden_v/config.json"));
  json::Value vc = *root.find("vision_config");
  json::Object kept;
  for (auto& [key, value] : vc.as_object())
    if (key != "intermediate_size" && key != "num_key_value_heads" && key != "position_embedding_size" &&
        key != "standardize")
      kept.emplace_back(key, value);
  root.set("vision_config", json::Value(kept));
  ModelConfig c = parse_model_config(json::dump(root), "abbreviated/config.json");
  EXPECT_FALSE(c.vision.complete());
  resolve_vision_config(c, TensorStore::open_dir(kData + "/golden_v"));
  EXPECT_EQ(c.vision.intermediate_size, 64);
  EXPECT_EQ(c.vision.num_kv_heads, 4);
  EXPECT_EQ(c.vision.position_embedding_size, 256);
  EXPECT_EQ(c.vision.standardize, std::optional<bool>(true));
  // Golden A's store has no std_bias: not standardized.
  ModelConfig a = parse_model_config(json::dump(root), "abbreviated/config.json");
  resolve_vision_config(a, TensorStore::open_dir(kData + "/golden_a"));
  EXPECT_EQ(a.vision.standardize, std::optional<bool>(false));
  EXPECT_EQ(a.vision.intermediate_size, 16);
}

TEST(VisionConfig, GoldenATowerIsExpected) {
  const ModelConfig c = load_model_config(kData + "/golden_a/config.json");
  const std::vector<ExpectedTensor> t = expected_vision_tensors(c);
  EXPECT_EQ(t.size(), 16u);  // one layer of 13, projection, positions, embed_vision; no std tensors
  EXPECT_FALSE(is_skipped_tensor(c, "model.encoder.vision_tower.patch_embedder.input_proj.weight"));
  EXPECT_TRUE(is_skipped_tensor(c, "model.encoder.embed_vision.embedding.weight"));
  EXPECT_TRUE(is_skipped_tensor(c, "model.encoder.audio_tower.x.weight"));
  ModelConfig text_only = c;
  text_only.vision_tower = false;
  EXPECT_TRUE(is_skipped_tensor(text_only, "model.encoder.vision_tower.patch_embedder.input_proj.weight"));
  EXPECT_TRUE(expected_vision_tensors(text_only).empty());
}

// Applies `edit` to golden V's vision_config and returns the parse error.
std::string error_after(const std::function<void(json::Value& vision)>& edit) {
  json::Value root = json::parse(read_text_file(kData + "/golden_v/config.json"));
  json::Value vision = *root.find("vision_config");
  edit(vision);
  root.set("vision_config", vision);
  try {
    parse_model_config(json::dump(root), "edited/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(VisionConfig, RefusesWhatTheTowerDoesNotCompute) {
  struct Case {
    std::function<void(json::Value&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {[](json::Value& v) { v.set("use_clipped_linears", true); }, "vision_config.use_clipped_linears: true is not"},
      {[](json::Value& v) { v.set("hidden_activation", "gelu"); }, "vision_config.hidden_activation: unsupported"},
      {[](json::Value& v) { v.set("attention_bias", true); }, "vision_config.attention_bias: true is not supported"},
      {[](json::Value& v) {
         json::Value rope = json::Object{};
         rope.set("rope_type", "linear");
         v.set("rope_parameters", rope);
       },
       "vision_config.rope_parameters.rope_type: unsupported RoPE type \"linear\""},
      {[](json::Value& v) { v.set("head_dim", 6); }, "vision_config.head_dim: must be a multiple of 4"},
      {[](json::Value& v) { v.set("num_key_value_heads", 3); }, "vision_config.num_key_value_heads: 3 does not divide"},
      {[](json::Value& v) { v.set("patch_size", 0); }, "vision_config.patch_size: must be positive"},
      {[](json::Value& v) { v.set("rms_norm_eps", 0.0); }, "vision_config.rms_norm_eps: must be in (0, 1]"},
  };
  for (const Case& k : cases) {
    const std::string e = error_after(k.edit);
    EXPECT_NE(e.find(k.message), std::string::npos) << "got: " << e;
    EXPECT_NE(e.find("edited/config.json"), std::string::npos) << e;
  }
  // A missing required size names the key.
  json::Value root = json::parse(read_text_file(kData + "/golden_v/config.json"));
  json::Object kept;
  for (auto& [key, value] : root.find("vision_config")->as_object())
    if (key != "patch_size") kept.emplace_back(key, value);
  root.set("vision_config", json::Value(kept));
  try {
    parse_model_config(json::dump(root), "edited/config.json");
    ADD_FAILURE() << "no patch_size accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vision_config.patch_size: required field is missing"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dgemma
