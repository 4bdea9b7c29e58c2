#pragma once
// Backend interface over the op vocabulary, plus observation. A backend
// executes one OpCall at a time; the Executor validates the call, runs it and
// notifies the observer (which must not modify anything).
//
// Device residency (docs/cuda.md §1): a device backend may leave an op's outputs in
// its own memory (Tensor::device, host_stale) when the call allows it
// (OpCall::device_outputs), and reads inputs it already holds without a copy.
// The Executor allows it only when the backend supports it and no observer
// watches: observers, taps and host backends always see current host data
// (Tensor::ensure_host), so the CPU backend, doctor and the parity tools work
// unchanged. Host code that reads a tensor a device may hold calls
// ensure_host() first; host code that writes one calls host_written().
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op.h"

namespace dgemma {

class ThreadPool;

// What crossed between host and device, counted by a device backend itself.
// Weight uploads are counted apart: they happen once per weight, not per step.
struct DeviceTraffic {
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  int64_t synchronizations = 0;      // host waits for the device
  int64_t kernel_launches = 0;       // kernels and library calls (inside graphs too)
  int64_t graph_launches = 0;        // launch graphs run (one per run of ops between waits)
  int64_t graph_instantiations = 0;  // of them, instantiated anew (the others updated an earlier one)
  int64_t weight_h2d_bytes = 0;
};

// The device time of one op (Backend::take_profile).
struct OpDeviceTime {
  OpKind kind = OpKind::kAdd;
  int layer = -1;  // OpCall::layer (-1: model level)
  double seconds = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Outputs are already sized by prepare_op(). Inputs may carry device data
  // of any backend; a host backend calls ensure_host() on them.
  virtual void run(const OpCall& call) = 0;
  // Whether run() executes this (valid, prepared) call, rather than refusing
  // it for a dtype, scheme or shape the backend does not implement; when it
  // does not, `why` (if given) gets the reason in one line. Answers for the
  // call as given, without running it. Default: every call (the CPU backend
  // runs the whole vocabulary). The op catalogue test skips what its target
  // refuses (tests/ops/op_catalogue_test.cc).
  virtual bool supports(const OpCall& /*call*/, std::string* /*why*/ = nullptr) const { return true; }
  // Whether run() honours OpCall::device_outputs (keeps outputs on a device).
  virtual bool supports_device_outputs() const { return false; }

  // Worker threads of the host that the caller may use between passes (the
  // CPU backend's pool, idle then); null when the backend has none.
  virtual ThreadPool* host_pool() { return nullptr; }
  // Forgets the copies this backend made of weights it was given (a CPU's
  // packed panels, a device's uploads); they are made again when used. For
  // callers that visit the weights once each (layer-by-layer calibration).
  virtual void release_weight_copies() {}

  // Statistics, for tools that measure a backend without knowing which it
  // is. A backend with memory of its own counts what crosses the bus;
  // others return no traffic.
  virtual std::optional<DeviceTraffic> device_traffic() const { return std::nullopt; }
  virtual void reset_traffic() {}
  // Device time per op: while on, each op is timed on the device (no extra
  // waits); take_profile() waits for the device and returns the ops run
  // since profiling was switched on (or since the last take), in order.
  // Returns false (and times nothing) where the backend has no device clock.
  virtual bool set_profiling(bool /*on*/) { return false; }
  virtual std::vector<OpDeviceTime> take_profile() { return {}; }
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // After each op, with its inputs and outputs.
  virtual void on_op(const OpCall& /*call*/) {}
  // Named intermediate tensors of the model (golden naming, e.g.
  // "decoder.layer_out.3"), emitted at the points the reference defines.
  virtual void on_tap(std::string_view /*name*/, const Tensor& /*t*/) {}
  // Whether the model should also tap what its routed experts are fed
  // ("<pass>.experts.<layer>.input" and ".down_input", docs/model.md §1.5):
  // the second output of moe_experts, computed only when someone asks.
  virtual bool wants_expert_inputs() const { return false; }
};

class Executor {
 public:
  explicit Executor(Backend& backend, OpObserver* observer = nullptr) : backend_(&backend), observer_(observer) {}
  void run(const OpCall& call) {
    if (!observer_ && !call.device_outputs && backend_->supports_device_outputs()) {
      OpCall resident = call;
      resident.device_outputs = true;
      prepare_op(resident);
      backend_->run(resident);
      return;
    }
    prepare_op(call);
    backend_->run(call);
    if (observer_) {
      for (const Tensor* t : call.in) t->ensure_host();
      for (const Tensor* t : call.out) t->ensure_host();
      observer_->on_op(call);
    }
  }
  void tap(std::string_view name, const Tensor& t) {
    if (observer_) {
      t.ensure_host();
      observer_->on_tap(name, t);
    }
  }
  void set_observer(OpObserver* observer) { observer_ = observer; }
  OpObserver* observer() const { return observer_; }
  Backend& backend() { return *backend_; }

 private:
  Backend* backend_;
  OpObserver* observer_;
};

}  // namespace dgemma
