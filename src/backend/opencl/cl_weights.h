#pragma once
// The weights on the device (docs/opencl.md §1): each plain weight (F32, BF16,
// F16) is uploaded once, in its stored dtype, and found again by its data
// pointer, dtype and shape.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/opencl/cl_runtime.h"
#include "core/tensor.h"

namespace dgemma::opencl {

class WeightCache {
 public:
  explicit WeightCache(std::shared_ptr<ClRuntime> runtime) : runtime_(std::move(runtime)) {}
  ~WeightCache() { clear(); }
  WeightCache(const WeightCache&) = delete;
  WeightCache& operator=(const WeightCache&) = delete;

  // The device copy of `w` (uploaded on first use); `where` names the op.
  cl_mem get(const WeightRef& w, const std::string& where);
  void clear();
  int64_t bytes() const { return bytes_; }
  size_t size() const { return buffers_.size(); }

 private:
  using Key = std::tuple<const void*, DType, std::vector<int64_t>>;
  std::shared_ptr<ClRuntime> runtime_;
  std::map<Key, cl_mem> buffers_;
  int64_t bytes_ = 0;
};

}  // namespace dgemma::opencl
