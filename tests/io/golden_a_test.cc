// The golden checkpoint A (tests/data/golden_a, written by the Python
// reference) and its case files must load through our reader unchanged.
#include <filesystem>
#include <map>

#include "core/file_io.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

TEST(GoldenA, CheckpointHas113AlignedF32Tensors) {
  auto f = SafetensorsFile::open(kGolden + "/model.safetensors");
  ASSERT_EQ(f->tensors().size(), 113u);
  uint64_t total = 0;
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.dtype, DType::kF32) << t.name;
    EXPECT_TRUE(f->view(t).aligned()) << t.name;
    total += t.nbytes();
  }
  EXPECT_EQ(f->header().data_offset + total, f->file_size());
  ASSERT_EQ(f->header().metadata.size(), 1u);
  EXPECT_EQ(f->header().metadata[0], (std::pair<std::string, std::string>{"format", "pt"}));

  const TensorInfo* emb = f->find("model.decoder.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_FLOAT_EQ(f->view(*emb).at_f32(0), -0.01117185689508915f);
  EXPECT_FLOAT_EQ(f->view(*emb).at_f32(3), -0.08816877752542496f);
  const TensorInfo* experts = f->find("model.decoder.layers.0.experts.gate_up_proj");
  ASSERT_NE(experts, nullptr);
  EXPECT_EQ(experts->shape, (std::vector<int64_t>{8, 64, 64}));
}

TEST(GoldenA, FolderOpensAsStoreAndMatchesCaseIndex) {
  // cases/ is a subfolder, so only model.safetensors belongs to the store.
  TensorStore store = TensorStore::open_dir(kGolden);
  EXPECT_EQ(store.files().size(), 1u);
  EXPECT_EQ(store.names().size(), 113u);

  json::ParseOptions opt;
  opt.source = "cases/_index.json";
  json::Value index = json::parse(read_text_file(kGolden + "/cases/_index.json"), opt);
  const json::Value* ckpt = index.find("checkpoint");
  ASSERT_NE(ckpt, nullptr);
  EXPECT_EQ(ckpt->find("n_tensors")->as_int(), int64_t(store.names().size()));
  // Tied aliases are absent from the file: the loader must resolve them.
  for (const auto& name : ckpt->find("missing_on_load_(tied)")->as_array())
    EXPECT_EQ(store.find(name.as_string()), nullptr) << name.as_string();
}

TEST(GoldenA, ConfigFilesParse) {
  for (const char* name : {"config.json", "config_flat_global_keys.json", "generation_config.json"}) {
    json::ParseOptions opt;
    opt.source = name;
    json::Value v = json::parse(read_text_file(kGolden + "/" + name), opt);
    EXPECT_TRUE(v.is_object()) << name;
  }
}

TEST(GoldenA, EveryCaseFileOpens) {
  const std::map<std::string, size_t> expected = {
      {"decoder_first_long", 22},     {"decoder_first_short", 22}, {"decoder_selfcond_long", 23},
      {"decoder_selfcond_short", 23}, {"encoder_long", 28},        {"encoder_short", 28},
      {"generate_eos", 293},          {"generate_long", 438},      {"generate_short", 293},
  };
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kGolden + "/cases")) {
    const std::string stem = entry.path().stem().string();
    const std::string ext = entry.path().extension().string();
    if (ext == ".json") {
      json::ParseOptions opt;
      opt.source = entry.path().string();
      EXPECT_TRUE(json::parse(read_text_file(entry.path().string()), opt).is_object()) << stem;
      continue;
    }
    ASSERT_EQ(ext, ".safetensors") << entry.path();
    auto f = SafetensorsFile::open(entry.path().string());
    ++seen;
    ASSERT_TRUE(expected.count(stem)) << stem;
    EXPECT_EQ(f->tensors().size(), expected.at(stem)) << stem;
    bool has_case = false;
    for (const auto& [k, v] : f->header().metadata) has_case |= (k == "case" && v == stem);
    EXPECT_TRUE(has_case) << stem;
    size_t misaligned = 0;
    for (const TensorInfo& t : f->tensors()) {
      EXPECT_TRUE(t.dtype == DType::kF32 || t.dtype == DType::kI64 || t.dtype == DType::kI32 || t.dtype == DType::kBool)
          << stem << " " << t.name;
      misaligned += f->view(t).aligned() ? 0 : 1;
    }
    // The generate_* files were written in name order, not the reference
    // writer's dtype order, so many of their tensors are misaligned in the
    // mapping: consumers must copy rather than cast (docs/formats.md §1.3).
    if (stem.starts_with("generate_")) {
      EXPECT_GT(misaligned, 0u) << stem;
    } else {
      EXPECT_EQ(misaligned, 0u) << stem;
    }
  }
  EXPECT_EQ(seen, expected.size());
}

}  // namespace
}  // namespace dgemma
