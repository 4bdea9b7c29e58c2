#pragma once
// One entry for opening a checkpoint, whatever its form: a Hugging Face
// folder (config.json + safetensors) or a GGUF file, whole or any part of a
// split (docs/formats.md §5.3). Callers get the validated config and the
// tensors under dgemma's canonical names either way.
#include <memory>
#include <string>
#include <utility>

#include "checkpoint/config.h"
#include "checkpoint/gguf_config.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace dgemma {

struct CheckpointSource {
  std::string path;  // as given: the folder or the .gguf file
  ModelConfig config;
  TensorStore store;
  // GGUF: the files (their keys hold the tokenizer, docs/formats.md §5.4);
  // nullptr for a folder.
  std::shared_ptr<const GgufModelFiles> gguf;
  GgufSamplerDefaults sampler;  // GGUF: the diffusion.eb_* keys; a folder: none

  bool is_gguf() const { return gguf != nullptr; }

  CheckpointSource() = default;
  // Moves keep config's layer RoPE pointers on the moved-to config.
  CheckpointSource(CheckpointSource&& o) noexcept { *this = std::move(o); }
  CheckpointSource& operator=(CheckpointSource&& o) noexcept {
    path = std::move(o.path);
    config = std::move(o.config);
    store = std::move(o.store);
    gguf = std::move(o.gguf);
    sampler = o.sampler;
    point_layer_ropes(config);
    return *this;
  }
};

// Whether `path` names a GGUF file (a regular file starting with the GGUF
// magic) rather than a checkpoint folder.
bool is_gguf_checkpoint(const std::string& path);

// Opens the checkpoint at `path`. A folder reads `config_path` (empty:
// FOLDER/config.json); a GGUF file takes its config from its keys, and a
// non-empty `config_path` is an error. Throws dgemma::Error naming the file
// and the key, field or tensor at fault.
CheckpointSource open_checkpoint(const std::string& path, const std::string& config_path = "");

// The config alone (no tensor data is touched for a folder; a GGUF file is
// mapped to read its keys).
ModelConfig load_checkpoint_config(const std::string& path, const std::string& config_path = "");

}  // namespace dgemma
