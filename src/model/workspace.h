#pragma once
// Activation buffers of the forward passes, one per op site ("mlp.up_proj",
// "lm_head", ...), kept across layers, steps and passes so that a denoising
// step allocates nothing once the first step has sized them (an allocation per step costs page faults and cache misses;
// the output of an op is resized in place by prepare_op, which keeps the capacity). A site is written once per layer,
// so a reference to its tensor stays valid until the same site runs again.
//
// Reused buffers hold the previous layer's values, so an op that read its
// output before writing all of it would silently compute garbage instead of
// the zeros a fresh buffer gave. Builds without NDEBUG (the sanitizer test
// build) therefore poison every handed-out buffer (NaN / INT32_MIN), and the
// parity tests then catch such a kernel.
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace dgemma {

class Workspace {
 public:
  Tensor& slot(std::string_view site);
  // Bytes held by all slots (capacity), for reports.
  size_t bytes() const;
  void clear() { slots_.clear(); }

 private:
  std::map<std::string, Tensor, std::less<>> slots_;
};

}  // namespace dgemma
