#include "checkpoint/checkpoint_source.h"

#include <cstring>
#include <filesystem>

#include "checkpoint/gguf_names.h"
#include "checkpoint/vision_shapes.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

// Every part's tensor descriptors, in part order.
std::vector<GgufTensorInfo> all_tensors(const GgufModelFiles& files) {
  std::vector<GgufTensorInfo> out;
  for (const auto& part : files.parts())
    out.insert(out.end(), part->header().tensors.begin(), part->header().tensors.end());
  return out;
}

// The values of rope_freqs.weight (an F32 vector), or nullopt without one.
std::optional<std::vector<float>> rope_freqs(const GgufModelFiles& files) {
  for (const auto& part : files.parts()) {
    for (const GgufTensorInfo& t : part->header().tensors) {
      if (t.name != kGgufRopeFreqsName) continue;
      if (t.type != GgmlType::kF32 || t.ne.size() != 1)
        throw Error(part->path() + ": tensor " + t.name + ": expected an F32 vector, got " +
                    std::string(ggml_type_name(t.type)) + " with " + std::to_string(t.ne.size()) + " dims");
      std::vector<float> v(size_t(t.ne[0]));
      std::memcpy(v.data(), part->data(t), v.size() * sizeof(float));
      return v;
    }
  }
  return std::nullopt;
}

ModelConfig gguf_config_of(const GgufModelFiles& files) {
  const std::optional<std::vector<float>> freqs = rope_freqs(files);
  ModelConfig c = gguf_model_config(files.keys(), all_tensors(files), freqs ? &*freqs : nullptr);
  point_layer_ropes(c);
  return c;
}

std::string folder_config_path(const std::string& dir, const std::string& config_path) {
  return config_path.empty() ? (std::filesystem::path(dir) / "config.json").string() : config_path;
}

}  // namespace

bool is_gguf_checkpoint(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && looks_like_gguf(path);
}

ModelConfig load_checkpoint_config(const std::string& path, const std::string& config_path) {
  if (!is_gguf_checkpoint(path)) return load_model_config(folder_config_path(path, config_path));
  if (!config_path.empty())
    throw Error(path + ": a GGUF file carries its own config; " + config_path + " does not apply to it");
  return gguf_config_of(GgufModelFiles::open(path));
}

CheckpointSource open_checkpoint(const std::string& path, const std::string& config_path) {
  CheckpointSource src;
  src.path = path;
  if (!is_gguf_checkpoint(path)) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec))
      throw Error(path + ": not a checkpoint folder or GGUF file" +
                  (std::filesystem::exists(path, ec) ? "" : " (it does not exist)"));
    src.config = load_model_config(folder_config_path(path, config_path));
    src.store = TensorStore::open_dir(path);
    resolve_vision_config(src.config, src.store);
  } else {
    if (!config_path.empty())
      throw Error(path + ": a GGUF file carries its own config; " + config_path + " does not apply to it");
    auto files = std::make_shared<const GgufModelFiles>(GgufModelFiles::open(path));
    src.config = gguf_config_of(*files);
    src.sampler = gguf_sampler_defaults(files->keys());
    src.store = TensorStore::open_gguf(
        *files, [](std::string_view name) { return gguf_to_canonical(name).value_or(std::string()); });
    src.gguf = std::move(files);
  }
  point_layer_ropes(src.config);
  return src;
}

}  // namespace dgemma
