#include "checkpoint/fake_checkpoint.h"

#include <filesystem>
#include <fstream>

#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"
#include "checkpoint/tensor_names.h"
#include "checkpoint/vision_shapes.h"

namespace dgemma {

void write_sparse_checkpoint(const std::string& config_path, const std::string& dir,
                             const FakeCheckpointOptions& options) {
  namespace fs = std::filesystem;
  const ModelConfig config = load_model_config(config_path);
  fs::create_directories(dir);
  fs::copy_file(config_path, fs::path(dir) / "config.json", fs::copy_options::overwrite_existing);

  struct Item {
    std::string name;
    std::vector<int64_t> shape;
  };
  std::vector<Item> items;
  for (const ExpectedTensor& t : expected_tensors(config)) {
    items.push_back({t.name, t.shape});
    if (options.include_encoder_aliases)
      for (const auto& a : t.aliases)
        if (a.rfind(kEncoderTextPrefix, 0) == 0) items.push_back({a, t.shape});
  }
  if (options.include_vision && config.has_vision_config) {
    // The whole tower. An abbreviated vision_config (the published 26B
    // config's copy) leaves sizes out; the fixture stores them at the
    // published tower's values, so that loading it reads them back off the
    // shapes (docs/model.md §7.1).
    ModelConfig full = config;
    fill_published_tower_sizes(full.vision);
    for (const ExpectedTensor& t : expected_vision_tensors(full)) items.push_back({t.name, t.shape});
    // A vestigial table some exports carry; loaders skip it.
    items.push_back({"model.encoder.embed_vision.embedding.weight", {16, full.vision.hidden_size}});
  }
  const int shards = std::max(1, options.shards);
  std::vector<SafetensorsWriter> writers(static_cast<size_t>(shards));
  json::Value weight_map = json::Object{};
  // Round-robin by tensor keeps shards balanced enough for a fixture.
  auto shard_name = [&](int s) {
    if (shards == 1) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", s + 1, shards);
    return std::string(buf);
  };
  for (size_t k = 0; k < items.size(); ++k) {
    const int s = int(k % size_t(shards));
    writers[size_t(s)].add_sparse(items[k].name, options.dtype, items[k].shape);
    weight_map.set(items[k].name, shard_name(s));
  }
  for (int s = 0; s < shards; ++s) {
    writers[size_t(s)].set_metadata("format", "pt");
    writers[size_t(s)].write((fs::path(dir) / shard_name(s)).string());
  }
  if (shards > 1) {
    json::Value index = json::Object{};
    json::Value meta = json::Object{};
    meta.set("note", "sparse fixture written by dgemma (no weight data)");
    index.set("metadata", std::move(meta));
    index.set("weight_map", std::move(weight_map));
    std::ofstream f(fs::path(dir) / "model.safetensors.index.json");
    f << json::dump(index, 2) << "\n";
    if (!f) throw Error(dir + ": cannot write model.safetensors.index.json");
  }
}

}  // namespace dgemma
