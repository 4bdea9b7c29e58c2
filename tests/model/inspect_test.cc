// `inspect` on the golden tiny checkpoint and on a sparse fake of the real
// 26B-A4B layout (docs/model.md §1.1, §4).
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/fake_checkpoint.h"
#include "model/inspect.h"

namespace dgemma {
namespace {

const std::string kData = DGEMMA_TEST_DATA;

// Parameter count from the architecture formulas of docs/model.md §1.1 / §4, written
// independently of the tensor list the loader uses.
int64_t formula_parameters(int64_t V, int64_t H, int64_t layers_s, int64_t layers_f, int64_t heads, int64_t kv_s,
                           int64_t d_s, int64_t kv_f, int64_t d_f, int64_t F, int64_t E, int64_t I) {
  auto layer = [&](int64_t kv, int64_t d, bool v_proj) {
    int64_t attn = heads * d * H * 2 + kv * d * H * (v_proj ? 2 : 1);  // q, o, k (+v)
    int64_t norms = 7 * H + 2 * d + 1 /*decoder scalar*/ + 1 /*encoder scalar*/;
    return attn + norms + 3 * F * H + E * H + H + E + E * 2 * I * H + E * H * I;
  };
  return V * H + H /*final norm*/ + H + 3 * F * H /*self-conditioning*/ + layers_s * layer(kv_s, d_s, true) +
         layers_f * layer(kv_f, d_f, false);
}

// The vision tower's parameters (docs/model.md §7.1): patch projection,
// position tables, per layer four norms, q/k norms, q/k/v/o and the gated
// MLP, the standardization vectors and embed_vision's projection into the
// text width H.
int64_t vision_parameters(int64_t Hv, int64_t F, int64_t layers, int64_t heads, int64_t kv, int64_t d, int64_t patch,
                          int64_t P, bool standardize, int64_t H) {
  const int64_t layer = 4 * Hv + 2 * d + 2 * heads * d * Hv + 2 * kv * d * Hv + 3 * F * Hv;
  return Hv * 3 * patch * patch + 2 * P * Hv + layers * layer + (standardize ? 2 * Hv : 0) + H * Hv;
}

TEST(Inspect, GoldenTinyCheckpoint) {
  CheckpointReport r = inspect_checkpoint(kData + "/golden_a", 100);
  // The text model and the one-layer vision tower (golden README: hidden 8,
  // MLP 16, 2 heads of 4, patch 2, 16 positions, no standardization).
  const int64_t vision = vision_parameters(8, 16, 1, 2, 2, 4, 2, 16, false, 64);
  EXPECT_EQ(r.parameters_total, formula_parameters(512, 64, 3, 1, 4, 2, 16, 1, 32, 96, 8, 32) + vision);
  EXPECT_EQ(r.parameters_by_component.at("vision_linear") + r.parameters_by_component.at("vision_table"), vision);
  EXPECT_EQ(r.bytes_by_dtype.at("F32"), uint64_t(r.parameters_total) * 4);
  EXPECT_TRUE(r.skipped_tensors.empty());  // the tower is loaded, not skipped
  EXPECT_TRUE(r.aliases_stored.empty());
  // Embedding tie group: decoder table, encoder alias, lm_head.
  ASSERT_FALSE(r.tie_groups.empty());
  EXPECT_EQ(r.tie_groups[0],
            (std::vector<std::string>{"model.decoder.embed_tokens.weight",
                                      "model.encoder.language_model.embed_tokens.weight", "lm_head.weight"}));
  // KV cache: sliding layers keep W-1 = 15 rows of 2x16, the full layer 100 rows of 1x32; K and V; fp32.
  EXPECT_EQ(r.kv_cache_bytes, uint64_t(2 * 4 * (3 * 15 * 2 * 16 + 100 * 1 * 32)));
  json::Value j = report_to_json(r);
  for (const char* key : {"parameters_total", "parameters_by_component", "bytes_by_dtype", "tie_groups",
                          "skipped_tensors", "kv_cache_bytes"})
    EXPECT_NE(j.find(key), nullptr) << key;
}

TEST(Inspect, SparseFullSizeFake) {
  const std::string dir = dgemma_test_temp_dir("sparse_26b_test");
  write_sparse_checkpoint(kData + "/configs/diffusiongemma-26b-a4b.config.json", dir);
  CheckpointReport r = inspect_checkpoint(dir, 4096);
  const int64_t expected = formula_parameters(262144, 2816, 25, 5, 16, 8, 256, 2, 512, 2112, 128, 704);
  // The published tower (docs/model.md §7.1): 27 layers of 1152, MLP 4304,
  // 16 heads of 72, patch 16, 10240 positions, standardized; about 572 M.
  const int64_t vision = vision_parameters(1152, 4304, 27, 16, 16, 72, 16, 10240, true, 2816);
  EXPECT_EQ(vision, 572794416);
  EXPECT_EQ(r.parameters_total, expected + vision);
  // The sizes the abbreviated config leaves out were read off the shapes.
  EXPECT_EQ(r.config.vision.intermediate_size, 4304);
  EXPECT_EQ(r.config.vision.position_embedding_size, 10240);
  EXPECT_EQ(r.config.vision.num_kv_heads, 16);
  EXPECT_TRUE(r.config.vision.standardize.value_or(false));
  // Published size of the text model: 25.2 B parameters (docs/model.md §1.1).
  EXPECT_NEAR(double(expected), 25.2e9, 0.005 * 25.2e9);
  EXPECT_EQ(r.bytes_by_dtype.at("BF16"), uint64_t(r.parameters_total) * 2);
  EXPECT_EQ(r.files, 4u);
  EXPECT_EQ(r.skipped_tensors,
            std::vector<std::string>{"model.encoder.embed_vision.embedding.weight"});  // vestigial, ignored
  // Every tied tensor forms one group: embedding + final norm + 25*21 + 5*20 layer tensors.
  EXPECT_EQ(r.tie_groups.size(), size_t(2 + 25 * 21 + 5 * 20));
  std::filesystem::remove_all(dir);
}

TEST(Inspect, StoredEncoderAliasesAreAccepted) {
  const std::string dir = dgemma_test_temp_dir("sparse_alias_test");
  FakeCheckpointOptions o;
  o.shards = 2;
  o.include_encoder_aliases = true;
  write_sparse_checkpoint(kData + "/configs/diffusiongemma-26b-a4b.config.json", dir, o);
  CheckpointReport r = inspect_checkpoint(dir, 0);
  EXPECT_EQ(r.aliases_stored.size(), size_t(2 + 25 * 21 + 5 * 20));
  // Shared storage is counted once (text 25.2 B, vision 0.57 B).
  EXPECT_NEAR(double(r.parameters_total), 25.2e9 + 572794416, 0.005 * 25.2e9);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dgemma
