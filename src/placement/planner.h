#pragma once
// Tie-aware placement planner (docs/placement.md §2.3). Places a
// DiffusionGemma model on a list of devices from metadata alone:
//  * the atomic unit is the layer pair (encoder layer i, decoder layer i):
//    their weights are tied and decoder layer i reads the KV cache encoder
//    layer i writes; every tied alias goes where its canonical tensor goes;
//  * each device owns a contiguous range of layers in execution order;
//  * the embedding table, the tied LM head, the self-conditioning block, the
//    final norm and the sampler live together on the first stage's device
//    (the last stage hands the hidden states back to it), unless the table is
//    explicitly replicated read-only on the last device (counted);
//  * budget(d) = weights + KV cache (max batch x context, per layer type) +
//    workspace + margin <= capacity x utilization, deterministic;
//  * shared storage is counted once; one device is preferred when the model
//    fits; nothing is silently offloaded — a plan that does not fit is an
//    error stating the minimum memory needed per device.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "dgemma/error.h"
#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"

namespace dgemma {

struct DeviceSpec {
  std::string name;  // "cuda:0", "cpu:1", ...
  uint64_t capacity_bytes = 0;
};

enum class PlanStrategy { kSingle, kSequential, kBalanced };

struct PlanRequest {
  std::vector<DeviceSpec> devices;
  PlanStrategy strategy = PlanStrategy::kSequential;
  int64_t max_batch = 1;
  int64_t max_context = 4096;
  int kv_bytes_per_element = 2;  // bf16 cache on devices
  double utilization = 0.9;
  uint64_t margin_bytes = uint64_t(512) << 20;  // per device
  bool replicate_embedding = false;
  // Soft tokens of the largest image the vision tower's activations are
  // counted for: patches = this × pooling² (280 × 3² = 2,520 at the
  // published size, docs/model.md §7).
  int64_t vision_max_soft_tokens = 280;
};

struct DevicePlan {
  std::string name;
  uint64_t capacity_bytes = 0;
  uint64_t weights_bytes = 0, kv_bytes = 0, workspace_bytes = 0, margin_bytes = 0;
  int first_layer = -1, last_layer = -1;  // inclusive; -1/-1: no layers
  bool holds_embedding = false, holds_replica = false;
  uint64_t total() const { return weights_bytes + kv_bytes + workspace_bytes + margin_bytes; }
};

struct PlanEdge {
  std::string from, to, what;
  uint64_t bytes_per_step = 0;
};

// The vision tower (docs/model.md §7), when the model has one: it runs
// before the encoder's first layer, so it goes with the encoder's first
// stage (the embedding's device); its weights are in that device's
// weights, its activations for one image of `patches` patches in its
// workspace (the larger of these and the text passes' buffers).
struct VisionPlacement {
  std::string device;
  uint64_t weights_bytes = 0, activation_bytes = 0;
  int64_t patches = 0;
};

struct Plan {
  std::vector<DevicePlan> devices;  // only devices that received work
  std::optional<VisionPlacement> vision;
  std::map<std::string, std::string> tensor_device;  // every canonical and alias name -> device
  std::vector<std::vector<std::string>> tie_groups;
  std::vector<PlanEdge> edges;
};

// Byte size of each expected tensor (canonical name -> bytes), e.g. from the
// bound checkpoint; tensors absent from the map are sized from their shape
// and `default_element_bytes`.
Plan make_plan(const ModelConfig& config, const std::map<std::string, uint64_t>& tensor_bytes,
               const PlanRequest& request);

// Thrown by make_plan when the model does not fit; carries the minimum
// capacity per device (with the request's utilization and margin) at which
// the same strategy would succeed.
struct PlanError : Error {
  PlanError(const std::string& what, uint64_t min_bytes) : Error(what), min_bytes_per_device(min_bytes) {}
  uint64_t min_bytes_per_device;
};

// "cuda:0=80GiB,cuda:1=80GiB", "opencl:0.0=16GiB,cpu:1=64GiB". A name
// without "=SIZE" ("opencl:0.0") is sized by `capacity_of(name)`, the
// device's own memory (the tools pass backend_factory.h
// device_memory_bytes); without `capacity_of` it is an error asking for the
// size. Names are "cuda:N", "opencl:P.D" or, for a virtual CPU device, any
// other (docs/placement.md §3.1).
std::vector<DeviceSpec> parse_device_list(const std::string& text,
                                          const std::function<uint64_t(const std::string&)>& capacity_of = nullptr);
uint64_t parse_bytes(const std::string& text);  // "80GiB", "24G" (= GiB), "512MiB", "1.5TB", "1000"
PlanStrategy parse_strategy(const std::string& name);

json::Value plan_to_json(const Plan& plan);
std::string plan_to_text(const Plan& plan);

}  // namespace dgemma
