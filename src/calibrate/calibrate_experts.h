#pragma once
// PTQ calibration of the routed experts' input ranges (docs/formats.md §3.5):
// runs the calibration samples through the model one layer at a time
// (model/layerwise_runner.h) and records, per layer and expert, the absolute
// maximum of the inputs of its gate/up and down projections over the tokens
// routed to it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/diffusion_gemma.h"
#include "quantize/expert_activation_ranges.h"

namespace dgemma {

struct ExpertCalibrationOptions {
  // Which passes are observed. The encoder runs over each sample as a prompt;
  // the decoder, when asked, over canvas(sample) placed after that prompt,
  // without self-conditioning.
  bool encoder = true;
  bool decoder = false;
  std::function<std::vector<int32_t>(size_t sample)> canvas;
  // Where the hidden states wait between layers: "" in memory, else a
  // scratch file in this folder (hidden_state_store.h).
  std::string scratch_dir;
  // After each (layer, sample): for a progress display.
  std::function<void(int layer, size_t sample)> progress;
};

// Hidden-state bytes a calibration of these samples keeps between layers.
uint64_t calibration_state_bytes(const ModelConfig& config, const std::vector<std::vector<int32_t>>& samples,
                                 const ExpertCalibrationOptions& options);

// The model must have been loaded from plain weights; its KV cache is used
// as scratch and left empty. The observer of the model is replaced while this
// runs and restored afterwards. Fills everything in the result except the
// record of the calibration set (sha256, passes), which the caller knows.
ExpertActivationRanges calibrate_expert_inputs(DiffusionGemma& model, const std::vector<std::vector<int32_t>>& samples,
                                               const ExpertCalibrationOptions& options);

}  // namespace dgemma
