#pragma once
// The vision tower's sizes that config.json leaves out, read off the stored
// tensors (docs/model.md §7.1): the published 26B config abbreviates its
// vision_config (no intermediate size, position table size, key/value heads
// or standardize), and the class defaults Transformers would fill in are
// another model's (E2B), so dgemma takes them from the checkpoint instead.
#include "checkpoint/config.h"
#include "io/safetensors.h"

namespace dgemma {

// Completes config.vision from `store`:
//   intermediate_size        rows of layers.0.mlp.gate_proj
//   num_key_value_heads      rows of layers.0.self_attn.k_proj / head_dim
//   position_embedding_size  the middle dimension of the position table [2, P, Hv]
//   standardize              whether std_bias is stored
// Only plain (float) tensors are read; a quantized one's stored shape is not
// its logical one. A size the config gives is kept (binding then reports a
// tensor that disagrees). When the store holds no tower tensor at all, the
// model has no tower (config.vision_tower = false: a text-only export).
// Throws dgemma::Error naming the key when a size is still unknown.
void resolve_vision_config(ModelConfig& config, const TensorStore& store);

// For writers of synthetic stand-ins of the published model (the sparse
// fixture, the benchmark slice) whose config is the abbreviated 26B copy:
// the sizes that copy leaves out, at the published tower's values
// (intermediate 4304, as many key/value heads as heads, 10240 positions,
// standardized). Sizes already known are kept.
void fill_published_tower_sizes(VisionConfig& vision);

}  // namespace dgemma
