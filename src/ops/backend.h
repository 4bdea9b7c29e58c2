#pragma once
// Backend interface over the op vocabulary, plus observation. A backend
// executes one OpCall at a time; the Executor validates the call, runs it and
// notifies the observer (which must not modify anything).
#include <string>
#include <string_view>

#include "ops/op.h"

namespace dgemma {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Outputs are already sized by prepare_op().
  virtual void run(const OpCall& call) = 0;
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
    prepare_op(call);
    backend_->run(call);
    if (observer_) observer_->on_op(call);
  }
  void tap(std::string_view name, const Tensor& t) {
    if (observer_) observer_->on_tap(name, t);
  }
  void set_observer(OpObserver* observer) { observer_ = observer; }
  OpObserver* observer() const { return observer_; }
  Backend& backend() { return *backend_; }

 private:
  Backend* backend_;
  OpObserver* observer_;
};

}  // namespace dgemma
