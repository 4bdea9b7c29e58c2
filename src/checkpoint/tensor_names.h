#pragma once
// The text-model tensor list of a DiffusionGemma checkpoint derived from the
// config (docs/model.md §4): canonical (decoder-side) names, shapes, the component
// each belongs to, and the alias names tied to it (docs/formats.md §0.1).
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/config.h"

namespace dgemma {

enum class Component { kEmbedding, kAttention, kDenseMlp, kRouter, kExperts, kSelfConditioning, kNormsScalars };
const char* component_name(Component c);
inline constexpr int kNumComponents = 7;

struct ExpectedTensor {
  std::string name;  // canonical name (decoder side)
  std::vector<int64_t> shape;
  Component component;
  std::vector<std::string> aliases;  // tied names that may also be stored
};

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// Vision/audio tensors a text-only engine skips (docs/model.md §4).
bool is_skipped_tensor(const std::string& name);

inline const std::string kDecoderPrefix = "model.decoder.";
inline const std::string kEncoderTextPrefix = "model.encoder.language_model.";

}  // namespace dgemma
