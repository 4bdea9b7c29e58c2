#pragma once
// The NVFP4 activation scales of the routed experts from calibrated input
// ranges (docs/formats.md §3.5): input_scale = amax / (6 · 448), the largest
// E2M1 magnitude times the largest E4M3 block scale.
#include <string>
#include <vector>

#include "quantize/expert_activation_ranges.h"

namespace dgemma {

inline constexpr float kNvfp4ActivationRange = 6.0f * 448.0f;

struct ExpertInputScales {
  int64_t num_experts = 0;
  std::vector<float> gate_up, down;  // [layer · num_experts + expert]
};

// shared (per_expert false): ModelOpt's rule, one value per layer and
// projection (the maximum over the layer's experts) written for every
// expert. per_expert: each expert's own maximum; an expert whose maximum is
// 0 (no calibration token reached it) takes its layer's. Throws naming the
// layer and projection when a whole layer's maximum is 0 or not finite (a
// scale of 0 cannot be inverted by a consumer).
ExpertInputScales expert_input_scales(const ExpertActivationRanges& ranges, bool per_expert);

}  // namespace dgemma
