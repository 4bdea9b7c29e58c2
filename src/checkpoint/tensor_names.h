#pragma once
// The text-model tensor list of a DiffusionGemma checkpoint derived from the
// config (docs/model.md §4): canonical (decoder-side) names, shapes, the component
// each belongs to, and the alias names tied to it (docs/formats.md §0.1).
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/config.h"

namespace dgemma {

enum class Component {
  kEmbedding,
  kAttention,
  kDenseMlp,
  kRouter,
  kExperts,
  kSelfConditioning,
  kNormsScalars,
  kVisionLinear,  // the vision tower's linears and embed_vision's projection (docs/model.md §7.1)
  kVisionTable,   // the tower's norm scales, position table and standardization vectors
};
const char* component_name(Component c);
inline constexpr int kNumComponents = 9;

struct ExpectedTensor {
  std::string name;  // canonical name (decoder side)
  std::vector<int64_t> shape;
  Component component;
  std::vector<std::string> aliases;  // tied names that may also be stored
};

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// The vision tower's tensors (docs/model.md §4, §7.1): none without a tower
// (config.vision_tower); throws dgemma::Error naming the keys when a size is
// still unknown (checkpoint/vision_shapes.h resolves them from a checkpoint).
std::vector<ExpectedTensor> expected_vision_tensors(const ModelConfig& config);

// Tensors the engine stores but never reads (docs/model.md §4): audio, the
// vestigial embed_vision.embedding.*, and vision when `config` has no tower.
bool is_skipped_tensor(const ModelConfig& config, const std::string& name);
// Whether `name` belongs to the vision tower or embed_vision (either layout).
bool is_vision_tensor(const std::string& name);

inline const std::string kDecoderPrefix = "model.decoder.";
inline const std::string kEncoderTextPrefix = "model.encoder.language_model.";
inline const std::string kVisionTowerPrefix = "model.encoder.vision_tower.";
inline const std::string kEmbedVisionPrefix = "model.encoder.embed_vision.";

}  // namespace dgemma
