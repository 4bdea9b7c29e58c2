#include "checkpoint/model_slice.h"

#include <filesystem>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"
#include "checkpoint/vision_shapes.h"
#include "core/data_dir.h"
#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma {

std::string slice_config_json(int layers, int vision_layers) {
  json::Value root = json::parse(read_text_file(data_file(kRealModelConfig)));
  if (vision_layers > 0) {
    json::Value vision = *root.find("vision_config");
    vision.set("num_hidden_layers", vision_layers);
    root.set("vision_config", vision);
  } else {
    json::Object kept;
    for (auto& [key, value] : root.as_object())
      if (key != "vision_config") kept.emplace_back(key, value);
    root = json::Value(kept);
  }
  json::Value text = *root.find("text_config");
  json::Array types;
  for (int i = 0; i < layers; ++i)
    types.emplace_back((i % 6 == 5 || i == layers - 1) ? "full_attention" : "sliding_attention");
  text.set("num_hidden_layers", layers);
  text.set("layer_types", types);
  root.set("text_config", text);
  return json::dump(root, 2);
}

// Writes config.json + model.safetensors of the slice to `dir` unless a
// slice with the same config is already there. Returns dir.
std::string ensure_model_slice(const std::string& dir, int layers, uint64_t seed, int vision_layers) {
  namespace fs = std::filesystem;
  const std::string cfg = slice_config_json(layers, vision_layers);
  if (fs::exists(fs::path(dir) / "model.safetensors") && fs::exists(fs::path(dir) / "config.json") &&
      read_text_file((fs::path(dir) / "config.json").string()) == cfg)
    return dir;
  fs::create_directories(dir);
  write_file_atomically((fs::path(dir) / "config.json").string(), cfg);
  ModelConfig c = load_model_config((fs::path(dir) / "config.json").string());
  fill_published_tower_sizes(c.vision);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  SafetensorsWriter w;
  std::vector<uint16_t> buf;
  std::vector<ExpectedTensor> tensors = expected_tensors(c);
  for (ExpectedTensor& t : expected_vision_tensors(c)) tensors.push_back(std::move(t));
  for (const ExpectedTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    buf.resize(size_t(n));
    // Vectors (norm scales, layer scalars, per-expert scales): around 1;
    // matrices: uniform in ±0.04 (std 0.023, a typical init scale).
    const bool vec = t.shape.size() == 1;
    const float lo = vec ? 0.6f : -0.04f, span = vec ? 0.7f : 0.08f;
    for (int64_t i = 0; i < n; i += 2) {
      const uint64_t r = next();
      buf[size_t(i)] = f32_to_bf16(lo + span * float(r >> 40) * (1.0f / 16777216.0f));
      if (i + 1 < n) buf[size_t(i + 1)] = f32_to_bf16(lo + span * float((r >> 16) & 0xffffff) * (1.0f / 16777216.0f));
    }
    w.add(t.name, DType::kBF16, t.shape, buf.data());
  }
  w.set_metadata("format", "pt");
  w.write((fs::path(dir) / "model.safetensors").string());
  return dir;
}

}  // namespace dgemma
