#pragma once
// A backend that wraps another and corrupts one chosen op invocation: for
// testing that the differential checker (`dgemma doctor`) names exactly the
// op, layer, pass and step that went wrong. Runs everywhere, no GPU needed.
//
// Spec string: "inject:OP:LAYER:PASS:STEP:KIND[:SITE][@BACKEND]"
//   OP     an op name of the vocabulary (ops/op.h), e.g. "moe_experts"
//   LAYER  layer index, or "model" / -1 for ops that run once per pass
//   PASS   "encoder", "decoder" or "vision" (the vision tower, docs/model.md §7)
//   STEP   denoising step (0 for the encoder)
//   KIND   value: add a large offset to the outputs
//          nan:   fill the outputs with NaN
//          oob:   write past the end of the first output (into a canary)
//          crash: kill the process with SIGSEGV inside the op
//   SITE    optional: the site within the layer (below)
//   BACKEND optional: the backend the op runs on, any backend_factory.h
//           name but another inject: (default cpu), e.g.
//           "inject:linear:1:decoder:1:value@opencl:0.0" puts the fault
//           in the OpenCL device's linear. The fault is applied to the op's
//           outputs on the host after the inner backend ran it (outputs it
//           left on its device are read back first and then live on the
//           host), so the checker sees the op itself go wrong; `oob` writes
//           into the canary padding of the host copy the checker hands out.
#include <memory>
#include <string>

#include "ops/backend.h"

namespace dgemma {

enum class FaultKind { kValue, kNan, kOutOfBounds, kCrash };
std::string_view fault_kind_name(FaultKind kind);

struct InjectSpec {
  OpKind op{};
  int layer = -1;
  Pass pass = Pass::kEncoder;
  int step = 0;
  FaultKind kind = FaultKind::kValue;
  // The site within the layer when the op kind occurs several times (e.g.
  // "self_attn.q_proj"); empty: the first matching invocation.
  std::string site;
  std::string inner = "cpu";  // the backend that runs the ops (after '@')
};

// "inject:..." (prefix optional); throws naming the field and value that are wrong.
InjectSpec parse_inject_spec(const std::string& spec);
OpKind parse_op_name(std::string_view name);

class InjectBackend : public Backend {
 public:
  InjectBackend(std::unique_ptr<Backend> inner, InjectSpec spec) : inner_(std::move(inner)), spec_(std::move(spec)) {}
  std::string name() const override;
  void run(const OpCall& call) override;
  ThreadPool* host_pool() override { return inner_->host_pool(); }
  bool supports(const OpCall& call, std::string* why = nullptr) const override { return inner_->supports(call, why); }
  bool supports_device_outputs() const override { return inner_->supports_device_outputs(); }
  void release_weight_copies() override { inner_->release_weight_copies(); }
  std::optional<DeviceTraffic> device_traffic() const override { return inner_->device_traffic(); }
  void reset_traffic() override { inner_->reset_traffic(); }
  bool fired() const { return fired_; }

 private:
  bool matches(const OpCall& call) const;
  std::unique_ptr<Backend> inner_;
  InjectSpec spec_;
  bool fired_ = false;
};

// Outputs handed to a backend under test get this many extra elements past
// their logical end, filled with a canary; overwriting them is an
// out-of-bounds write (spec: docs/placement.md §1.3 "canaries").
inline constexpr size_t kCanaryElements = 16;
inline constexpr float kCanaryF32 = -1.2345678e-33f;
inline constexpr int32_t kCanaryI32 = int32_t(0x5eadbeef);

}  // namespace dgemma
