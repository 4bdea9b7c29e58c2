#include "placement/layer_schedule.h"

namespace dgemma {

void LocalSchedule::run(int num_layers, Tensor& /*x*/, bool /*share_result*/,
                        const std::function<void(int layer)>& run_layer) {
  for (int li = 0; li < num_layers; ++li) run_layer(li);
}

void PipelineSchedule::run(int num_layers, Tensor& x, bool share_result,
                           const std::function<void(int layer)>& run_layer) {
  const int me = transport_.rank();
  auto owner = [this](int li) { return transport_.owner_of_layer(li); };
  for (int li = 0; li < num_layers; ++li) {
    if (owner(li) != me) continue;
    // Entering this rank's stage: take the hidden states from the previous owner.
    if (li > 0 && owner(li - 1) != me) {
      transport_.recv(owner(li - 1), x);
      x.host_written();
    }
    run_layer(li);
    if (li + 1 < num_layers && owner(li + 1) != me) {
      x.ensure_host();
      transport_.send(owner(li + 1), x);
    }
  }
  if (share_result && num_layers > 0) {
    x.ensure_host();
    transport_.broadcast(owner(num_layers - 1), x);
    x.host_written();
  }
}

std::unique_ptr<LayerSchedule> make_layer_schedule(StageTransport* transport) {
  if (transport == nullptr) return std::make_unique<LocalSchedule>();
  return std::make_unique<PipelineSchedule>(*transport);
}

}  // namespace dgemma
