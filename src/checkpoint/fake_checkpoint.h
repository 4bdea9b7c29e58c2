#pragma once
// Test fixtures without weights: a *sparse* checkpoint with the real tensor
// names, shapes and dtypes of a config (docs/model.md §4), the data left as file holes
// so that a 50 GB model costs no disk. Used to test loading, `inspect` and
// placement on the real 26B-A4B tensor list.
#include <string>

#include "core/dtype.h"
#include "checkpoint/config.h"

namespace dgemma {

struct FakeCheckpointOptions {
  int shards = 4;  // > 1 writes model.safetensors.index.json
  DType dtype = DType::kBF16;
  // The vision tower when the config has one (sizes an abbreviated
  // vision_config leaves out at the published 26B tower's values), and a
  // vestigial embed_vision.embedding table that loaders skip.
  bool include_vision = true;
  bool include_encoder_aliases = false;  // also store encoder copies of tied tensors
};

// Writes config.json (copied from `config_path`) and sparse shards to `dir`.
void write_sparse_checkpoint(const std::string& config_path, const std::string& dir,
                             const FakeCheckpointOptions& options = {});

}  // namespace dgemma
