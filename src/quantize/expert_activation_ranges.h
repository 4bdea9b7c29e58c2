#pragma once
// What PTQ calibration measured of the routed experts' inputs
// (docs/formats.md §3.5), as the exporter consumes it: per layer and expert,
// the absolute maximum of what the gate/up projections and the down
// projection were fed over the calibration tokens routed to that expert, and
// what the calibration set was.
#include <cstdint>
#include <string>
#include <vector>

namespace dgemma {

struct ExpertActivationRanges {
  int64_t num_layers = 0, num_experts = 0;
  // [layer · num_experts + expert]
  std::vector<float> gate_up_amax, down_amax;
  std::vector<int64_t> routed;  // (token, slot) pairs routed to the expert

  // The calibration set, recorded with the export (docs/formats.md §3.5).
  std::string sha256;  // calibration_set_sha256 (calibrate/calibration_samples.h)
  int64_t samples = 0, max_seq_len = 0, tokens = 0;
  std::string passes;     // "encoder", "decoder" or "encoder+decoder"
  std::string precision;  // the calibration's arithmetic: "fp32" or "bf16"

  size_t at(int64_t layer, int64_t expert) const { return size_t(layer * num_experts + expert); }
  void resize(int64_t layers, int64_t experts) {
    num_layers = layers;
    num_experts = experts;
    gate_up_amax.assign(size_t(layers * experts), 0.0f);
    down_amax.assign(size_t(layers * experts), 0.0f);
    routed.assign(size_t(layers * experts), 0);
  }
};

}  // namespace dgemma
