#pragma once
// Teacher-forced, op-by-op comparison of a target backend with the CPU
// reference. Every op first runs on the
// reference, whose outputs the model keeps using; the target then runs the
// same op on the same (reference) inputs into canary-padded outputs, and the
// outputs are compared. A listener hears each op before the target runs it
// (so a crash can be attributed) and after, with the comparison.
#include <memory>
#include <string>

#include "ops/backend.h"

namespace dgemma {

struct Tolerance {
  double atol = 1e-4;  // absolute
  double rtol = 1e-3;  // relative to the largest |reference| element of the output
  double min_cosine = 0.99999;
};

struct OpComparison {
  bool ok = true;
  // "value", "nan", "oob", "error", "unsupported" (the target's supports()
  // refused the op) or "" when ok
  std::string failure;
  std::string message;  // error text for "error"
  double max_abs = 0.0, max_rel = 0.0, cosine = 1.0;
  int output = 0;  // which output failed
};

class DifferentialListener {
 public:
  virtual ~DifferentialListener() = default;
  virtual void on_begin(int64_t index, const OpCall& call) = 0;
  virtual void on_result(int64_t index, const OpCall& call, const OpComparison& result) = 0;
};

struct DifferentialOptions {
  Tolerance tolerance;
  bool routing_from_reference = false;  // do not compare router_topk indices
  int64_t target_limit = -1;            // run the target only for op index < limit (-1: all)
};

class DifferentialBackend : public Backend {
 public:
  DifferentialBackend(Backend& reference, Backend& target, DifferentialListener& listener, DifferentialOptions options)
      : ref_(reference), target_(target), listener_(listener), options_(options) {}
  std::string name() const override { return "diff(" + ref_.name() + " vs " + target_.name() + ")"; }
  void run(const OpCall& call) override;
  ThreadPool* host_pool() override { return ref_.host_pool(); }
  // Both must run the call: the checker compares them.
  bool supports(const OpCall& call, std::string* why = nullptr) const override {
    return ref_.supports(call, why) && target_.supports(call, why);
  }
  int64_t ops_seen() const { return index_; }

 private:
  Backend& ref_;
  Backend& target_;
  DifferentialListener& listener_;
  DifferentialOptions options_;
  int64_t index_ = 0;
};

// Compares one output tensor (exported for tests).
OpComparison compare_output(const Tensor& reference, const Tensor& target, const Tolerance& tol);

}  // namespace dgemma
