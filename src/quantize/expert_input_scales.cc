#include "quantize/expert_input_scales.h"

#include <algorithm>
#include <cmath>

#include "dgemma/error.h"

namespace dgemma {
namespace {

void fill(const ExpertActivationRanges& r, const std::vector<float>& amax, bool per_expert, const char* what,
          std::vector<float>& out) {
  const int64_t E = r.num_experts;
  if (int64_t(amax.size()) != r.num_layers * E)
    throw Error(std::string("expert input ranges: ") + what + " has " + std::to_string(amax.size()) +
                " entries, expected " + std::to_string(r.num_layers * E));
  out.assign(amax.size(), 0.0f);
  for (int64_t layer = 0; layer < r.num_layers; ++layer) {
    float layer_max = 0.0f;
    for (int64_t e = 0; e < E; ++e) {
      const float a = amax[r.at(layer, e)];
      if (!std::isfinite(a) || a < 0)
        throw Error("calibration: layer " + std::to_string(layer) + ", expert " + std::to_string(e) + ": the " + what +
                    " range is " + std::to_string(a));
      layer_max = std::max(layer_max, a);
    }
    if (layer_max == 0.0f)
      throw Error("calibration: layer " + std::to_string(layer) + ": every " + what +
                  " input was 0 over the calibration set, so its input_scale would be 0, which no consumer can "
                  "invert (are that layer's weights all zero?)");
    for (int64_t e = 0; e < E; ++e) {
      const float a = amax[r.at(layer, e)];
      out[r.at(layer, e)] = (per_expert && a > 0.0f ? a : layer_max) / kNvfp4ActivationRange;
    }
  }
}

}  // namespace

ExpertInputScales expert_input_scales(const ExpertActivationRanges& ranges, bool per_expert) {
  ExpertInputScales s;
  s.num_experts = ranges.num_experts;
  fill(ranges, ranges.gate_up_amax, per_expert, "gate/up", s.gate_up);
  fill(ranges, ranges.down_amax, per_expert, "down", s.down);
  return s;
}

}  // namespace dgemma
