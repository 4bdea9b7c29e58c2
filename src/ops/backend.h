#pragma once
// Backend interface over the op vocabulary, plus observation. A backend
// executes one OpCall at a time; the Executor validates the call, runs it and
// notifies the observer (which must not modify anything).
//
// Device residency (issue 15): a device backend may leave an op's outputs in
// its own memory (Tensor::device, host_stale) when the call allows it
// (OpCall::device_outputs), and reads inputs it already holds without a copy.
// The Executor allows it only when the backend supports it and no observer
// watches: observers, taps and host backends always see current host data
// (Tensor::ensure_host), so the CPU backend, doctor and the parity tools work
// unchanged. Host code that reads a tensor a device may hold calls
// ensure_host() first; host code that writes one calls host_written().
#include <string>
#include <string_view>

#include "ops/op.h"

namespace dgemma {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Outputs are already sized by prepare_op(). Inputs may carry device data
  // of any backend; a host backend calls ensure_host() on them.
  virtual void run(const OpCall& call) = 0;
  // Whether run() honours OpCall::device_outputs (keeps outputs on a device).
  virtual bool supports_device_outputs() const { return false; }
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // After each op, with its inputs and outputs.
  virtual void on_op(const OpCall& /*call*/) {}
  // Named intermediate tensors of the model (golden naming, e.g.
  // "decoder.layer_out.3"), emitted at the points the reference defines.
  virtual void on_tap(std::string_view /*name*/, const Tensor& /*t*/) {}
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
