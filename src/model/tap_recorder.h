#pragma once
// An observer that keeps a copy of every named tap (golden naming, e.g.
// "decoder.layer_out.2"), optionally filtered by prefix.
#include <map>
#include <string>

#include "ops/backend.h"

namespace dgemma {

class TapRecorder : public OpObserver {
 public:
  // expert_inputs: also the taps of what the routed experts are fed
  // (OpObserver::wants_expert_inputs).
  explicit TapRecorder(bool expert_inputs = false) : expert_inputs_(expert_inputs) {}
  bool wants_expert_inputs() const override { return expert_inputs_; }
  void on_tap(std::string_view name, const Tensor& t) override { taps_[std::string(name)] = t; }
  const std::map<std::string, Tensor>& taps() const { return taps_; }
  const Tensor* find(const std::string& name) const {
    auto it = taps_.find(name);
    return it == taps_.end() ? nullptr : &it->second;
  }
  void clear() { taps_.clear(); }

 private:
  bool expert_inputs_;
  std::map<std::string, Tensor> taps_;
};

}  // namespace dgemma
