#pragma once
// How a pass walks the model's layers (docs/placement.md §3.1). The model
// hands its schedule one callback per layer; the schedule decides which
// layers this process runs and moves the hidden states between processes at
// stage boundaries, so the model knows no rank, send or receive.
#include <functional>
#include <memory>

#include "core/tensor.h"
#include "placement/stage_transport.h"

namespace dgemma {

class LayerSchedule {
 public:
  virtual ~LayerSchedule() = default;
  // Calls run_layer(i) for each layer i < num_layers that this process runs,
  // in order; `x` holds the hidden states going in and coming out of each.
  // With share_result, every process ends with the last layer's output in x
  // (the decoder's final states feed the replicated LM head and sampler).
  virtual void run(int num_layers, Tensor& x, bool share_result, const std::function<void(int layer)>& run_layer) = 0;
};

// Every layer in this process, in order.
class LocalSchedule : public LayerSchedule {
 public:
  void run(int num_layers, Tensor& x, bool share_result, const std::function<void(int layer)>& run_layer) override;
};

// Pipeline stages across processes (placement/stage_transport.h): this rank
// runs the layers it owns; at a stage boundary the owner of layer i sends the
// hidden states to the owner of layer i + 1, and with share_result the last
// layer's owner broadcasts them. The transport is not owned.
class PipelineSchedule : public LayerSchedule {
 public:
  explicit PipelineSchedule(StageTransport& transport) : transport_(transport) {}
  void run(int num_layers, Tensor& x, bool share_result, const std::function<void(int layer)>& run_layer) override;

 private:
  StageTransport& transport_;
};

// A PipelineSchedule over `transport`, or a LocalSchedule when it is null.
std::unique_ptr<LayerSchedule> make_layer_schedule(StageTransport* transport);

}  // namespace dgemma
