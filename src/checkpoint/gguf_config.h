#pragma once
// The model configuration of a DiffusionGemma GGUF file (docs/formats.md
// §5.3): ModelConfig from the file's keys and tensor list, validated as
// strictly as config.json is (checkpoint/config.h). Errors name the file and
// the key or tensor at fault.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "io/gguf.h"

namespace dgemma {

// Sampler defaults a GGUF file may carry (the `diffusion.eb_*` keys,
// docs/formats.md §5.3); an absent key leaves dgemma's default. Plain data:
// the caller applies them to its GenerationConfig.
struct GgufSamplerDefaults {
  std::optional<int64_t> max_denoising_steps;  // diffusion.eb_max_steps
  std::optional<double> t_min;                 // diffusion.eb_t_min
  std::optional<double> t_max;                 // diffusion.eb_t_max
  std::optional<double> entropy_bound;         // diffusion.eb_entropy_bound
  std::optional<int64_t> stability_threshold;  // diffusion.eb_stability_threshold
  std::optional<double> confidence_threshold;  // diffusion.eb_confidence_threshold
  bool any() const {
    return max_denoising_steps || t_min || t_max || entropy_bound || stability_threshold || confidence_threshold;
  }
};

// The config of the model described by `keys` and `tensors` (every part's
// tensors; ne innermost first, as stored). `rope_freqs` holds the values of
// `rope_freqs.weight` (nullptr when the file has none). The result's
// `source` is keys.source().
ModelConfig gguf_model_config(const GgufKeys& keys, const std::vector<GgufTensorInfo>& tensors,
                              const std::vector<float>* rope_freqs);

// The `diffusion.eb_*` keys present in `keys`, range-checked.
GgufSamplerDefaults gguf_sampler_defaults(const GgufKeys& keys);

// The values `rope_freqs.weight` holds for a proportional RoPE that rotates
// `rotated_pairs` of `head_dim / 2` pairs (docs/formats.md §5.3): 1 for a
// rotated pair, kGgufUnrotatedFreqFactor for the others. The inverse of the
// config reader's rule; the GGUF writer emits it.
inline constexpr float kGgufUnrotatedFreqFactor = 1e30f;
std::vector<float> gguf_rope_freq_factors(int head_dim, int rotated_pairs);

}  // namespace dgemma
