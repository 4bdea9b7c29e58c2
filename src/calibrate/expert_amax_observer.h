#pragma once
// Observes the model's expert taps (OpObserver::wants_expert_inputs) and keeps,
// per layer and routed expert, the absolute maximum of the inputs of its
// gate/up and down projections over the tokens routed to it
// (docs/formats.md §3.5). Only the passes it is told to watch count.
#include <string_view>

#include "core/tensor.h"
#include "ops/backend.h"
#include "quantize/expert_activation_ranges.h"

namespace dgemma {

class ExpertAmaxObserver : public OpObserver {
 public:
  ExpertAmaxObserver(int64_t num_layers, int64_t num_experts, bool encoder, bool decoder);
  bool wants_expert_inputs() const override { return true; }
  void on_tap(std::string_view name, const Tensor& t) override;
  const ExpertActivationRanges& ranges() const { return ranges_; }
  ExpertActivationRanges& ranges() { return ranges_; }

 private:
  ExpertActivationRanges ranges_;
  bool encoder_, decoder_;
  Tensor idx_;  // the routing of the layer whose expert taps come next
  int64_t idx_layer_ = -1;
};

}  // namespace dgemma
